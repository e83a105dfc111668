import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { unavailable } from "../../domain/Errors.js"
import { Audit } from "../../layers/audit/Audit.js"
import { PorticoApi } from "../Api.js"
import { AUDIT_LIMIT } from "../groups/AuditGroup.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { CurrentPrincipal } from "../../domain/Principal.js"

export const AuditHandlers = HttpApiBuilder.group(PorticoApi, "audit", (handlers) =>
  Effect.gen(function* () {
    const audit = yield* Audit
    return handlers.handle("list", ({ urlParams }) =>
      Effect.gen(function* () {
        const p = yield* CurrentPrincipal
        const page = yield* audit
          .list(
            p.namespace,
            {
              action: urlParams.action,
              principal: urlParams.principal,
              since: urlParams.since === undefined ? undefined : urlParams.since * 1000
            },
            pageRequest(urlParams, AUDIT_LIMIT.default)
          )
          .pipe(Effect.mapError(() => unavailable("registry unavailable")))
        return {
          namespace: p.namespace,
          count: page.items.length,
          next_cursor: nextCursorOf(page),
          entries: page.items.map((e) => ({
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
