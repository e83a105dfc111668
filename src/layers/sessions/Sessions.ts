/**
 * Wallet sign-in and sessions: challenges with single-use nonces, sign-in with an optional
 * device binding, rotating refresh tokens with a one-time grace reuse and family revocation,
 * device proofs on device-bound refreshes, and ending sessions.
 *
 * Every check runs before anything is spent or written; every conditional write is an SQL
 * predicate whose row count decides (rqlite has no interactive transactions).
 */
import { Clock, Context, Data, Effect, Either, Layer, Option } from "effect"
import * as crypto from "node:crypto"
import { assertDeviceId, type DeviceKey, parseDeviceKey, verifyDeviceSignature } from "../../domain/DeviceKey.js"
import { checkProof, type DeviceProofAction } from "../../domain/DeviceProof.js"
import { isControlPlaneRole, type Role, roleGrants } from "../../domain/Grants.js"
import { makeChallenge, newNonce, parseMessage, verifySignIn } from "../../domain/Siwe.js"
import { ACCESS_TOKEN_SECONDS, SessionLiveness } from "../auth/Authenticator.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Row, type StoreError } from "../registry/RegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"
import { KeyRing } from "../tokens/KeyRing.js"

/** A sign-in or session rule refused the request; `code` is the wire code (spec §7 where named). */
export class SessionRefused extends Data.TaggedError("SessionRefused")<{
  readonly status: 400 | 401 | 403 | 404
  readonly code: string
  readonly reason: string
}> {}

const refuse = (status: 400 | 401 | 403 | 404, code: string, reason: string) =>
  new SessionRefused({ status, code, reason })

export const CHALLENGE_SECONDS = 5 * 60
/** Device and user codes of a pending device live 10 minutes; pollers wait 5 s between polls. */
export const DEVICE_CODE_SECONDS = 10 * 60
export const POLL_INTERVAL_SECONDS = 5
/** What each slow_down adds to a device request's poll interval (RFC 8628 §3.5). */
export const SLOW_DOWN_SECONDS = 5
/** The poll interval stops growing here: a client that overran it still collects within the code's life. */
export const MAX_POLL_INTERVAL_SECONDS = 60

/** User codes are typed by people: 8 letters without vowels (no accidental words), shown as ABCD-EFGH. */
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
const normalUserCode = (code: string): string => {
  const bare = code.toUpperCase().replace("-", "")
  return bare.slice(0, 4) + "-" + bare.slice(4)
}

const userCode = (): string => {
  const bytes = crypto.randomBytes(8)
  let out = ""
  for (let i = 0; i < 8; i++) out += USER_CODE_ALPHABET[(bytes[i] ?? 0) % USER_CODE_ALPHABET.length]
  return out.slice(0, 4) + "-" + out.slice(4)
}
/** How long a rotated refresh token may be presented once more (a lost response, a retry). */
export const REFRESH_GRACE_MS = 30_000
/** Sessions end after 30 days without a refresh. */
export const SESSION_IDLE_MS = 30 * 86_400_000

/** An ended session's rows are kept a day (its tokens answer 401 either way), then dropped. */
const ENDED_SESSION_KEPT_MS = 86_400_000

/** A device request is kept an hour past its expiry, so a late poll still hears `expired_token`. */
const REQUEST_KEPT_AFTER_EXPIRY_MS = 3_600_000

export interface Challenge {
  readonly message: string
  readonly nonce: string
  readonly expiresAt: number
}

export interface IssuedSession {
  readonly accessToken: string
  readonly refreshToken: string
  readonly sessionId: string
  readonly subject: string
  readonly namespace: string
  readonly deviceId: string | undefined
}

/** A further device under policy `approval`: it waits for an active device of the account. */
export interface PendingApproval {
  readonly _tag: "Pending"
  readonly userCode: string
  readonly deviceCode: string
}

export type SignInResult = ({ readonly _tag: "Issued" } & IssuedSession) | PendingApproval

export interface DeviceCodes {
  readonly deviceCode: string
  readonly userCode: string
  readonly expiresIn: number
  readonly interval: number
}

export interface SessionView {
  readonly id: string
  readonly deviceId: string | undefined
  readonly createdAt: number
  readonly refreshedAt: number
}

export interface SessionsService {
  readonly challenge: (input: {
    readonly wallet: string
    readonly namespace: string
    readonly deviceId: string | undefined
  }) => Effect.Effect<Challenge, SessionRefused | StoreError>
  readonly verify: (input: {
    readonly message: string
    readonly signature: string
    readonly deviceKey: unknown
    readonly deviceSignature: string | undefined
    readonly deviceLabel: string | undefined
  }) => Effect.Effect<SignInResult, SessionRefused | StoreError>
  /** A new device asks to be linked (with its key) or a wallet-less machine asks to log in. */
  readonly startDeviceRequest: (input: {
    readonly namespace: string
    readonly deviceKey: unknown
    readonly deviceLabel: string | undefined
  }) => Effect.Effect<DeviceCodes, SessionRefused | StoreError>
  /** An active device of an account approves a pending device or a link, proving over the user code. */
  readonly approveFromDevice: (input: {
    readonly namespace: string
    readonly wallet: string
    readonly approverDeviceId: string | undefined
    readonly userCode: string
    readonly deviceProof: unknown
  }) => Effect.Effect<void, SessionRefused | StoreError>
  /** A wallet signature approves, or denies, a plain login code. */
  readonly answerLogin: (input: {
    readonly userCode: string
    readonly message: string
    readonly signature: string
    readonly deny: boolean
  }) => Effect.Effect<void, SessionRefused | StoreError>
  /** The waiting device polls; once approved it collects its session, once. */
  readonly collect: (input: {
    readonly deviceCode: string
    readonly deviceProof: unknown
  }) => Effect.Effect<IssuedSession, SessionRefused | StoreError>
  readonly refresh: (input: {
    readonly refreshToken: string
    readonly deviceProof: unknown
  }) => Effect.Effect<IssuedSession, SessionRefused | StoreError>
  /** One page of the wallet's open sessions, oldest first (key: created_at, id). */
  readonly list: (namespace: string, wallet: string, page: PageRequest) => Effect.Effect<Page<SessionView>, StoreError>
  /** Ends one of the wallet's sessions; a device-bound caller proves its key over the session id. */
  readonly end: (input: {
    readonly namespace: string
    readonly wallet: string
    readonly sessionId: string
    /** The device the calling session is bound to, if any: it must prove its key. */
    readonly callerDeviceId: string | undefined
    readonly deviceProof: unknown
    readonly reason: string
  }) => Effect.Effect<void, SessionRefused | StoreError>
  /** An enrolled, active device proves its key over `binding` for `action`; the proof is spent once. */
  readonly proveWithDevice: (
    namespace: string,
    deviceId: string,
    action: DeviceProofAction,
    binding: string,
    proof: unknown
  ) => Effect.Effect<void, SessionRefused | StoreError>
  /**
   * The role a session's wallet holds now, when the session stands, its device (if any) is
   * active and the wallet may still sign in (checked per request).
   */
  readonly standing: (sessionId: string) => Effect.Effect<Option.Option<Role>, StoreError>
  /** `standing` answered on the spot, where the registry reads on the spot. */
  readonly standingNow?: ((sessionId: string) => Either.Either<Option.Option<Role>, StoreError>) | undefined
}

/** The session, its device, the wallet's membership and the namespace's sign-in rule, in one read. */
const standingStatement = (sessionId: string) => ({
  sql: `SELECT s.ended_at, d.status, m.role, n.sign_in FROM sessions s
        LEFT JOIN devices d ON d.namespace = s.namespace AND d.id = s.device_id
        LEFT JOIN members m ON m.namespace = s.namespace AND m.wallet = s.wallet
        LEFT JOIN namespaces n ON n.name = s.namespace
        WHERE s.id = ?`,
  params: [sessionId]
})

const standingOf = (rows: ReadonlyArray<Row>): Option.Option<Role> => {
  const row = rows[0]
  if (row === undefined || row.ended_at !== null || (row.status !== null && row.status !== "active")) return Option.none()
  // a member's role, else an end user where sign-in is open, else no longer let in
  if (typeof row.role === "string") return Option.some(row.role as Role)
  return row.sign_in === "open" ? Option.some("user" as const) : Option.none()
}

const tokenPattern = /^(rt1|dv1)_[A-Za-z0-9_-]{43}$/
const newToken = (deviceBound: boolean) => (deviceBound ? "dv1_" : "rt1_") + crypto.randomBytes(32).toString("base64url")
const newSessionId = () => "ses_" + crypto.randomBytes(16).toString("hex")

/** The namespace gateway's host: sign-in messages name it, and verify refuses any other. */
export const namespaceHost = (namespace: string, baseDomain: string) => `ns-${namespace}.${baseDomain}`

export class Sessions extends Context.Tag("portico/Sessions")<Sessions, SessionsService>() {
  /** The liveness check the authenticator needs, from the same service. */
  static readonly Liveness = Layer.effect(
    SessionLiveness,
    Effect.map(Sessions, (s) => ({ standing: s.standing, standingNow: s.standingNow }))
  )

  static readonly Live = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const readNow = store.queryNow
      const sealer = yield* Sealer
      const ring = yield* KeyRing
      const config = yield* PorticoConfig

      const namespaceRow = (namespace: string) =>
        Effect.map(
          store.query({ sql: "SELECT name, device_policy, sign_in FROM namespaces WHERE name = ?", params: [namespace] }),
          (rows) => Option.fromNullable(rows[0])
        )

      /** The wallet's role: a member's own, `user` for outsiders where sign-in is open. */
      const roleOf = (namespace: string, wallet: string, signIn: string) =>
        Effect.flatMap(
          store.query({ sql: "SELECT role FROM members WHERE namespace = ? AND wallet = ?", params: [namespace, wallet] }),
          (rows): Effect.Effect<Role, SessionRefused> => {
            const role = rows[0]?.role
            if (typeof role === "string") return Effect.succeed(role as Role)
            return signIn === "open"
              ? Effect.succeed("user" as const)
              : Effect.fail(refuse(403, "NOT_A_MEMBER", "this namespace lets only its members sign in"))
          }
        )

      const accessToken = (namespace: string, wallet: string, role: Role, sessionId: string, deviceId: string | undefined) =>
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
        )

      const deviceRow = (namespace: string, id: string) =>
        Effect.map(
          store.query({
            sql: "SELECT id, wallet, public_jwk, status FROM devices WHERE namespace = ? AND id = ?",
            params: [namespace, id]
          }),
          (rows) => Option.fromNullable(rows[0])
        )

      const deviceState = (row: Row): Effect.Effect<void, SessionRefused> => {
        if (row.status === "revoked") return Effect.fail(refuse(403, "DEVICE_REVOKED", "this device was revoked"))
        if (row.status === "pending") return Effect.fail(refuse(403, "DEVICE_PENDING", "this device waits for approval"))
        return Effect.void
      }

      const storedKey = (row: Row) =>
        Effect.mapError(
          Effect.flatMap(
            Effect.try({ try: () => JSON.parse(String(row.public_jwk)) as unknown, catch: () => "damaged" }),
            parseDeviceKey
          ),
          () => refuse(403, "DEVICE_REVOKED", "the device's stored key is unusable")
        )

      /** Checks a device proof and spends its id once; nothing else is written on failure. */
      const spendProof = (
        action: DeviceProofAction,
        namespace: string,
        binding: string,
        key: DeviceKey,
        proof: unknown
      ) =>
        Effect.gen(function* () {
          if (proof === undefined || proof === null) {
            return yield* refuse(401, "DEVICE_PROOF_REQUIRED", "a device-bound credential needs a device_proof")
          }
          const now = yield* Clock.currentTimeMillis
          const checked = yield* Effect.mapError(
            checkProof({ proof, action, namespace, binding, key, now }),
            (e) => refuse(401, "DEVICE_PROOF_INVALID", e.reason)
          )
          const [, spent] = yield* store.batch([
            // a nonce past its expiry guards nothing: its proof is refused as stale anyway
            { sql: "DELETE FROM proof_nonces WHERE expires_at < ?", params: [now] },
            {
              sql: "INSERT INTO proof_nonces (key, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
              params: [checked.nonceKey, checked.nonceExpiresAt]
            }
          ])
          if (spent === undefined || spent.rowsAffected === 0) return yield* refuse(401, "DEVICE_PROOF_INVALID", "this proof was already used")
        })

      /** An enrolled, active device proves its key over `binding` for `action`; the proof is spent. */
      const proveWithDevice: SessionsService["proveWithDevice"] = (namespace, deviceId, action, binding, proof) =>
        Effect.gen(function* () {
          const device = yield* deviceRow(namespace, deviceId)
          if (Option.isNone(device)) return yield* refuse(403, "DEVICE_REVOKED", "this device is gone")
          yield* deviceState(device.value)
          const key = yield* storedKey(device.value)
          yield* spendProof(action, namespace, binding, key, proof)
        })

      const issue = (
        namespace: string,
        wallet: string,
        role: Role,
        sessionId: string,
        deviceId: string | undefined,
        refreshToken: string
      ): Effect.Effect<IssuedSession> =>
        Effect.map(accessToken(namespace, wallet, role, sessionId, deviceId), (token) => ({
          accessToken: token,
          refreshToken,
          sessionId,
          subject: wallet,
          namespace,
          deviceId
        }))

      const sessionOfToken = (hash: string) =>
        Effect.map(
          store.query({
            sql: `SELECT t.used_at, t.successor, t.grace_used, s.id, s.namespace, s.wallet, s.device_id, s.refreshed_at, s.ended_at
                  FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id WHERE t.hash = ?`,
            params: [hash]
          }),
          (rows) => Option.fromNullable(rows[0])
        )

      const endSession = (sessionId: string, reason: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          store.exec({
            sql: "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
            params: [now, reason, sessionId]
          })
        )

      const newCodes = Effect.sync(() => ({
        deviceCode: "dc_" + crypto.randomBytes(32).toString("base64url"),
        userCode: userCode()
      }))

      /**
       * Requests expired an hour ago are dropped by the next one made: anyone may start a
       * request, so rows must not pile up. Polling a dropped one answers `invalid_grant`.
       */
      const pruneRequests = (now: number) => ({
        sql: "DELETE FROM device_requests WHERE expires_at < ?",
        params: [now - REQUEST_KEPT_AFTER_EXPIRY_MS]
      })

      const requestInsert = (
        codes: { readonly deviceCode: string; readonly userCode: string },
        namespace: string,
        kind: "approval" | "link" | "login",
        wallet: string | undefined,
        key: DeviceKey | undefined,
        label: string,
        now: number
      ) => ({
        sql: `INSERT INTO device_requests (device_code_hash, user_code, namespace, kind, wallet, device_id, public_jwk, label,
                status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
        params: [
          // Device codes are bearer secrets: kept only as a keyed hash, like refresh tokens.
          sealer.hash("refresh-token-hash", "device-code:" + codes.deviceCode),
          codes.userCode,
          namespace,
          kind,
          wallet ?? null,
          key?.id ?? "",
          key === undefined ? "" : JSON.stringify(key.jwk),
          label,
          now,
          now + DEVICE_CODE_SECONDS * 1000
        ]
      })

      const requestByUserCode = (namespace: string, code: string) =>
        Effect.map(
          store.query({
            sql: "SELECT device_code_hash, kind, wallet, status, expires_at FROM device_requests WHERE namespace = ? AND user_code = ?",
            // People type codes in any case, with or without the dash.
            params: [namespace, normalUserCode(code)]
          }),
          (rows) => Option.fromNullable(rows[0])
        )

      /** A wallet's signature over a sign-in message this gateway issued (nonce not yet spent). */
      const verifiedWallet = (message: string, signature: string) =>
        Effect.gen(function* () {
          const parsed = yield* Effect.mapError(parseMessage(message), (e) =>
            refuse(401, "SIGNATURE_INVALID", "not a sign-in message of this gateway: " + e.reason)
          )
          const now = yield* Clock.currentTimeMillis
          return yield* Effect.mapError(
            verifySignIn({ message, signature, expectedDomain: namespaceHost(parsed.namespace, config.baseDomain), now }),
            (e) => refuse(401, "SIGNATURE_INVALID", e.reason)
          )
        })

      /** The sign-in message of a challenge: what `challenge` hands out and `assertIssued` rebuilds. */
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
       * row (issued CHALLENGE_SECONDS before its expiry) and compared byte for byte.
       */
      const assertIssued = (message: string, nonce: string, namespace: string, wallet: string, deviceId: string | undefined) =>
        Effect.gen(function* () {
          const rows = yield* store.query({ sql: "SELECT expires_at FROM auth_challenges WHERE nonce = ?", params: [nonce] })
          const expiresAt = rows[0] === undefined ? undefined : Number(rows[0].expires_at)
          const issued =
            expiresAt === undefined
              ? undefined
              : yield* Effect.option(challengeText(namespace, wallet, deviceId, nonce, expiresAt - CHALLENGE_SECONDS * 1000))
          if (issued === undefined || Option.isNone(issued) || issued.value !== message) {
            return yield* refuse(401, "SIGNATURE_INVALID", "the message is not the one this gateway issued for its nonce")
          }
        })

      const spendNonce = (message: string, nonce: string, namespace: string, wallet: string, deviceId: string | undefined) =>
        Effect.gen(function* () {
          yield* assertIssued(message, nonce, namespace, wallet, deviceId)
          const now = yield* Clock.currentTimeMillis
          const spent = yield* store.exec({
            sql: `UPDATE auth_challenges SET spent_at = ? WHERE nonce = ? AND spent_at IS NULL AND expires_at > ?
                  AND namespace = ? AND wallet = ? AND device_id IS ?`,
            params: [now, nonce, now, namespace, wallet, deviceId ?? null]
          })
          if (spent.rowsAffected === 0) {
            return yield* refuse(401, "SIGNATURE_INVALID", "unknown, expired or already used challenge")
          }
        })

      const invalidRefresh = refuse(401, "INVALID_REFRESH_TOKEN", "unknown, used or expired refresh token")

      const refresh: SessionsService["refresh"] = (input) =>
        Effect.gen(function* () {
          const match = tokenPattern.exec(input.refreshToken)
          if (match === null) return yield* invalidRefresh
          const hash = sealer.hash("refresh-token-hash", input.refreshToken)
          const found = yield* sessionOfToken(hash)
          if (Option.isNone(found)) return yield* invalidRefresh
          const row = found.value
          const now = yield* Clock.currentTimeMillis
          const sessionId = String(row.id)
          const namespace = String(row.namespace)
          const wallet = String(row.wallet)
          const deviceId = row.device_id === null ? undefined : String(row.device_id)
          if (row.ended_at !== null || now - Number(row.refreshed_at) > SESSION_IDLE_MS) return yield* invalidRefresh
          // The prefix is part of the credential: a dv1_ token only for a device-bound session.
          if ((match[1] === "dv1") !== (deviceId !== undefined)) return yield* invalidRefresh

          const ns = yield* namespaceRow(namespace)
          if (Option.isNone(ns)) return yield* invalidRefresh
          const role = yield* roleOf(namespace, wallet, String(ns.value.sign_in))
          if (deviceId !== undefined) {
            // Refused before anything is spent: no proof, no rotation, no nonce.
            if (input.deviceProof === undefined || input.deviceProof === null) {
              return yield* refuse(401, "DEVICE_PROOF_REQUIRED", "a device-bound refresh needs a device_proof")
            }
            yield* proveWithDevice(namespace, deviceId, "refresh", input.refreshToken, input.deviceProof)
          } else if (String(ns.value.device_policy) !== "optional" && !isControlPlaneRole(role)) {
            return yield* refuse(403, "DEVICE_REQUIRED", "this namespace needs a device-bound session")
          }

          if (row.used_at === null) {
            const successor = newToken(deviceId !== undefined)
            const [rotated] = yield* store.batch([
              {
                sql: "UPDATE refresh_tokens SET used_at = ?, successor = ? WHERE hash = ? AND used_at IS NULL",
                params: [now, sealer.seal("refresh-successor", hash, new TextEncoder().encode(successor)), hash]
              },
              {
                sql: "INSERT INTO refresh_tokens (hash, session_id, created_at) SELECT ?, ?, ? WHERE changes() > 0",
                params: [sealer.hash("refresh-token-hash", successor), sessionId, now]
              },
              { sql: "UPDATE sessions SET refreshed_at = ? WHERE id = ? AND ended_at IS NULL", params: [now, sessionId] },
              // a long session's rotated tokens are kept for replay detection for the idle window
              { sql: "DELETE FROM refresh_tokens WHERE session_id = ? AND used_at < ?", params: [sessionId, now - SESSION_IDLE_MS] }
            ])
            if (rotated !== undefined && rotated.rowsAffected === 1) {
              return yield* issue(namespace, wallet, role, sessionId, deviceId, successor)
            }
          }
          // Presented again after rotation: once, within the grace window, it yields the same
          // successor; any other reuse means the token leaked, so the whole session ends.
          const again = yield* sessionOfToken(hash)
          const usedAt = Option.match(again, { onNone: () => 0, onSome: (r) => Number(r.used_at ?? 0) })
          const sealed = Option.match(again, { onNone: () => null, onSome: (r) => r.successor })
          // "A lost response" means the successor never reached the client: the grace holds only
          // while the successor is unused. Otherwise an old token could be replayed down the chain.
          if (now - usedAt <= REFRESH_GRACE_MS && typeof sealed === "string") {
            const opened = yield* Effect.orElseSucceed(sealer.open("refresh-successor", hash, sealed), () => undefined)
            if (opened !== undefined) {
              const successor = new TextDecoder().decode(opened)
              const claimed = yield* store.exec({
                sql: `UPDATE refresh_tokens SET grace_used = 1 WHERE hash = ? AND grace_used = 0
                      AND EXISTS (SELECT 1 FROM refresh_tokens WHERE hash = ? AND used_at IS NULL)`,
                params: [hash, sealer.hash("refresh-token-hash", successor)]
              })
              if (claimed.rowsAffected === 1) return yield* issue(namespace, wallet, role, sessionId, deviceId, successor)
            }
          }
          yield* endSession(sessionId, "refresh_token_reuse")
          return yield* refuse(401, "INVALID_REFRESH_TOKEN", "refresh token reused: the session was ended")
        })

      return {
        challenge: ({ wallet, namespace, deviceId }) =>
          Effect.gen(function* () {
            const ns = yield* namespaceRow(namespace)
            if (Option.isNone(ns)) return yield* refuse(404, "NOT_FOUND", "no such namespace")
            const now = yield* Clock.currentTimeMillis
            const nonce = newNonce()
            const expiresAt = now + CHALLENGE_SECONDS * 1000
            const message = yield* Effect.mapError(challengeText(namespace, wallet, deviceId, nonce, now), (e) =>
              refuse(400, "VALIDATION_FAILED", e.reason)
            )
            yield* store.batch([
              // anyone may ask for a challenge: expired ones go with the next, so they never pile up
              { sql: "DELETE FROM auth_challenges WHERE expires_at < ?", params: [now] },
              {
                sql: "INSERT INTO auth_challenges (nonce, namespace, wallet, device_id, expires_at) VALUES (?, ?, ?, ?, ?)",
                params: [nonce, namespace, wallet.toLowerCase(), deviceId ?? null, expiresAt]
              }
            ])
            return { message, nonce, expiresAt }
          }),
        verify: (input) =>
          Effect.gen(function* () {
            const parsed = yield* Effect.mapError(parseMessage(input.message), (e) =>
              refuse(401, "SIGNATURE_INVALID", "not a sign-in message of this gateway: " + e.reason)
            )
            const now = yield* Clock.currentTimeMillis
            const signedIn = yield* Effect.mapError(
              verifySignIn({
                message: input.message,
                signature: input.signature,
                expectedDomain: namespaceHost(parsed.namespace, config.baseDomain),
                now
              }),
              (e) => refuse(401, "SIGNATURE_INVALID", e.reason)
            )
            const namespace = signedIn.namespace
            const wallet = signedIn.wallet
            const ns = yield* namespaceRow(namespace)
            if (Option.isNone(ns)) return yield* refuse(401, "SIGNATURE_INVALID", "no such namespace")

            // The device signs the very bytes the wallet signed, with the key the message names.
            let device: DeviceKey | undefined
            if (signedIn.deviceId !== undefined || input.deviceKey !== undefined) {
              if (signedIn.deviceId === undefined || input.deviceKey === undefined) {
                return yield* refuse(400, "DEVICE_KEY_INVALID", "the message and the request must name the same device")
              }
              const key = yield* Effect.mapError(parseDeviceKey(input.deviceKey), (e) => refuse(400, "DEVICE_KEY_INVALID", e.reason))
              yield* Effect.mapError(assertDeviceId(key, signedIn.deviceId), (e) => refuse(400, "DEVICE_KEY_INVALID", e.reason))
              if (input.deviceSignature === undefined) {
                return yield* refuse(401, "DEVICE_SIGNATURE_INVALID", "device_signature is required with device_key")
              }
              yield* Effect.mapError(verifyDeviceSignature(key, input.message, input.deviceSignature), (e) =>
                refuse(401, "DEVICE_SIGNATURE_INVALID", e.reason)
              )
              device = key
            }

            const role = yield* roleOf(namespace, wallet, String(ns.value.sign_in))
            const policy = isControlPlaneRole(role) ? "optional" : String(ns.value.device_policy)
            if (device === undefined && policy !== "optional") {
              return yield* refuse(403, "DEVICE_REQUIRED", "this namespace needs a device-bound sign-in")
            }
            let existing: Option.Option<Row> = Option.none()
            let needsApproval = false
            // A device still waiting signs in again: spec §7 "DEVICE_PENDING … (202 on sign-in)".
            // It gets a fresh request, so a lost answer, an expired request or a revoked approver
            // never leaves it pending for good.
            let pendingAgain = false
            // A pending device that no longer needs approval (the policy changed, the wallet is
            // held to optional, or the account has no active device left to approve it) enrols.
            let activatePending = false
            const hasActiveDevice = Effect.map(
              store.query({
                sql: "SELECT 1 AS one FROM devices WHERE namespace = ? AND wallet = ? AND status = 'active' LIMIT 1",
                params: [namespace, wallet]
              }),
              (rows) => rows.length > 0
            )
            if (device !== undefined) {
              existing = yield* deviceRow(namespace, device.id)
              if (Option.isSome(existing)) {
                if (existing.value.wallet !== wallet) {
                  return yield* refuse(403, "DEVICE_KEY_TAKEN", "this device key belongs to another account")
                }
                if (existing.value.status === "pending") {
                  // spec §3.1: once every active device is revoked, the next sign-in enrols its
                  // device as the account's first
                  if (policy === "approval" && (yield* hasActiveDevice)) pendingAgain = true
                  else activatePending = true
                } else yield* deviceState(existing.value)
              } else if (policy === "approval") {
                // The account's first device enrols; every further one waits for an active one.
                needsApproval = yield* hasActiveDevice
              }
            }

            // One spent nonce per sign-in: the conditional update is the replay check.
            yield* spendNonce(input.message, signedIn.nonce, namespace, wallet, signedIn.deviceId)

            if (pendingAgain && device !== undefined) {
              const codes = yield* newCodes
              yield* store.batch([pruneRequests(now), requestInsert(codes, namespace, "approval", wallet, device, input.deviceLabel ?? "", now)])
              return { _tag: "Pending" as const, userCode: codes.userCode, deviceCode: codes.deviceCode }
            }
            if (needsApproval && device !== undefined) {
              const codes = yield* newCodes
              yield* store
                .batch([
                  pruneRequests(now),
                  {
                    sql: `INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at)
                          VALUES (?, ?, ?, ?, ?, 'pending', ?)`,
                    params: [namespace, device.id, wallet, JSON.stringify(device.jwk), input.deviceLabel ?? "", now]
                  },
                  requestInsert(codes, namespace, "approval", wallet, device, input.deviceLabel ?? "", now)
                ])
                .pipe(
                  Effect.catchIf(
                    (e) => e.reason === "constraint",
                    () => Effect.fail(refuse(403, "DEVICE_KEY_TAKEN", "this device key was enrolled meanwhile"))
                  )
                )
              return { _tag: "Pending" as const, userCode: codes.userCode, deviceCode: codes.deviceCode }
            }

            const sessionId = newSessionId()
            const refreshToken = newToken(device !== undefined)
            const statements = []
            if (activatePending && device !== undefined) {
              // only from pending: a revocation that landed meanwhile stays (and the session
              // below then stands on a revoked device, which every request refuses)
              statements.push({
                sql: "UPDATE devices SET status = 'active' WHERE namespace = ? AND id = ? AND wallet = ? AND status = 'pending'",
                params: [namespace, device.id, wallet]
              })
            }
            if (device !== undefined && Option.isNone(existing)) {
              statements.push({
                // A racing sign-in with the same new key for another wallet loses on the key.
                sql: `INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at)
                      VALUES (?, ?, ?, ?, ?, 'active', ?)`,
                params: [namespace, device.id, wallet, JSON.stringify(device.jwk), input.deviceLabel ?? "", now]
              })
            }
            // this wallet's sessions ended over a day ago, or idle past their window, go now
            const stale = "namespace = ? AND wallet = ? AND (ended_at < ? OR refreshed_at < ?)"
            const staleParams = [namespace, wallet, now - ENDED_SESSION_KEPT_MS, now - SESSION_IDLE_MS]
            statements.push(
              { sql: `DELETE FROM refresh_tokens WHERE session_id IN (SELECT id FROM sessions WHERE ${stale})`, params: staleParams },
              { sql: `DELETE FROM sessions WHERE ${stale}`, params: staleParams },
              {
                sql: "INSERT INTO sessions (id, namespace, wallet, device_id, created_at, refreshed_at) VALUES (?, ?, ?, ?, ?, ?)",
                params: [sessionId, namespace, wallet, device?.id ?? null, now, now]
              },
              {
                sql: "INSERT INTO refresh_tokens (hash, session_id, created_at) VALUES (?, ?, ?)",
                params: [sealer.hash("refresh-token-hash", refreshToken), sessionId, now]
              }
            )
            yield* store.batch(statements).pipe(
              Effect.catchIf(
                (e) => e.reason === "constraint",
                () => Effect.fail(refuse(403, "DEVICE_KEY_TAKEN", "this device key was enrolled meanwhile"))
              )
            )
            const issued = yield* issue(namespace, wallet, role, sessionId, device?.id, refreshToken)
            return { _tag: "Issued" as const, ...issued }
          }),
        startDeviceRequest: (input) =>
          Effect.gen(function* () {
            const ns = yield* namespaceRow(input.namespace)
            if (Option.isNone(ns)) return yield* refuse(404, "NOT_FOUND", "no such namespace")
            const now = yield* Clock.currentTimeMillis
            let key: DeviceKey | undefined
            if (input.deviceKey !== undefined) {
              key = yield* Effect.mapError(parseDeviceKey(input.deviceKey), (e) => refuse(400, "DEVICE_KEY_INVALID", e.reason))
              const known = yield* deviceRow(input.namespace, key.id)
              if (Option.isSome(known)) {
                yield* deviceState(known.value)
                return yield* refuse(403, "DEVICE_KEY_TAKEN", "this device is already enrolled; sign in with it")
              }
            }
            const codes = yield* newCodes
            yield* store.batch([
              pruneRequests(now),
              requestInsert(codes, input.namespace, key === undefined ? "login" : "link", undefined, key, input.deviceLabel ?? "", now)
            ])
            return { deviceCode: codes.deviceCode, userCode: codes.userCode, expiresIn: DEVICE_CODE_SECONDS, interval: POLL_INTERVAL_SECONDS }
          }),
        approveFromDevice: (input) =>
          Effect.gen(function* () {
            if (input.approverDeviceId === undefined) {
              return yield* refuse(403, "DEVICE_REQUIRED", "only an active device of the account approves a device")
            }
            yield* proveWithDevice(input.namespace, input.approverDeviceId, "approve", input.userCode, input.deviceProof)
            const request = yield* requestByUserCode(input.namespace, input.userCode)
            const now = yield* Clock.currentTimeMillis
            if (Option.isNone(request) || Number(request.value.expires_at) <= now || request.value.status !== "pending") {
              return yield* refuse(404, "NOT_FOUND", "no pending request with this user code")
            }
            const kind = String(request.value.kind)
            if (kind === "login") return yield* refuse(403, "FORBIDDEN", "a device cannot approve a plain login")
            if (kind === "approval" && request.value.wallet !== input.wallet) {
              return yield* refuse(404, "NOT_FOUND", "no pending request with this user code")
            }
            // Seedless linking: the new device takes its account from the approver.
            const updated = yield* store.exec({
              sql: `UPDATE device_requests SET status = 'approved', approved_by = ?, wallet = COALESCE(wallet, ?)
                    WHERE device_code_hash = ? AND status = 'pending'`,
              params: [input.approverDeviceId, input.wallet, String(request.value.device_code_hash)]
            })
            if (updated.rowsAffected === 0) return yield* refuse(404, "NOT_FOUND", "no pending request with this user code")
          }),
        answerLogin: (input) =>
          Effect.gen(function* () {
            const signedIn = yield* verifiedWallet(input.message, input.signature)
            // a message naming a device would stand for that device, which signs nothing here
            if (signedIn.deviceId !== undefined) {
              return yield* refuse(403, "FORBIDDEN", "a plain login is answered with a wallet signature only; this message names a device")
            }
            const ns = yield* namespaceRow(signedIn.namespace)
            if (Option.isNone(ns)) return yield* refuse(404, "NOT_FOUND", "no such namespace")
            // approving and denying alike are for wallets that may sign in here (roleOf refuses others)
            const role = yield* roleOf(signedIn.namespace, signedIn.wallet, String(ns.value.sign_in))
            if (!input.deny && String(ns.value.device_policy) !== "optional" && !isControlPlaneRole(role)) {
              return yield* refuse(403, "DEVICE_REQUIRED", "this namespace needs device-bound sessions")
            }
            // one signature, one try: the nonce is spent before the code is looked up
            yield* spendNonce(input.message, signedIn.nonce, signedIn.namespace, signedIn.wallet, signedIn.deviceId)
            const request = yield* requestByUserCode(signedIn.namespace, input.userCode)
            const now = yield* Clock.currentTimeMillis
            if (Option.isNone(request) || Number(request.value.expires_at) <= now || request.value.status !== "pending") {
              return yield* refuse(404, "NOT_FOUND", "no pending request with this user code")
            }
            if (request.value.kind !== "login") {
              return yield* refuse(403, "FORBIDDEN", "a wallet signature cannot approve a device link")
            }
            const updated = yield* store.exec({
              sql: `UPDATE device_requests SET status = ?, wallet = ? WHERE device_code_hash = ? AND status = 'pending'`,
              params: [input.deny ? "denied" : "approved", signedIn.wallet, String(request.value.device_code_hash)]
            })
            if (updated.rowsAffected === 0) return yield* refuse(404, "NOT_FOUND", "no pending request with this user code")
          }),
        collect: (input) =>
          Effect.gen(function* () {
            const hash = sealer.hash("refresh-token-hash", "device-code:" + input.deviceCode)
            const rows = yield* store.query({
              sql: `SELECT device_code_hash, namespace, kind, wallet, device_id, public_jwk, label, status, approved_by,
                           expires_at, last_poll_at, poll_interval FROM device_requests WHERE device_code_hash = ?`,
              params: [hash]
            })
            const request = rows[0]
            if (request === undefined) return yield* refuse(400, "invalid_grant", "unknown device code")
            const namespace = String(request.namespace)
            const kind = String(request.kind)
            const now = yield* Clock.currentTimeMillis
            let key: DeviceKey | undefined
            if (kind !== "login") {
              key = yield* Effect.mapError(
                Effect.flatMap(
                  Effect.try({ try: () => JSON.parse(String(request.public_jwk)) as unknown, catch: () => "damaged" }),
                  parseDeviceKey
                ),
                () => refuse(400, "invalid_grant", "the request's device key is unusable")
              )
              yield* spendProof("claim", namespace, input.deviceCode, key, input.deviceProof)
            }
            if (Number(request.expires_at) <= now || request.status === "collected") {
              return yield* refuse(400, "expired_token", "the device code expired or was used")
            }
            if (request.status === "denied") return yield* refuse(400, "access_denied", "the request was denied")
            if (request.status === "revoked") return yield* refuse(403, "DEVICE_REVOKED", "this device was revoked")
            if (request.status === "pending") {
              // RFC 8628 §3.5: a poll sooner than the interval after the last one is slow_down,
              // and the interval the poller must keep grows by 5 s for the rest of this request
              // (up to MAX_POLL_INTERVAL_SECONDS). Every poll counts as the last one.
              const last = request.last_poll_at === null ? undefined : Number(request.last_poll_at)
              const interval = request.poll_interval === null ? POLL_INTERVAL_SECONDS : Number(request.poll_interval)
              const tooSoon = last !== undefined && now - last < interval * 1000
              const slower = Math.min(interval + SLOW_DOWN_SECONDS, MAX_POLL_INTERVAL_SECONDS)
              yield* store.exec({
                sql: "UPDATE device_requests SET last_poll_at = ?, poll_interval = ? WHERE device_code_hash = ?",
                params: [now, tooSoon ? slower : interval, hash]
              })
              return yield* tooSoon
                ? refuse(400, "slow_down", `poll less often: wait at least ${slower} s between polls from now on`)
                : refuse(400, "authorization_pending", "waiting for approval")
            }
            const wallet = String(request.wallet)
            const deviceId = kind === "login" ? undefined : String(request.device_id)
            if (request.approved_by !== null && kind !== "login") {
              // The approver must still be active when the new device collects.
              const approver = yield* deviceRow(namespace, String(request.approved_by))
              if (Option.isNone(approver) || approver.value.status !== "active") {
                return yield* refuse(400, "access_denied", "the approving device is no longer active")
              }
            }
            // A device revoked after its request was approved does not collect a session.
            if (deviceId !== undefined) {
              const device = yield* deviceRow(namespace, deviceId)
              if (Option.isSome(device) && device.value.status === "revoked") {
                return yield* refuse(403, "DEVICE_REVOKED", "this device was revoked")
              }
            }
            const ns = yield* namespaceRow(namespace)
            if (Option.isNone(ns)) return yield* refuse(400, "expired_token", "the namespace is gone")
            const role = yield* roleOf(namespace, wallet, String(ns.value.sign_in))
            // The policy in force at collection decides: a plain login approved under optional
            // is not a device-less session for an end user once the namespace requires devices.
            if (deviceId === undefined && String(ns.value.device_policy) !== "optional" && !isControlPlaneRole(role)) {
              return yield* refuse(403, "DEVICE_REQUIRED", "this namespace needs device-bound sessions")
            }
            const sessionId = newSessionId()
            const refreshToken = newToken(deviceId !== undefined)
            const claimed = "EXISTS (SELECT 1 FROM device_requests WHERE device_code_hash = ? AND session_id = ?)"
            const statements: Array<{ readonly sql: string; readonly params: ReadonlyArray<string | number | null> }> = [
              {
                sql: "UPDATE device_requests SET status = 'collected', session_id = ? WHERE device_code_hash = ? AND status = 'approved'",
                params: [sessionId, hash]
              }
            ]
            if (kind === "approval") {
              statements.push({
                sql: `UPDATE devices SET status = 'active' WHERE namespace = ? AND id = ? AND status = 'pending' AND ${claimed}`,
                params: [namespace, String(deviceId), hash, sessionId]
              })
            } else if (kind === "link" && key !== undefined) {
              statements.push({
                sql: `INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at)
                      SELECT ?, ?, ?, ?, ?, 'active', ? WHERE ${claimed}`,
                params: [namespace, key.id, wallet, JSON.stringify(key.jwk), String(request.label), now, hash, sessionId]
              })
            }
            statements.push(
              {
                sql: `INSERT INTO sessions (id, namespace, wallet, device_id, created_at, refreshed_at)
                      SELECT ?, ?, ?, ?, ?, ? WHERE ${claimed}`,
                params: [sessionId, namespace, wallet, deviceId ?? null, now, now, hash, sessionId]
              },
              {
                sql: `INSERT INTO refresh_tokens (hash, session_id, created_at) SELECT ?, ?, ? WHERE ${claimed}`,
                params: [sealer.hash("refresh-token-hash", refreshToken), sessionId, now, hash, sessionId]
              }
            )
            const [first] = yield* store.batch(statements).pipe(
              Effect.catchIf(
                (e) => e.reason === "constraint",
                () => Effect.fail(refuse(403, "DEVICE_KEY_TAKEN", "this device key was enrolled meanwhile"))
              )
            )
            if (first === undefined || first.rowsAffected === 0) {
              return yield* refuse(400, "expired_token", "the device code was used")
            }
            return yield* issue(namespace, wallet, role, sessionId, deviceId, refreshToken)
          }),
        refresh,
        proveWithDevice,
        list: (namespace, wallet, page) =>
          readPage(
            store,
            {
              select: "SELECT id, device_id, created_at, refreshed_at FROM sessions",
              where: ["namespace = ?", "wallet = ?", "ended_at IS NULL"],
              params: [namespace, wallet],
              order: ["created_at", "id"],
              direction: "asc"
            },
            page,
            (r) => ({
              id: String(r.id),
              deviceId: r.device_id === null ? undefined : String(r.device_id),
              createdAt: Number(r.created_at),
              refreshedAt: Number(r.refreshed_at)
            })
          ),
        end: (input) =>
          Effect.gen(function* () {
            // A caller bound to a device proves it holds that device's key over the session id.
            if (input.callerDeviceId !== undefined) {
              yield* proveWithDevice(input.namespace, input.callerDeviceId, "end-session", input.sessionId, input.deviceProof)
            }
            const now = yield* Clock.currentTimeMillis
            const ended = yield* store.exec({
              sql: `UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND namespace = ? AND wallet = ?
                    AND ended_at IS NULL`,
              params: [now, input.reason, input.sessionId, input.namespace, input.wallet]
            })
            if (ended.rowsAffected === 0) return yield* refuse(404, "NOT_FOUND", "no such session")
          }),
        standing: (sessionId) => Effect.map(store.query(standingStatement(sessionId)), standingOf),
        standingNow: readNow === undefined ? undefined : (sessionId) => Either.map(readNow(standingStatement(sessionId)), standingOf)
      }
    })
  )
}
