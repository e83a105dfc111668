/**
 * The device authorization flow (RFC 8628 shaped): a new device asks to be linked, or a machine
 * without a wallet asks to log in; an active device of the account (for a link or an approval)
 * or a wallet signature (for a plain login) answers; the waiting device polls and collects its
 * session once.
 */
import { Clock, Effect, Option } from "effect"
import { type DeviceKey, parseDeviceKey } from "../../domain/DeviceKey.js"
import { isControlPlaneRole } from "../../domain/Grants.js"
import {
  DEVICE_CODE_SECONDS,
  MAX_POLL_INTERVAL_SECONDS,
  newSessionId,
  newToken,
  normalUserCode,
  POLL_INTERVAL_SECONDS,
  refuse,
  REQUEST_KEPT_AFTER_EXPIRY_MS,
  SLOW_DOWN_SECONDS,
  type SessionsService
} from "./SessionModel.js"
import type { SessionRepository } from "./SessionRepository.js"
import { keyTakenOnConstraint, type SessionSteps } from "./SessionSteps.js"

const noPending = () => refuse("NOT_FOUND", "no pending request with this user code")

export const makeDeviceFlow = (
  repo: SessionRepository,
  steps: SessionSteps
): Pick<SessionsService, "startDeviceRequest" | "approveFromDevice" | "answerLogin" | "collect"> => {
  /** A pending, unexpired request of the namespace under this user code (typed in any case, with or without the dash). */
  const pendingRequest = (namespace: string, userCode: string) =>
    Effect.gen(function* () {
      const request = yield* repo.requestByUserCode(namespace, normalUserCode(userCode))
      const now = yield* Clock.currentTimeMillis
      if (Option.isNone(request) || request.value.expiresAt <= now || request.value.status !== "pending") return yield* noPending()
      return request.value
    })

  /** Requests expired an hour ago go with the next one made; polling a dropped one answers `invalid_grant`. */
  const pruneRequests = (now: number) => repo.pruneRequests(now - REQUEST_KEPT_AFTER_EXPIRY_MS)

  return {
    startDeviceRequest: (input) =>
      Effect.gen(function* () {
        const ns = yield* repo.namespace(input.namespace)
        if (Option.isNone(ns)) return yield* refuse("NOT_FOUND", "no such namespace")
        const now = yield* Clock.currentTimeMillis
        let key: DeviceKey | undefined
        if (input.deviceKey !== undefined) {
          key = yield* Effect.mapError(parseDeviceKey(input.deviceKey), (e) => refuse("DEVICE_KEY_INVALID", e.reason))
          const known = yield* repo.device(input.namespace, key.id)
          if (Option.isSome(known)) {
            yield* steps.deviceState(known.value)
            return yield* refuse("DEVICE_KEY_TAKEN", "this device is already enrolled; sign in with it")
          }
        }
        const codes = yield* steps.newCodes
        yield* repo.batch([
          pruneRequests(now),
          steps.requestInsert(codes, input.namespace, key === undefined ? "login" : "link", undefined, key, input.deviceLabel ?? "", now)
        ])
        return { deviceCode: codes.deviceCode, userCode: codes.userCode, expiresIn: DEVICE_CODE_SECONDS, interval: POLL_INTERVAL_SECONDS }
      }),

    approveFromDevice: (input) =>
      Effect.gen(function* () {
        if (input.approverDeviceId === undefined) {
          return yield* refuse("DEVICE_REQUIRED", "only an active device of the account approves a device")
        }
        yield* steps.proveWithDevice(input.namespace, input.approverDeviceId, "approve", input.userCode, input.deviceProof)
        const request = yield* pendingRequest(input.namespace, input.userCode)
        if (request.kind === "login") return yield* refuse("FORBIDDEN", "a device cannot approve a plain login")
        if (request.kind === "approval" && request.wallet !== input.wallet) return yield* noPending()
        // Seedless linking: the new device takes its account from the approver.
        if (!(yield* repo.approveRequest(request.deviceCodeHash, input.approverDeviceId, input.wallet))) return yield* noPending()
      }),

    answerLogin: (input) =>
      Effect.gen(function* () {
        const signedIn = yield* steps.verifiedWallet(input.message, input.signature)
        // a message naming a device would stand for that device, which signs nothing here
        if (signedIn.deviceId !== undefined) {
          return yield* refuse("FORBIDDEN", "a plain login is answered with a wallet signature only; this message names a device")
        }
        const ns = yield* repo.namespace(signedIn.namespace)
        if (Option.isNone(ns)) return yield* refuse("NOT_FOUND", "no such namespace")
        // approving and denying alike are for wallets that may sign in here (roleOf refuses others)
        const role = yield* steps.roleOf(signedIn.namespace, signedIn.wallet, ns.value.signIn)
        // one signature, one try: the nonce is spent before the code is looked up
        yield* steps.spendNonce(input.message, signedIn.nonce, signedIn.namespace, signedIn.wallet, signedIn.deviceId)
        const request = yield* pendingRequest(signedIn.namespace, input.userCode)
        // a link is never a wallet's to approve, whatever the policy; a plain login is, where
        // sessions need no device (spec §5.11: DEVICE_REQUIRED is the plain login's refusal)
        if (request.kind !== "login") return yield* refuse("FORBIDDEN", "a wallet signature cannot approve a device link")
        if (!input.deny && ns.value.devicePolicy !== "optional" && !isControlPlaneRole(role)) {
          return yield* refuse("DEVICE_REQUIRED", "this namespace needs device-bound sessions")
        }
        const answered = yield* repo.answerRequest(request.deviceCodeHash, input.deny ? "denied" : "approved", signedIn.wallet)
        if (!answered) return yield* noPending()
      }),

    collect: (input) =>
      Effect.gen(function* () {
        const hash = steps.deviceCodeHash(input.deviceCode)
        const found = yield* repo.requestByDeviceCode(hash)
        if (Option.isNone(found)) return yield* refuse("invalid_grant", "unknown device code")
        const request = found.value
        const { namespace, kind } = request
        const now = yield* Clock.currentTimeMillis
        let key: DeviceKey | undefined
        if (kind !== "login") {
          key = yield* steps.keyOf(request.publicJwk, refuse("invalid_grant", "the request's device key is unusable"))
          yield* steps.spendProof("claim", namespace, input.deviceCode, key, input.deviceProof)
        }
        if (request.expiresAt <= now || request.status === "collected") {
          return yield* refuse("expired_token", "the device code expired or was used")
        }
        if (request.status === "denied") return yield* refuse("access_denied", "the request was denied")
        if (request.status === "revoked") return yield* refuse("DEVICE_REVOKED", "this device was revoked")
        if (request.status === "pending") {
          // RFC 8628 §3.5: a poll sooner than the interval after the last one is slow_down,
          // and the interval the poller must keep grows by 5 s for the rest of this request
          // (up to MAX_POLL_INTERVAL_SECONDS). Every poll counts as the last one.
          const last = request.lastPollAt ?? undefined
          const interval = request.pollInterval ?? POLL_INTERVAL_SECONDS
          const tooSoon = last !== undefined && now - last < interval * 1000
          const slower = Math.min(interval + SLOW_DOWN_SECONDS, MAX_POLL_INTERVAL_SECONDS)
          yield* repo.recordPoll(hash, now, tooSoon ? slower : interval)
          return yield* tooSoon
            ? refuse("slow_down", `poll less often: wait at least ${slower} s between polls from now on`)
            : refuse("authorization_pending", "waiting for approval")
        }
        const wallet = String(request.wallet)
        const deviceId = kind === "login" ? undefined : request.deviceId
        if (request.approvedBy !== null && kind !== "login") {
          // The approver must still be active when the new device collects.
          const approver = yield* repo.device(namespace, request.approvedBy)
          if (Option.isNone(approver) || approver.value.status !== "active") {
            return yield* refuse("access_denied", "the approving device is no longer active")
          }
        }
        // A device revoked after its request was approved does not collect a session.
        if (deviceId !== undefined) {
          const device = yield* repo.device(namespace, deviceId)
          if (Option.isSome(device) && device.value.status === "revoked") {
            return yield* refuse("DEVICE_REVOKED", "this device was revoked")
          }
        }
        const ns = yield* repo.namespace(namespace)
        if (Option.isNone(ns)) return yield* refuse("expired_token", "the namespace is gone")
        const role = yield* steps.roleOf(namespace, wallet, ns.value.signIn)
        // The policy in force at collection decides: a plain login approved under optional
        // is not a device-less session for an end user once the namespace requires devices.
        if (deviceId === undefined && ns.value.devicePolicy !== "optional" && !isControlPlaneRole(role)) {
          return yield* refuse("DEVICE_REQUIRED", "this namespace needs device-bound sessions")
        }
        const sessionId = newSessionId()
        const refreshToken = newToken(deviceId !== undefined)
        const statements = repo.collectStatements({
          deviceCodeHash: hash,
          sessionId,
          namespace,
          wallet,
          kind,
          deviceId,
          newDevice:
            kind === "link" && key !== undefined
              ? { namespace, id: key.id, wallet, publicJwk: JSON.stringify(key.jwk), label: request.label, createdAt: now }
              : undefined,
          refreshHash: steps.refreshHash(refreshToken),
          now
        })
        const [first] = yield* keyTakenOnConstraint(repo.batch(statements))
        if (first === undefined || first.rowsAffected === 0) return yield* refuse("expired_token", "the device code was used")
        return yield* steps.issue(namespace, wallet, role, sessionId, deviceId, refreshToken)
      })
  }
}
