import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { unavailable } from "../../domain/Errors.js"
import { CorsOrigins } from "../../layers/namespaces/CorsOrigins.js"
import { PorticoApi } from "../Api.js"
import { CurrentPrincipal } from "../../domain/Principal.js"

export const CorsHandlers = HttpApiBuilder.group(PorticoApi, "cors", (handlers) =>
  Effect.gen(function* () {
    const origins = yield* CorsOrigins
    const storeDown = () => unavailable("registry unavailable")
    return handlers
      .handle("get", () =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          return { namespace: p.namespace, origins: [...(yield* Effect.mapError(origins.get(p.namespace), storeDown))] }
        })
      )
      .handle("set", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const set = yield* Effect.mapError(origins.set(p.namespace, payload.origins, p.subject), storeDown)
          return { namespace: p.namespace, origins: [...set] }
        })
      )
  })
)
