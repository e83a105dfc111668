import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import { CurrentPrincipal, type Principal } from "../../domain/Principal.js"
import type { CredentialSlot } from "../../domain/PushCredentials.js"
import { PushCredentials, type StoredCredential } from "../../layers/push/PushCredentials.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

export const PushHandlers = HttpApiBuilder.group(PorticoApi, "push", (handlers) =>
  Effect.gen(function* () {
    const credentials = yield* PushCredentials
    const stored = (p: Principal, s: StoredCredential) => ({
      namespace: p.namespace,
      provider: s.slot,
      configured: true as const,
      updated_at: s.updatedAt,
      updated_by: s.updatedBy,
      redacted: s.redacted
    })
    const put = (slot: CredentialSlot, body: unknown) =>
      Effect.flatMap(CurrentPrincipal, (p) => Effect.map(Effect.mapError(credentials.put(p, slot, body), refusedOrDown), (s) => stored(p, s)))
    const view = (slot: CredentialSlot) =>
      Effect.flatMap(CurrentPrincipal, (p) =>
        Effect.map(Effect.mapError(credentials.view(p, slot), refusedOrDown), (v) => ({
          namespace: p.namespace,
          provider: slot,
          configured: Option.isSome(v.stored),
          updated_at: Option.match(v.stored, { onNone: () => null, onSome: (s) => s.updatedAt }),
          updated_by: Option.match(v.stored, { onNone: () => null, onSome: (s) => s.updatedBy }),
          fields: Option.match(v.stored, { onNone: () => ({}), onSome: (s) => s.present })
        }))
      )
    const remove = (slot: CredentialSlot) =>
      Effect.flatMap(CurrentPrincipal, (p) =>
        Effect.map(Effect.mapError(credentials.remove(p, slot), refusedOrDown), (removed) => ({
          namespace: p.namespace,
          provider: slot,
          configured: false as const,
          removed
        }))
      )
    return handlers
      .handle("credentials", () =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(credentials.summary(p), refusedOrDown), (s) => ({ namespace: p.namespace, ...s }))
        )
      )
      .handle("putCredential", ({ path, payload }) => put(path.provider, payload))
      .handle("credential", ({ path }) => view(path.provider))
      .handle("removeCredential", ({ path }) => remove(path.provider))
      .handle("putConfig", ({ payload }) => put("push_config", payload))
      .handle("config", () => view("push_config"))
      .handle("removeConfig", () => remove("push_config"))
  })
)
