/**
 * The registry's sign-in tables (challenges, sessions, refresh tokens, devices, device requests,
 * proof nonces) behind named reads and statements. Rows are decoded with Schema; a row not of its
 * shape is a `StoreError` (reason `statement`), never a guess. Writes that must land together are
 * handed back as statements for the caller's atomic batch; a conditional write answers whether
 * it touched a row (rqlite has no interactive transactions, so the row count decides).
 */
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import type { DevicePolicy } from "../../domain/Enrolment.js"
import { Role } from "../../domain/Grants.js"
import { oncePerObject } from "../../domain/Memo.js"
import { isPlatformRealm, PLATFORM_REALM } from "../../domain/PlatformRealm.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { type RegistryStoreService, type Row, type Statement, StoreError } from "../registry/RegistryStore.js"

const column = <S extends Schema.Schema.Any>(schema: S, key: string) => Schema.propertySignature(schema).pipe(Schema.fromKey(key))
const NullableNumber = Schema.NullOr(Schema.Number)
const NullableString = Schema.NullOr(Schema.String)

const NamespaceRow = Schema.Struct({
  devicePolicy: column(Schema.Literal("optional", "required", "approval"), "device_policy"),
  signIn: column(Schema.String, "sign_in")
})
export type NamespaceRow = typeof NamespaceRow.Type

const realmSettings: NamespaceRow = { devicePolicy: "optional", signIn: "open" }

const MemberRow = Schema.Struct({ role: Role })

const DeviceRow = Schema.Struct({
  id: Schema.String,
  wallet: Schema.String,
  publicJwk: column(Schema.String, "public_jwk"),
  status: Schema.String
})
export type DeviceRow = typeof DeviceRow.Type

/** A refresh token with the session it belongs to. */
const TokenRow = Schema.Struct({
  usedAt: column(NullableNumber, "used_at"),
  successor: NullableString,
  id: Schema.String,
  namespace: Schema.String,
  wallet: Schema.String,
  deviceId: column(NullableString, "device_id"),
  refreshedAt: column(Schema.Number, "refreshed_at"),
  endedAt: column(NullableNumber, "ended_at")
})
export type TokenRow = typeof TokenRow.Type

const RequestKind = Schema.Literal("approval", "link", "login")
export type RequestKind = typeof RequestKind.Type

/** A device request as found by its user code (what an approver needs). */
const RequestByCodeRow = Schema.Struct({
  deviceCodeHash: column(Schema.String, "device_code_hash"),
  kind: RequestKind,
  wallet: NullableString,
  status: Schema.String,
  expiresAt: column(Schema.Number, "expires_at")
})
export type RequestByCodeRow = typeof RequestByCodeRow.Type

/** A device request as its poller sees it. */
const RequestRow = Schema.Struct({
  namespace: Schema.String,
  kind: RequestKind,
  wallet: NullableString,
  deviceId: column(Schema.String, "device_id"),
  publicJwk: column(Schema.String, "public_jwk"),
  label: Schema.String,
  status: Schema.String,
  approvedBy: column(NullableString, "approved_by"),
  expiresAt: column(Schema.Number, "expires_at"),
  lastPollAt: column(NullableNumber, "last_poll_at"),
  pollInterval: column(NullableNumber, "poll_interval")
})
export type RequestRow = typeof RequestRow.Type

const ChallengeRow = Schema.Struct({ expiresAt: column(Schema.Number, "expires_at") })

const SessionRow = Schema.Struct({
  id: Schema.String,
  deviceId: column(NullableString, "device_id"),
  createdAt: column(Schema.Number, "created_at"),
  refreshedAt: column(Schema.Number, "refreshed_at")
})
export type SessionRow = typeof SessionRow.Type

/** The session, its device, the wallet's membership and the namespace's sign-in rule. */
const StandingRow = Schema.Struct({
  endedAt: column(NullableNumber, "ended_at"),
  status: NullableString,
  role: Schema.NullOr(Role),
  signIn: column(NullableString, "sign_in")
})
export type StandingRow = typeof StandingRow.Type

const decoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (row: Row): Either.Either<A, StoreError> =>
    Either.mapLeft(
      decode(row),
      (e) => new StoreError({ reason: "statement", detail: "a registry row is not of its shape: " + ParseResult.TreeFormatter.formatErrorSync(e) })
    )
}

/** The first row of an answer, decoded; none when there is no row. */
const firstOf =
  <A>(decode: (row: Row) => Either.Either<A, StoreError>) =>
  (rows: ReadonlyArray<Row>): Either.Either<Option.Option<A>, StoreError> => {
    const row = rows[0]
    return row === undefined ? Either.right(Option.none()) : Either.map(decode(row), Option.some)
  }

const decodeNamespace = firstOf(decoder(NamespaceRow))
const decodeMember = firstOf(decoder(MemberRow))
const decodeDevice = firstOf(decoder(DeviceRow))
const decodeToken = firstOf(decoder(TokenRow))
const decodeRequestByCode = firstOf(decoder(RequestByCodeRow))
const decodeRequest = firstOf(decoder(RequestRow))
const decodeChallenge = firstOf(decoder(ChallengeRow))
const decodeSession = decoder(SessionRow)
// A row the registry keeps between commits is the same object for every request that reads it
// (SqliteRegistryStore.ts), so the per-request standing check decodes it once.
const decodeStanding = firstOf(oncePerObject(decoder(StandingRow)))

const standingStatement = (sessionId: string): Statement => ({
  sql: `SELECT s.ended_at, d.status, m.role, CASE WHEN s.namespace = '${PLATFORM_REALM}' THEN 'open' ELSE n.sign_in END AS sign_in FROM sessions s
        LEFT JOIN devices d ON d.namespace = s.namespace AND d.id = s.device_id
        LEFT JOIN members m ON m.namespace = s.namespace AND m.wallet = s.wallet
        LEFT JOIN namespaces n ON n.name = s.namespace
        WHERE s.id = ?`,
  params: [sessionId]
})

/** A device request to insert: its codes (the device code kept only as a keyed hash) and what it asks. */
export interface NewRequest {
  readonly deviceCodeHash: string
  readonly userCode: string
  readonly namespace: string
  readonly kind: RequestKind
  readonly wallet: string | undefined
  readonly deviceId: string
  readonly publicJwk: string
  readonly label: string
  readonly createdAt: number
  readonly expiresAt: number
}

/** A device to insert in `status`. */
export interface NewDevice {
  readonly namespace: string
  readonly id: string
  readonly wallet: string
  readonly publicJwk: string
  readonly label: string
  readonly createdAt: number
}

export const makeSessionRepository = (store: RegistryStoreService) => {
  const read = <A>(statement: Statement, decode: (rows: ReadonlyArray<Row>) => Either.Either<A, StoreError>) =>
    Effect.flatMap(store.query(statement), (rows) => decode(rows))
  const touched = (statement: Statement) => Effect.map(store.exec(statement), (r) => r.rowsAffected > 0)
  const readNow = store.queryNow

  return {
    /** Runs statements from the builders below as one atomic write. */
    batch: (statements: ReadonlyArray<Statement>) => store.batch(statements),

    // the platform realm signs any wallet in, with or without a device (src/domain/PlatformRealm.ts)
    namespace: (namespace: string) =>
      isPlatformRealm(namespace)
        ? Effect.succeed(Option.some(realmSettings))
        : read({ sql: "SELECT name, device_policy, sign_in FROM namespaces WHERE name = ?", params: [namespace] }, decodeNamespace),

    memberRole: (namespace: string, wallet: string) =>
      Effect.map(
        read({ sql: "SELECT role FROM members WHERE namespace = ? AND wallet = ?", params: [namespace, wallet] }, decodeMember),
        Option.map((m) => m.role)
      ),

    device: (namespace: string, id: string) =>
      read(
        { sql: "SELECT id, wallet, public_jwk, status FROM devices WHERE namespace = ? AND id = ?", params: [namespace, id] },
        decodeDevice
      ),

    /** 1 when the account has an active device, else 0 (the decision needs no more). */
    activeDevices: (namespace: string, wallet: string) =>
      Effect.map(
        store.query({
          sql: "SELECT 1 AS one FROM devices WHERE namespace = ? AND wallet = ? AND status = 'active' LIMIT 1",
          params: [namespace, wallet]
        }),
        (rows) => rows.length
      ),

    tokenSession: (hash: string) =>
      read(
        {
          sql: `SELECT t.used_at, t.successor, t.grace_used, s.id, s.namespace, s.wallet, s.device_id, s.refreshed_at, s.ended_at
                FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id WHERE t.hash = ?`,
          params: [hash]
        },
        decodeToken
      ),

    /** `userCode` as stored (ABCD-EFGH). */
    requestByUserCode: (namespace: string, userCode: string) =>
      read(
        {
          sql: "SELECT device_code_hash, kind, wallet, status, expires_at FROM device_requests WHERE namespace = ? AND user_code = ?",
          params: [namespace, userCode]
        },
        decodeRequestByCode
      ),

    requestByDeviceCode: (hash: string) =>
      read(
        {
          sql: `SELECT device_code_hash, namespace, kind, wallet, device_id, public_jwk, label, status, approved_by,
                       expires_at, last_poll_at, poll_interval FROM device_requests WHERE device_code_hash = ?`,
          params: [hash]
        },
        decodeRequest
      ),

    challengeExpiry: (nonce: string) =>
      Effect.map(
        read({ sql: "SELECT expires_at FROM auth_challenges WHERE nonce = ?", params: [nonce] }, decodeChallenge),
        Option.map((c) => c.expiresAt)
      ),

    /** One page of the wallet's open sessions, oldest first (key: created_at, id). */
    openSessions: (namespace: string, wallet: string, page: PageRequest): Effect.Effect<Page<SessionRow>, StoreError> =>
      Effect.flatMap(
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
          (row) => row
        ),
        (found) => Effect.map(Effect.forEach(found.items, decodeSession), (items) => ({ items, next: found.next }))
      ),

    standing: (sessionId: string) => read(standingStatement(sessionId), decodeStanding),
    standingNow:
      readNow === undefined
        ? undefined
        : (sessionId: string) => Either.flatMap(readNow(standingStatement(sessionId)), decodeStanding),

    /** Records a challenge; expired ones go with the next, since anyone may ask for one. */
    addChallenge: (nonce: string, namespace: string, wallet: string, deviceId: string | undefined, now: number, expiresAt: number) =>
      store.batch([
        { sql: "DELETE FROM auth_challenges WHERE expires_at < ?", params: [now] },
        {
          sql: "INSERT INTO auth_challenges (nonce, namespace, wallet, device_id, expires_at) VALUES (?, ?, ?, ?, ?)",
          params: [nonce, namespace, wallet, deviceId ?? null, expiresAt]
        }
      ]),

    /** Spends a live challenge issued to exactly this wallet and device; false when none was. */
    spendChallenge: (nonce: string, namespace: string, wallet: string, deviceId: string | undefined, now: number) =>
      touched({
        sql: `UPDATE auth_challenges SET spent_at = ? WHERE nonce = ? AND spent_at IS NULL AND expires_at > ?
              AND namespace = ? AND wallet = ? AND device_id IS ?`,
        params: [now, nonce, now, namespace, wallet, deviceId ?? null]
      }),

    /** Spends a device proof's nonce key; false when it was spent before. */
    spendProofNonce: (key: string, expiresAt: number, now: number) =>
      Effect.map(
        store.batch([
          // a nonce past its expiry guards nothing: its proof is refused as stale anyway
          { sql: "DELETE FROM proof_nonces WHERE expires_at < ?", params: [now] },
          { sql: "INSERT INTO proof_nonces (key, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING", params: [key, expiresAt] }
        ]),
        ([, spent]) => spent !== undefined && spent.rowsAffected > 0
      ),

    endSession: (sessionId: string, reason: string, now: number) =>
      store.exec({
        sql: "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        params: [now, reason, sessionId]
      }),

    /** Ends one of the wallet's open sessions; false when it has no such session. */
    endWalletSession: (namespace: string, wallet: string, sessionId: string, reason: string, now: number) =>
      touched({
        sql: `UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND namespace = ? AND wallet = ?
              AND ended_at IS NULL`,
        params: [now, reason, sessionId, namespace, wallet]
      }),

    /**
     * Rotates an unused refresh token to its successor (sealed beside it for the grace reuse) and
     * marks the session refreshed; false when the token was used meanwhile.
     */
    rotate: (hash: string, sealedSuccessor: string, successorHash: string, sessionId: string, now: number, keepUsedMs: number) =>
      Effect.map(
        store.batch([
          {
            sql: "UPDATE refresh_tokens SET used_at = ?, successor = ? WHERE hash = ? AND used_at IS NULL",
            params: [now, sealedSuccessor, hash]
          },
          {
            sql: "INSERT INTO refresh_tokens (hash, session_id, created_at) SELECT ?, ?, ? WHERE changes() > 0",
            params: [successorHash, sessionId, now]
          },
          { sql: "UPDATE sessions SET refreshed_at = ? WHERE id = ? AND ended_at IS NULL", params: [now, sessionId] },
          // a long session's rotated tokens are kept for replay detection for the idle window
          { sql: "DELETE FROM refresh_tokens WHERE session_id = ? AND used_at < ?", params: [sessionId, now - keepUsedMs] }
        ]),
        ([rotated]) => rotated !== undefined && rotated.rowsAffected === 1
      ),

    /** Takes a used token's one grace reuse, while its successor is unused; false otherwise. */
    claimGrace: (hash: string, successorHash: string) =>
      touched({
        sql: `UPDATE refresh_tokens SET grace_used = 1 WHERE hash = ? AND grace_used = 0
              AND EXISTS (SELECT 1 FROM refresh_tokens WHERE hash = ? AND used_at IS NULL)`,
        params: [hash, successorHash]
      }),

    /** Requests expired before `before` (anyone may start one, so rows must not pile up). */
    pruneRequests: (before: number): Statement => ({ sql: "DELETE FROM device_requests WHERE expires_at < ?", params: [before] }),

    insertRequest: (r: NewRequest): Statement => ({
      sql: `INSERT INTO device_requests (device_code_hash, user_code, namespace, kind, wallet, device_id, public_jwk, label,
              status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
      params: [r.deviceCodeHash, r.userCode, r.namespace, r.kind, r.wallet ?? null, r.deviceId, r.publicJwk, r.label, r.createdAt, r.expiresAt]
    }),

    /** A new device in `status`; a racing insert of the same key loses on the primary key. */
    insertDevice: (d: NewDevice, status: "active" | "pending"): Statement => ({
      sql: `INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at)
            VALUES (?, ?, ?, ?, ?, '${status}', ?)`,
      params: [d.namespace, d.id, d.wallet, d.publicJwk, d.label, d.createdAt]
    }),

    /** Only from pending: a revocation that landed meanwhile stays. */
    activatePending: (namespace: string, id: string, wallet: string): Statement => ({
      sql: "UPDATE devices SET status = 'active' WHERE namespace = ? AND id = ? AND wallet = ? AND status = 'pending'",
      params: [namespace, id, wallet]
    }),

    /** Drops this wallet's sessions ended over `endedBefore`, or idle since `idleBefore`, with their tokens. */
    pruneSessions: (namespace: string, wallet: string, endedBefore: number, idleBefore: number): ReadonlyArray<Statement> => {
      const stale = "namespace = ? AND wallet = ? AND (ended_at < ? OR refreshed_at < ?)"
      const params = [namespace, wallet, endedBefore, idleBefore]
      return [
        { sql: `DELETE FROM refresh_tokens WHERE session_id IN (SELECT id FROM sessions WHERE ${stale})`, params },
        { sql: `DELETE FROM sessions WHERE ${stale}`, params }
      ]
    },

    insertSession: (sessionId: string, namespace: string, wallet: string, deviceId: string | undefined, refreshHash: string, now: number): ReadonlyArray<Statement> => [
      {
        sql: "INSERT INTO sessions (id, namespace, wallet, device_id, created_at, refreshed_at) VALUES (?, ?, ?, ?, ?, ?)",
        params: [sessionId, namespace, wallet, deviceId ?? null, now, now]
      },
      { sql: "INSERT INTO refresh_tokens (hash, session_id, created_at) VALUES (?, ?, ?)", params: [refreshHash, sessionId, now] }
    ],

    /** An active device approves a pending request; a link takes its account from the approver. */
    approveRequest: (deviceCodeHash: string, approverDeviceId: string, wallet: string) =>
      touched({
        sql: `UPDATE device_requests SET status = 'approved', approved_by = ?, wallet = COALESCE(wallet, ?)
              WHERE device_code_hash = ? AND status = 'pending'`,
        params: [approverDeviceId, wallet, deviceCodeHash]
      }),

    /** A wallet answers a pending plain login. */
    answerRequest: (deviceCodeHash: string, status: "approved" | "denied", wallet: string) =>
      touched({
        sql: `UPDATE device_requests SET status = ?, wallet = ? WHERE device_code_hash = ? AND status = 'pending'`,
        params: [status, wallet, deviceCodeHash]
      }),

    recordPoll: (deviceCodeHash: string, now: number, interval: number) =>
      store.exec({
        sql: "UPDATE device_requests SET last_poll_at = ?, poll_interval = ? WHERE device_code_hash = ?",
        params: [now, interval, deviceCodeHash]
      }),

    /**
     * The collection of an approved request as one batch: the first statement claims the request
     * for `sessionId`; every later one applies only if that claim did (`claimed`).
     */
    collectStatements: (c: {
      readonly deviceCodeHash: string
      readonly sessionId: string
      readonly namespace: string
      readonly wallet: string
      readonly kind: RequestKind
      readonly deviceId: string | undefined
      /** For a link: the device to enrol. */
      readonly newDevice: NewDevice | undefined
      readonly refreshHash: string
      readonly now: number
    }): ReadonlyArray<Statement> => {
      const claimed = "EXISTS (SELECT 1 FROM device_requests WHERE device_code_hash = ? AND session_id = ?)"
      const claim = [c.deviceCodeHash, c.sessionId]
      const statements: Array<Statement> = [
        {
          sql: "UPDATE device_requests SET status = 'collected', session_id = ? WHERE device_code_hash = ? AND status = 'approved'",
          params: [c.sessionId, c.deviceCodeHash]
        }
      ]
      if (c.kind === "approval") {
        statements.push({
          sql: `UPDATE devices SET status = 'active' WHERE namespace = ? AND id = ? AND status = 'pending' AND ${claimed}`,
          params: [c.namespace, String(c.deviceId), ...claim]
        })
      } else if (c.kind === "link" && c.newDevice !== undefined) {
        const d = c.newDevice
        statements.push({
          sql: `INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at)
                SELECT ?, ?, ?, ?, ?, 'active', ? WHERE ${claimed}`,
          params: [d.namespace, d.id, d.wallet, d.publicJwk, d.label, d.createdAt, ...claim]
        })
      }
      statements.push(
        {
          sql: `INSERT INTO sessions (id, namespace, wallet, device_id, created_at, refreshed_at)
                SELECT ?, ?, ?, ?, ?, ? WHERE ${claimed}`,
          params: [c.sessionId, c.namespace, c.wallet, c.deviceId ?? null, c.now, c.now, ...claim]
        },
        {
          sql: `INSERT INTO refresh_tokens (hash, session_id, created_at) SELECT ?, ?, ? WHERE ${claimed}`,
          params: [c.refreshHash, c.sessionId, c.now, ...claim]
        }
      )
      return statements
    }
  }
}

export type SessionRepository = ReturnType<typeof makeSessionRepository>

/** Re-exported for the decision's callers: a namespace row's policy is the domain's type. */
export type { DevicePolicy }
