/**
 * The one-endpoint HttpApi app every Effect target of the floor benchmark serves:
 * `GET /v1/auth/whoami` behind a bearer-auth HttpApiMiddleware that looks the
 * token up in an in-memory Map, answering the same JSON as the bare server.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity
} from "@effect/platform"
import { Context, Effect, Layer, Redacted, Schema } from "effect"

export const Whoami = Schema.Struct({
  namespace: Schema.String,
  subject: Schema.String,
  method: Schema.String,
  role: Schema.String,
  grants: Schema.Array(Schema.String)
})
export type Whoami = typeof Whoami.Type

export const TOKEN = "pk_bench_token_abc"
export const principals = new Map<string, Whoami>([
  [TOKEN, { namespace: "ns", subject: "key:abc", method: "api_key", role: "admin", grants: ["cache"] }]
])

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { error: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

export class Principal extends Context.Tag("bench/Principal")<Principal, Whoami>() {}

export class Auth extends HttpApiMiddleware.Tag<Auth>()("bench/Auth", {
  failure: Unauthorized,
  provides: Principal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

export const Api = HttpApi.make("floor").add(
  HttpApiGroup.make("auth")
    .add(HttpApiEndpoint.get("whoami", "/v1/auth/whoami").addSuccess(Whoami))
    .middleware(Auth)
)

const AuthLive = Layer.succeed(
  Auth,
  Auth.of({
    bearer: (token) => {
      const p = principals.get(Redacted.value(token))
      return p === undefined ? Effect.fail(new Unauthorized({ error: "unauthorized" })) : Effect.succeed(p)
    }
  })
)

const AuthGroupLive = HttpApiBuilder.group(Api, "auth", (handlers) => handlers.handle("whoami", () => Principal))

/** Api layer; the server choice (official or lean) is left to the caller. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(Layer.provide(AuthGroupLive), Layer.provide(AuthLive))
