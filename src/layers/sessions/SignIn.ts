/**
 * Wallet sign-in: a challenge with a single-use nonce, then its signed message, optionally with a
 * device that signs the same bytes. What happens to the device is the pure enrolment decision
 * (src/domain/Enrolment.ts); this module reads its inputs and carries out its answer. Every check
 * runs before the nonce is spent, and nothing is written before it is.
 */
import { Clock, Effect, Option } from "effect"
import { assertDeviceId, type DeviceKey, parseDeviceKey, verifyDeviceSignature } from "../../domain/DeviceKey.js"
import { decideEnrolment, type DeviceRecord, needsActiveDevices } from "../../domain/Enrolment.js"
import { newNonce } from "../../domain/Siwe.js"
import type { Statement } from "../registry/RegistryStore.js"
import {
  CHALLENGE_SECONDS,
  ENDED_SESSION_KEPT_MS,
  newSessionId,
  newToken,
  refuse,
  REQUEST_KEPT_AFTER_EXPIRY_MS,
  SESSION_IDLE_MS,
  type SessionsService
} from "./SessionModel.js"
import type { SessionRepository } from "./SessionRepository.js"
import { keyTakenOnConstraint, type SessionSteps } from "./SessionSteps.js"

export const makeSignIn = (repo: SessionRepository, steps: SessionSteps): Pick<SessionsService, "challenge" | "verify"> => ({
  challenge: ({ wallet, namespace, deviceId }) =>
    Effect.gen(function* () {
      const ns = yield* repo.namespace(namespace)
      if (Option.isNone(ns)) return yield* refuse("NOT_FOUND", "no such namespace")
      const now = yield* Clock.currentTimeMillis
      const nonce = newNonce()
      const message = yield* Effect.mapError(steps.challengeText(namespace, wallet, deviceId, nonce, now), (e) =>
        refuse("VALIDATION_FAILED", e.reason)
      )
      const expiresAt = now + CHALLENGE_SECONDS * 1000
      yield* repo.addChallenge(nonce, namespace, wallet.toLowerCase(), deviceId, now, expiresAt)
      return { message, nonce, expiresAt }
    }),

  verify: (input) =>
    Effect.gen(function* () {
      const signedIn = yield* steps.verifiedWallet(input.message, input.signature)
      const now = yield* Clock.currentTimeMillis
      const { namespace, wallet } = signedIn
      const ns = yield* repo.namespace(namespace)
      if (Option.isNone(ns)) return yield* refuse("SIGNATURE_INVALID", "no such namespace")

      // The device signs the very bytes the wallet signed, with the key the message names.
      let device: DeviceKey | undefined
      if (signedIn.deviceId !== undefined || input.deviceKey !== undefined) {
        if (signedIn.deviceId === undefined || input.deviceKey === undefined) {
          return yield* refuse("DEVICE_KEY_INVALID", "the message and the request must name the same device")
        }
        const key = yield* Effect.mapError(parseDeviceKey(input.deviceKey), (e) => refuse("DEVICE_KEY_INVALID", e.reason))
        yield* Effect.mapError(assertDeviceId(key, signedIn.deviceId), (e) => refuse("DEVICE_KEY_INVALID", e.reason))
        if (input.deviceSignature === undefined) {
          return yield* refuse("DEVICE_SIGNATURE_INVALID", "device_signature is required with device_key")
        }
        yield* Effect.mapError(verifyDeviceSignature(key, input.message, input.deviceSignature), (e) =>
          refuse("DEVICE_SIGNATURE_INVALID", e.reason)
        )
        device = key
      }

      const role = yield* steps.roleOf(namespace, wallet, ns.value.signIn)
      // A sign-in binding no device is decided before the device table is read.
      const existing: DeviceRecord | undefined =
        device === undefined ? undefined : Option.getOrUndefined(yield* repo.device(namespace, device.id))
      const facts = { policy: ns.value.devicePolicy, role, wallet, bindsDevice: device !== undefined, existing }
      const activeDevices = needsActiveDevices(facts) ? yield* repo.activeDevices(namespace, wallet) : 0
      const decision = decideEnrolment({ ...facts, activeDevices })
      if (decision._tag === "Refuse") return yield* refuse(decision.code, decision.reason)

      // One spent nonce per sign-in: the conditional update is the replay check.
      yield* steps.spendNonce(input.message, signedIn.nonce, namespace, wallet, signedIn.deviceId)

      const label = input.deviceLabel ?? ""
      const newDevice =
        device === undefined
          ? undefined
          : { namespace, id: device.id, wallet, publicJwk: JSON.stringify(device.jwk), label, createdAt: now }
      if (decision._tag === "Pending" && device !== undefined && newDevice !== undefined) {
        // A device waits for an active device of the account: spec §7 "DEVICE_PENDING … (202 on
        // sign-in)". A pending device signing in again gets a fresh request.
        const codes = yield* steps.newCodes
        const statements: Array<Statement> = [repo.pruneRequests(now - REQUEST_KEPT_AFTER_EXPIRY_MS)]
        if (decision.device === "enrol") statements.push(repo.insertDevice(newDevice, "pending"))
        statements.push(steps.requestInsert(codes, namespace, "approval", wallet, device, label, now))
        // only a new pending device can lose a race on its key
        yield* decision.device === "enrol" ? keyTakenOnConstraint(repo.batch(statements)) : repo.batch(statements)
        return { _tag: "Pending" as const, userCode: codes.userCode, deviceCode: codes.deviceCode }
      }

      const sessionId = newSessionId()
      const refreshToken = newToken(device !== undefined)
      const statements: Array<Statement> = []
      if (decision._tag === "Issue" && newDevice !== undefined) {
        // activating only from pending: a revocation that landed meanwhile stays (and the session
        // below then stands on a revoked device, which every request refuses)
        if (decision.device === "activate") statements.push(repo.activatePending(namespace, newDevice.id, wallet))
        // a racing sign-in with the same new key for another wallet loses on the key
        if (decision.device === "enrol") statements.push(repo.insertDevice(newDevice, "active"))
      }
      // this wallet's sessions ended over a day ago, or idle past their window, go now
      statements.push(
        ...repo.pruneSessions(namespace, wallet, now - ENDED_SESSION_KEPT_MS, now - SESSION_IDLE_MS),
        ...repo.insertSession(sessionId, namespace, wallet, device?.id, steps.refreshHash(refreshToken), now)
      )
      yield* keyTakenOnConstraint(repo.batch(statements))
      const issued = yield* steps.issue(namespace, wallet, role, sessionId, device?.id, refreshToken)
      return { _tag: "Issued" as const, ...issued }
    })
})
