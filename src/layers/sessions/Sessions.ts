/**
 * Wallet sign-in and sessions: challenges with single-use nonces, sign-in with an optional
 * device binding (SignIn.ts), the device authorization flow (DeviceFlow.ts), rotating refresh
 * tokens with a one-time grace reuse and family revocation (Refresh.ts), device proofs, listing
 * and ending sessions, and the per-request standing of a session.
 *
 * This module wires the flows over the registry's sign-in tables (SessionRepository.ts). Every
 * check runs before anything is spent or written, except those that need a device code, which a
 * signature's nonce is spent before looking up (one signature, one guess); every conditional
 * write is an SQL predicate whose row count decides (rqlite has no interactive transactions).
 */
import { Clock, Context, Effect, Either, Layer, Option } from "effect"
import type { Role } from "../../domain/Grants.js"
import { SessionLiveness } from "../auth/Authenticator.js"
import { KeptReads } from "../registry/KeptReads.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"
import { KeyRing } from "../tokens/KeyRing.js"
import { makeDeviceFlow } from "./DeviceFlow.js"
import { makeRefresh } from "./Refresh.js"
import { refuse, type SessionsService } from "./SessionModel.js"
import { makeSessionRepository, type StandingRow } from "./SessionRepository.js"
import { makeSessionSteps } from "./SessionSteps.js"
import { makeSignIn } from "./SignIn.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export * from "./SessionModel.js"

/** A session stands while open, on an active device (if any), for a wallet that may still sign in. */
const standingOf = (found: Option.Option<StandingRow>): Option.Option<Role> =>
  Option.flatMap(found, (row) => {
    if (row.endedAt !== null || (row.status !== null && row.status !== "active")) return Option.none()
    // a member's role, else an end user where sign-in is open, else no longer let in
    if (row.role !== null) return Option.some(row.role)
    return row.signIn === "open" ? Option.some("user" as const) : Option.none()
  })

export class Sessions extends Context.Tag("portico/Sessions")<Sessions, SessionsService>() {
  /** The liveness check the authenticator needs, from the same service. */
  static readonly Liveness = Layer.effect(
    SessionLiveness,
    Effect.map(Sessions, (s) => ({ standing: s.standing, standingNow: s.standingNow }))
  )

  static readonly Live = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const kept = yield* KeptReads
      const stored = makeSessionRepository(yield* RegistryStore)
      // an ended session stops at once on this gateway: what it kept goes once the end committed
      const forgotten = <A, E>(write: Effect.Effect<A, E>) => Effect.tap(write, () => Effect.sync(kept.forget))
      const repo: typeof stored = {
        ...stored,
        endSession: (sessionId, reason, now) => forgotten(stored.endSession(sessionId, reason, now)),
        endWalletSession: (namespace, wallet, sessionId, reason, now) =>
          forgotten(stored.endWalletSession(namespace, wallet, sessionId, reason, now))
      }
      const sealer = yield* Sealer
      const steps = makeSessionSteps({ repo, sealer, ring: yield* KeyRing, config: yield* PorticoConfig })
      // On a registry that reads on the spot, a standing is read as it is now. On one that reads
      // over the network, a session found standing is kept a second (KeptReads.ts), so its burst
      // of requests takes the fast lane; one that does not stand is read again every time.
      const readNow = repo.standingNow
      const keptStanding = readNow === undefined ? kept.table<Role>() : undefined
      const standing = (sessionId: string) =>
        Effect.map(repo.standing(sessionId), (found) => {
          const role = standingOf(found)
          if (keptStanding !== undefined && Option.isSome(role)) keptStanding.set(sessionId, role.value)
          return role
        })
      const standingNow =
        readNow !== undefined
          ? (sessionId: string) => Either.map(readNow(sessionId), standingOf)
          : (sessionId: string) => {
              const role = keptStanding?.get(sessionId)
              return role === undefined ? undefined : Either.right(Option.some(role))
            }
      const service: SessionsService = {
        ...makeSignIn(repo, steps),
        ...makeDeviceFlow(repo, steps),
        refresh: makeRefresh(repo, steps, sealer),
        proveWithDevice: steps.proveWithDevice,
        list: (namespace, wallet, page) =>
          Effect.map(repo.openSessions(namespace, wallet, page), (found) => ({
            next: found.next,
            items: found.items.map((s) => ({
              id: s.id,
              deviceId: s.deviceId ?? undefined,
              createdAt: s.createdAt,
              refreshedAt: s.refreshedAt
            }))
          })),
        end: (input) =>
          Effect.gen(function* () {
            // A caller bound to a device proves it holds that device's key over the session id.
            if (input.callerDeviceId !== undefined) {
              yield* steps.proveWithDevice(input.namespace, input.callerDeviceId, "end-session", input.sessionId, input.deviceProof)
            }
            const now = yield* Clock.currentTimeMillis
            if (!(yield* repo.endWalletSession(input.namespace, input.wallet, input.sessionId, input.reason, now))) {
              return yield* refuse("NOT_FOUND", "no such session")
            }
          }),
        standing,
        standingNow
      }
      return service
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Sessions.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test,
          KeyRing.Test,
          PorticoConfig.Test,
          KeptReads.Test
        )
      )
    )
  )
}
