import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { refusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { NamespaceTeardown } from "../../layers/namespaces/NamespaceTeardown.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

const answer = (namespace: string) => (outcome: { readonly cleanupPending: boolean }) => ({
  namespace,
  deleted: !outcome.cleanupPending,
  cleanup_pending: outcome.cleanupPending
})

export const NamespaceDeleteHandlers = HttpApiBuilder.group(PorticoApi, "namespaceDelete", (handlers) =>
  Effect.gen(function* () {
    const teardown = yield* NamespaceTeardown
    return handlers
      .handle("deleteNamespace", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          payload.namespace !== p.namespace
            ? Effect.fail(refusal("VALIDATION_FAILED", `namespace: name your own namespace (${p.namespace}) to confirm its deletion`))
            : Effect.map(Effect.mapError(teardown.remove(p.namespace, { actor: p.subject }), refusedOrDown), answer(p.namespace))
        )
      )
      .handle("removeNamespace", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(teardown.removeByOperator(payload.namespace, { actor: p.subject, reason: payload.reason }), refusedOrDown), answer(payload.namespace))
        )
      )
  })
)
