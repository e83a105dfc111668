/**
 * A namespace's session policy (spec §4.5, §5.11): `device_policy` optional | required | approval
 * and `sign_in` members | open. Tightening to required or approval revokes, in the same atomic
 * write, every API key an end user minted from a sign-in.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { KeptReads } from "../registry/KeptReads.js"
import { Audit } from "../audit/Audit.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { DevicePolicy, SignInPolicy } from "../../domain/SessionPolicy.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"


export { DevicePolicy, SignInPolicy }

export interface Policy {
  readonly devicePolicy: DevicePolicy
  readonly signIn: SignInPolicy
}

export interface SessionPolicyService {
  readonly get: (namespace: string) => Effect.Effect<Option.Option<Policy>, StoreError>
  /** Applies the given members, keeping the others; answers the policy and how many keys it revoked. */
  readonly set: (
    namespace: string,
    patch: { readonly devicePolicy: DevicePolicy | undefined; readonly signIn: SignInPolicy | undefined },
    actor: string
  ) => Effect.Effect<{ readonly policy: Policy; readonly revokedSignInKeys: number }, StoreError>
}

export class SessionPolicy extends Context.Tag("portico/SessionPolicy")<SessionPolicy, SessionPolicyService>() {
  static readonly Live = Layer.effect(
    SessionPolicy,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* Audit
      const kept = yield* KeptReads
      const get = (namespace: string) =>
        Effect.map(
          store.query({ sql: "SELECT device_policy, sign_in FROM namespaces WHERE name = ?", params: [namespace] }),
          (rows) =>
            Option.map(Option.fromNullable(rows[0]), (r) => ({
              devicePolicy: String(r.device_policy) as DevicePolicy,
              signIn: String(r.sign_in) as SignInPolicy
            }))
        )
      return {
        get,
        set: (namespace, patch, actor) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const strict = patch.devicePolicy === "required" || patch.devicePolicy === "approval"
            const closing = patch.signIn === "members"
            const entry = yield* audit.entry(namespace, "namespace.session_policy", actor, namespace, {
              device_policy: patch.devicePolicy ?? null,
              sign_in: patch.signIn ?? null
            })
            const results = yield* store.batch([
              {
                sql: "UPDATE namespaces SET device_policy = COALESCE(?, device_policy), sign_in = COALESCE(?, sign_in) WHERE name = ?",
                params: [patch.devicePolicy ?? null, patch.signIn ?? null, namespace]
              },
              // A stricter device policy ends the keys end users minted at sign-in (spec §4.5); a
              // wallet with a control-plane role is held to optional whatever the policy (§5.11),
              // so its keys stay. Closing sign-in to members ends the keys of those who are not.
              {
                sql: `UPDATE api_keys SET revoked_at = ? WHERE namespace = ? AND origin = 'sign-in' AND revoked_at IS NULL AND (
                        (? = 1 AND NOT EXISTS (SELECT 1 FROM members m WHERE m.namespace = api_keys.namespace
                          AND lower(m.wallet) = lower(api_keys.created_by) AND m.role IN ('owner', 'admin', 'developer')))
                        OR (? = 1 AND NOT EXISTS (SELECT 1 FROM members m WHERE m.namespace = api_keys.namespace
                          AND lower(m.wallet) = lower(api_keys.created_by))))`,
                params: [now, namespace, strict ? 1 : 0, closing ? 1 : 0]
              },
              entry
            ])
            kept.forget()
            const policy = yield* get(namespace)
            return {
              policy: Option.getOrElse(policy, () => ({ devicePolicy: "optional" as const, signIn: "members" as const })),
              revokedSignInKeys: results[1]?.rowsAffected ?? 0
            }
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    SessionPolicy.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Audit.Test,
          KeptReads.Test
        )
      )
    )
  )
}
