/**
 * The checks and writes every sign-in flow shares: the wallet's role, a wallet signature over a
 * message this gateway issued (its nonce spent once), a device's proof (spent once), new device
 * requests, and the tokens of an issued session. Each check refuses before anything is written.
 */
import { Clock, type Context, Effect, Option } from "effect"
import * as crypto from "node:crypto"
import { type DeviceKey, parseDeviceKey } from "../../domain/DeviceKey.js"
import { checkProof, type DeviceProofAction } from "../../domain/DeviceProof.js"
import { type Role, roleGrants } from "../../domain/Grants.js"
import { makeChallenge, parseMessage, verifySignIn } from "../../domain/Siwe.js"
import { ACCESS_TOKEN_SECONDS } from "../auth/Authenticator.js"
import type { PorticoConfig } from "../config/PorticoConfig.js"
import type { StoreError } from "../registry/RegistryStore.js"
import type { Sealer } from "../secrets/Sealer.js"
import type { KeyRing } from "../tokens/KeyRing.js"
import {
  CHALLENGE_SECONDS,
  DEVICE_CODE_SECONDS,
  type IssuedSession,
  namespaceHost,
  refuse,
  type SessionRefused,
  userCode
} from "./SessionModel.js"
import type { DeviceRow, RequestKind, SessionRepository } from "./SessionRepository.js"

/** A racing enrolment of the same key loses on the primary key: the refusal the spec names. */
export const keyTakenOnConstraint = <A>(write: Effect.Effect<A, StoreError>) =>
  Effect.catchIf(
    write,
    (e) => e.reason === "constraint",
    () => Effect.fail(refuse("DEVICE_KEY_TAKEN", "this device key was enrolled meanwhile"))
  )

export interface StepsDeps {
  readonly repo: SessionRepository
  readonly sealer: Context.Tag.Service<typeof Sealer>
  readonly ring: Context.Tag.Service<typeof KeyRing>
  readonly config: Context.Tag.Service<typeof PorticoConfig>
}

export const makeSessionSteps = ({ repo, sealer, ring, config }: StepsDeps) => {
  /** The wallet's role: a member's own, `user` for outsiders where sign-in is open. */
  const roleOf = (namespace: string, wallet: string, signIn: string) =>
    Effect.flatMap(
      repo.memberRole(namespace, wallet),
      Option.match({
        onSome: (role): Effect.Effect<Role, SessionRefused> => Effect.succeed(role),
        onNone: () =>
          signIn === "open"
            ? Effect.succeed("user" as const)
            : Effect.fail(refuse("NOT_A_MEMBER", "this namespace lets only its members sign in"))
      })
    )

  /** Refresh tokens and device codes are bearer secrets: kept only as keyed hashes. */
  const refreshHash = (token: string) => sealer.hash("refresh-token-hash", token)
  const deviceCodeHash = (deviceCode: string) => sealer.hash("refresh-token-hash", "device-code:" + deviceCode)

  const issue = (
    namespace: string,
    wallet: string,
    role: Role,
    sessionId: string,
    deviceId: string | undefined,
    refreshToken: string
  ): Effect.Effect<IssuedSession> =>
    Effect.map(
      ring.sign(
        {
          sub: wallet,
          ns: namespace,
          role,
          grants: [...roleGrants[role]],
          sid: sessionId,
          ...(deviceId === undefined ? {} : { did: deviceId })
        },
        ACCESS_TOKEN_SECONDS
      ),
      (token) => ({ accessToken: token, refreshToken, sessionId, subject: wallet, namespace, deviceId })
    )

  const deviceState = (row: DeviceRow): Effect.Effect<void, SessionRefused> => {
    if (row.status === "revoked") return Effect.fail(refuse("DEVICE_REVOKED", "this device was revoked"))
    if (row.status === "pending") return Effect.fail(refuse("DEVICE_PENDING", "this device waits for approval"))
    return Effect.void
  }

  /** A device key as stored (its JWK's JSON text); `unusable` is the refusal when it does not parse. */
  const keyOf = (jwkText: string, unusable: SessionRefused) =>
    Effect.mapError(
      Effect.flatMap(Effect.try({ try: () => JSON.parse(jwkText) as unknown, catch: () => "damaged" }), parseDeviceKey),
      () => unusable
    )

  /** Checks a device proof and spends its id once; nothing else is written on failure. */
  const spendProof = (action: DeviceProofAction, namespace: string, binding: string, key: DeviceKey, proof: unknown) =>
    Effect.gen(function* () {
      if (proof === undefined || proof === null) {
        return yield* refuse("DEVICE_PROOF_REQUIRED", "a device-bound credential needs a device_proof")
      }
      const now = yield* Clock.currentTimeMillis
      const checked = yield* Effect.mapError(checkProof({ proof, action, namespace, binding, key, now }), (e) =>
        refuse("DEVICE_PROOF_INVALID", e.reason)
      )
      const spent = yield* repo.spendProofNonce(checked.nonceKey, checked.nonceExpiresAt, now)
      if (!spent) return yield* refuse("DEVICE_PROOF_INVALID", "this proof was already used")
    })

  /** An enrolled, active device proves its key over `binding` for `action`; the proof is spent. */
  const proveWithDevice = (namespace: string, deviceId: string, action: DeviceProofAction, binding: string, proof: unknown) =>
    Effect.gen(function* () {
      const device = yield* repo.device(namespace, deviceId)
      if (Option.isNone(device)) return yield* refuse("DEVICE_REVOKED", "this device is gone")
      yield* deviceState(device.value)
      const key = yield* keyOf(device.value.publicJwk, refuse("DEVICE_REVOKED", "the device's stored key is unusable"))
      yield* spendProof(action, namespace, binding, key, proof)
    })

  /** A wallet's signature over a sign-in message naming this gateway (nonce not yet spent). */
  const verifiedWallet = (message: string, signature: string) =>
    Effect.gen(function* () {
      const parsed = yield* Effect.mapError(parseMessage(message), (e) =>
        refuse("SIGNATURE_INVALID", "not a sign-in message of this gateway: " + e.reason)
      )
      const now = yield* Clock.currentTimeMillis
      return yield* Effect.mapError(
        verifySignIn({ message, signature, expectedDomain: namespaceHost(parsed.namespace, config.baseDomain), now }),
        (e) => refuse("SIGNATURE_INVALID", e.reason)
      )
    })

  /** The sign-in message of a challenge: what `challenge` hands out and `spendNonce` rebuilds. */
  const challengeText = (namespace: string, wallet: string, deviceId: string | undefined, nonce: string, issuedAt: number) => {
    const host = namespaceHost(namespace, config.baseDomain)
    return makeChallenge({
      domain: host,
      wallet,
      namespace,
      deviceId,
      uri: `https://${host}`,
      chainId: 1,
      nonce,
      issuedAt,
      expirationTime: issuedAt + CHALLENGE_SECONDS * 1000
    })
  }

  /**
   * The message must be the very text this gateway issued for the nonce, not one with another
   * URI, chain, time or an added field the parser tolerates: it is rebuilt from the challenge
   * row (issued CHALLENGE_SECONDS before its expiry) and compared byte for byte. Then the nonce
   * is spent: the conditional update is the replay check.
   */
  const spendNonce = (message: string, nonce: string, namespace: string, wallet: string, deviceId: string | undefined) =>
    Effect.gen(function* () {
      const expiresAt = yield* repo.challengeExpiry(nonce)
      const issued = Option.isNone(expiresAt)
        ? undefined
        : yield* Effect.option(challengeText(namespace, wallet, deviceId, nonce, expiresAt.value - CHALLENGE_SECONDS * 1000))
      if (issued === undefined || Option.isNone(issued) || issued.value !== message) {
        return yield* refuse("SIGNATURE_INVALID", "the message is not the one this gateway issued for its nonce")
      }
      const now = yield* Clock.currentTimeMillis
      if (!(yield* repo.spendChallenge(nonce, namespace, wallet, deviceId, now))) {
        return yield* refuse("SIGNATURE_INVALID", "unknown, expired or already used challenge")
      }
    })

  const newCodes = Effect.sync(() => ({ deviceCode: "dc_" + crypto.randomBytes(32).toString("base64url"), userCode: userCode() }))

  /** The insert of a new pending device request with `codes`. */
  const requestInsert = (
    codes: { readonly deviceCode: string; readonly userCode: string },
    namespace: string,
    kind: RequestKind,
    wallet: string | undefined,
    key: DeviceKey | undefined,
    label: string,
    now: number
  ) =>
    repo.insertRequest({
      deviceCodeHash: deviceCodeHash(codes.deviceCode),
      userCode: codes.userCode,
      namespace,
      kind,
      wallet,
      deviceId: key?.id ?? "",
      publicJwk: key === undefined ? "" : JSON.stringify(key.jwk),
      label,
      createdAt: now,
      expiresAt: now + DEVICE_CODE_SECONDS * 1000
    })

  return {
    roleOf,
    refreshHash,
    deviceCodeHash,
    issue,
    deviceState,
    keyOf,
    spendProof,
    proveWithDevice,
    verifiedWallet,
    challengeText,
    spendNonce,
    newCodes,
    requestInsert
  }
}

export type SessionSteps = ReturnType<typeof makeSessionSteps>
