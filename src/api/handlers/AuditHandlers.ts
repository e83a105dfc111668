import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { unavailable } from "../../domain/Errors.js"
import { Audit } from "../../layers/audit/Audit.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"
import { requirePrincipal } from "./Principal.js"

export const AuditHandlers = HttpApiBuilder.group(PorticoApi, "audit", (handlers) =>
  Effect.gen(function* () {
    const audit = yield* Audit
    return handlers.handle("list", ({ urlParams }) =>
      Effect.gen(function* () {
        const p = yield* requirePrincipal
        const entries = yield* audit
          .list(p.namespace, {
            action: urlParams.action,
            principal: urlParams.principal,
            since: urlParams.since === undefined ? undefined : urlParams.since * 1000,
            limit: urlParams.limit ?? 50
          })
          .pipe(Effect.mapError(() => unavailable("registry unavailable")))
        return {
          namespace: p.namespace,
          count: entries.length,
          entries: entries.map((e) => ({
            id: e.id,
            at: toUnixSeconds(e.at),
            action: e.action,
            principal: e.principal,
            target: e.target,
            detail: e.detail
          }))
        }
      })
    )
  })
)
