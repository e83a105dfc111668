/**
 * The sign-in service's vocabulary: its refusal, its time limits, what it answers, the service's
 * interface, and the makers of its random codes and tokens. Shared by the flows in this folder.
 */
import { Data, type Effect, type Either, type Option } from "effect"
import * as crypto from "node:crypto"
import type { DeviceProofAction } from "../../domain/DeviceProof.js"
import { type SessionCode, statusOfCode } from "../../domain/Errors.js"
import type { Role } from "../../domain/Grants.js"
import type { Page, PageRequest } from "../registry/Keyset.js"
import type { StoreError } from "../registry/RegistryStore.js"

/**
 * A sign-in or session rule refused the request, in the session family's codes (spec §7 where
 * named); `status` is the code's (the catalogue's).
 */
export class SessionRefused extends Data.TaggedError("SessionRefused")<{
  readonly status: number
  readonly code: SessionCode
  readonly reason: string
}> {}

export const refuse = (code: SessionCode, reason: string) => new SessionRefused({ status: statusOfCode[code], code, reason })

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
export const normalUserCode = (code: string): string => {
  const bare = code.toUpperCase().replace("-", "")
  return bare.slice(0, 4) + "-" + bare.slice(4)
}

export const userCode = (): string => {
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
export const ENDED_SESSION_KEPT_MS = 86_400_000

/** A device request is kept an hour past its expiry, so a late poll still hears `expired_token`. */
export const REQUEST_KEPT_AFTER_EXPIRY_MS = 3_600_000

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
  /**
   * `standing` answered on the spot: read on the spot, or kept from a read a moment ago on a
   * registry that reads over the network (KeptReads.ts). Undefined: `standing` must read it.
   */
  readonly standingNow?: ((sessionId: string) => Either.Either<Option.Option<Role>, StoreError> | undefined) | undefined
}

export const tokenPattern = /^(rt1|dv1)_[A-Za-z0-9_-]{43}$/
export const newToken = (deviceBound: boolean) => (deviceBound ? "dv1_" : "rt1_") + crypto.randomBytes(32).toString("base64url")
export const newSessionId = () => "ses_" + crypto.randomBytes(16).toString("hex")

/** The namespace gateway's host: sign-in messages name it, and verify refuses any other. */
export const namespaceHost = (namespace: string, baseDomain: string) => `ns-${namespace}.${baseDomain}`

