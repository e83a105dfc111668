import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import { refusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { NamespaceCreation } from "../../layers/namespaces/NamespaceCreation.js"
import { Operators } from "../../layers/operators/Operators.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"

export const NamespaceCreateHandlers = HttpApiBuilder.group(PorticoApi, "namespaceCreate", (handlers) =>
  Effect.gen(function* () {
    const creation = yield* NamespaceCreation
    const operators = yield* Operators
    return handlers
      .handle("createNamespace", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(creation.create(payload.name, p.subject), refusedOrDown), (c) => ({
            namespace: c.record.name,
            owner: p.subject,
            created_at: toUnixSeconds(c.record.createdAt),
            api_key: c.ownerKey.apiKey,
            key_id: c.ownerKey.record.id
          }))
        )
      )
      .handle("listNamespaces", () =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const all = yield* Effect.mapError(operators.isOperator(p.subject), refusedOrDown)
          const found = yield* Effect.mapError(creation.list(p.subject, all), refusedOrDown)
          return { all, namespaces: found.map((n) => ({ name: n.name, owner: n.owner ?? null, created_at: toUnixSeconds(n.createdAt), role: n.role ?? null })) }
        })
      )
      .handle("namespaceStatus", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          if (urlParams.id === undefined || urlParams.id === "") return yield* Effect.fail(refusal("VALIDATION_FAILED", "id: the namespace's name is required"))
          const found = yield* Effect.mapError(creation.status(urlParams.id), refusedOrDown)
          // a namespace the caller is not in reads as unknown, unless the caller is an operator
          const visible =
            Option.isSome(found) &&
            (found.value.owner === p.subject ||
              (yield* Effect.mapError(creation.roleIn(found.value.name, p.subject), refusedOrDown)) !== undefined ||
              (yield* Effect.mapError(operators.isOperator(p.subject), refusedOrDown)))
          if (!visible || Option.isNone(found)) return yield* Effect.fail(refusal("NOT_FOUND", "no such namespace"))
          const s = found.value
          return { name: s.name, owner: s.owner ?? null, created_at: toUnixSeconds(s.createdAt), members: s.members, deleting: s.deleting }
        })
      )
  })
)
