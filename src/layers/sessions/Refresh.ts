/**
 * Refreshing a session: the refresh token rotates on every use; a device-bound session proves its
 * device first (refused before anything is spent). A rotated token presented again yields the
 * same successor once within the grace window while that successor is unused (a lost response);
 * any other reuse means the token leaked, and the whole session ends.
 */
import { Clock, type Context, Effect, Option } from "effect"
import { isControlPlaneRole } from "../../domain/Grants.js"
import type { Sealer } from "../secrets/Sealer.js"
import { newToken, REFRESH_GRACE_MS, refuse, SESSION_IDLE_MS, type SessionsService, tokenPattern } from "./SessionModel.js"
import type { SessionRepository } from "./SessionRepository.js"
import type { SessionSteps } from "./SessionSteps.js"

const invalidRefresh = refuse("INVALID_REFRESH_TOKEN", "unknown, used or expired refresh token")

export const makeRefresh = (
  repo: SessionRepository,
  steps: SessionSteps,
  sealer: Context.Tag.Service<typeof Sealer>
): SessionsService["refresh"] => (input) =>
  Effect.gen(function* () {
    const match = tokenPattern.exec(input.refreshToken)
    if (match === null) return yield* invalidRefresh
    const hash = steps.refreshHash(input.refreshToken)
    const found = yield* repo.tokenSession(hash)
    if (Option.isNone(found)) return yield* invalidRefresh
    const row = found.value
    const now = yield* Clock.currentTimeMillis
    const { namespace, wallet } = row
    const sessionId = row.id
    const deviceId = row.deviceId ?? undefined
    if (row.endedAt !== null || now - row.refreshedAt > SESSION_IDLE_MS) return yield* invalidRefresh
    // The prefix is part of the credential: a dv1_ token only for a device-bound session.
    if ((match[1] === "dv1") !== (deviceId !== undefined)) return yield* invalidRefresh

    const ns = yield* repo.namespace(namespace)
    if (Option.isNone(ns)) return yield* invalidRefresh
    const role = yield* steps.roleOf(namespace, wallet, ns.value.signIn)
    if (deviceId !== undefined) {
      // Refused before anything is spent: no proof, no rotation, no nonce.
      if (input.deviceProof === undefined || input.deviceProof === null) {
        return yield* refuse("DEVICE_PROOF_REQUIRED", "a device-bound refresh needs a device_proof")
      }
      yield* steps.proveWithDevice(namespace, deviceId, "refresh", input.refreshToken, input.deviceProof)
    } else if (ns.value.devicePolicy !== "optional" && !isControlPlaneRole(role)) {
      return yield* refuse("DEVICE_REQUIRED", "this namespace needs a device-bound session")
    }

    if (row.usedAt === null) {
      const successor = newToken(deviceId !== undefined)
      const sealed = sealer.seal("refresh-successor", hash, new TextEncoder().encode(successor))
      if (yield* repo.rotate(hash, sealed, steps.refreshHash(successor), sessionId, now, SESSION_IDLE_MS)) {
        return yield* steps.issue(namespace, wallet, role, sessionId, deviceId, successor)
      }
    }
    // Presented again after rotation: read again, since a racing refresh may just have rotated it.
    const again = yield* repo.tokenSession(hash)
    const usedAt = Option.match(again, { onNone: () => 0, onSome: (r) => r.usedAt ?? 0 })
    const sealedSuccessor = Option.match(again, { onNone: () => null, onSome: (r) => r.successor })
    // "A lost response" means the successor never reached the client: the grace holds only
    // while the successor is unused. Otherwise an old token could be replayed down the chain.
    if (now - usedAt <= REFRESH_GRACE_MS && sealedSuccessor !== null) {
      const opened = yield* Effect.orElseSucceed(sealer.open("refresh-successor", hash, sealedSuccessor), () => undefined)
      if (opened !== undefined) {
        const successor = new TextDecoder().decode(opened)
        if (yield* repo.claimGrace(hash, steps.refreshHash(successor))) {
          return yield* steps.issue(namespace, wallet, role, sessionId, deviceId, successor)
        }
      }
    }
    yield* repo.endSession(sessionId, "refresh_token_reuse", yield* Clock.currentTimeMillis)
    return yield* refuse("INVALID_REFRESH_TOKEN", "refresh token reused: the session was ended")
  })
