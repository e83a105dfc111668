/**
 * The anonymity proxy (spec §4.7, docs/proxy.md): a signed-in user's one-shot HTTP request through
 * the SOCKS upstream, and the WebSocket routes' HTTP side. Grant `proxy` and a genuine end-user
 * wallet session token (policy `session("proxy")`): an API key, a token exchanged from one and a
 * deployed app's workload token are refused 403 SESSION_REQUIRED.
 *
 * `/v1/proxy/tunnel` and `/v1/proxy/relay` (anonymous) are WebSocket routes (WebSocketRoute): the
 * `upgrade` listener answers their handshakes through these endpoints' gates, policies and query
 * schemas (src/api/Upgrades.ts), then src/layers/proxy/ProxySockets.ts takes the socket; the same
 * path without an upgrade is 400 BAD_REQUEST. The endpoints list what a handshake can be refused with.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { ProxyRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { OpenGate, SessionAuthentication } from "../Gates.js"
import { open, session } from "../Policy.js"
import { RoutePolicy, WebSocketRoute } from "../RouteFacts.js"
import { strict } from "../Wire.js"

const Method = Schema.Literal("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

export const AnonRequestBody = strict(
  Schema.Struct({
    method: Method,
    url: Schema.String.pipe(Schema.maxLength(8192)).annotations({
      description: "absolute http or https URL; host a public name or address, port 80 or 443 (the scheme's default when absent), no credentials"
    }),
    headers: Schema.optional(
      Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
        description:
          "request headers, at most 64, values at most 8 KiB; CR, LF or NUL in a name or value is 400, and so is one name given twice in two spellings (names are case-insensitive); hop-by-hop headers (Connection and those it names, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade, Proxy-*) and Host and Content-Length are dropped (the gateway sets Host, Content-Length and Connection: close)"
      })
    ),
    body: Schema.optional(
      Schema.String.annotations({ description: "the request body, base64 (standard alphabet, padded); at most 1 MiB decoded by default (413 past it)" })
    )
  })
).annotations({ identifier: "ProxyAnonRequest" })

export const AnonAnswer = Schema.Union(
  Schema.Struct({
    status_code: Schema.Number,
    headers: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
      description: "the destination's headers, names lowercased, hop-by-hop ones dropped; repeats joined by ', ' (Set-Cookie by newlines)"
    }),
    body: Schema.String.annotations({ description: "the response body, base64; at most 4 MiB decoded by default" })
  }).annotations({ identifier: "ProxyAnonResponse" }),
  Schema.Struct({
    error: Schema.String.annotations({
      description: "the request failed past the upstream: the destination unreachable through it, TLS refused, a malformed answer, the timeout, the body over its cap"
    })
  }).annotations({ identifier: "ProxyAnonFailure" })
)

/** The handshake's success: the upgrade (101); without `Upgrade: websocket` the route answers 400 BAD_REQUEST. */
const Upgraded = Schema.Void.annotations({ description: "101 Switching Protocols: binary frames carry the TCP stream both ways" })

/**
 * A port as plain decimal digits without a leading zero: `0443` and `080` would be other spellings
 * of a port the rules allow, and an empty `port` is no port. Which ports are allowed is the
 * route's rule (a refusal of its own, RELAY_DESTINATION_NOT_ALLOWED), not the query's shape.
 * `host` is optional in the schema so that a plain GET without it is still the route's 400
 * BAD_REQUEST (not a WebSocket); a handshake without it is 400 VALIDATION_FAILED from the route.
 */
const QueryPort = Schema.String.pipe(Schema.pattern(/^[1-9][0-9]{0,4}$/, { message: () => "a port in decimal digits, without a leading zero" }))

export const TunnelQuery = strict(
  Schema.Struct({
    host: Schema.optional(Schema.String.annotations({ description: "required: a hostname or public IP, resolved at the exit" })),
    port: Schema.optional(QueryPort.annotations({ description: "80 or 443, default 443" })),
    jwt: Schema.optional(Schema.String.annotations({ description: "the session's access token when the handshake cannot set Authorization" }))
  })
)
export const RelayQuery = strict(
  Schema.Struct({
    host: Schema.optional(Schema.String.annotations({ description: "required: ns-<namespace>.<base domain> of an existing namespace" })),
    port: Schema.optional(QueryPort.annotations({ description: "443, the default" })),
    circuit: Schema.optional(Schema.Literal("session"))
  })
)

/** What a WebSocket handshake can be refused with (answered as HTTP before the upgrade). */
const handshakeRefusals = [Wire.BadRequest, Wire.RelayDestinationNotAllowed, Wire.RelayDestinationUnreachable, Wire.RelayUnavailable, Wire.RateLimited] as const

export class ProxyGroup extends HttpApiGroup.make("proxy")
  .add(
    HttpApiEndpoint.post("anon", "/v1/proxy/anon")
      .setPayload(AnonRequestBody)
      .addSuccess(AnonAnswer)
      .addError(wiresOf(ProxyRefusals))
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session("proxy"))
  )
  .add(
    HttpApiEndpoint.get("tunnel", "/v1/proxy/tunnel")
      .setUrlParams(TunnelQuery)
      .addSuccess(Upgraded, { status: 101 })
      .addError(Schema.Union(...handshakeRefusals))
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session("proxy"))
      .annotate(WebSocketRoute, true)
  )
  .add(
    HttpApiEndpoint.get("relay", "/v1/proxy/relay")
      .setUrlParams(RelayQuery)
      .addSuccess(Upgraded, { status: 101 })
      .addError(Schema.Union(...handshakeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(WebSocketRoute, true)
  ) {}
