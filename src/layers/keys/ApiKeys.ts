/**
 * API keys: minted with a role and a scope list, shown once, stored as a keyed hash, looked up
 * by id and compared in constant time, revoked at once.
 *
 * Wire form: `portico_<id>_<secret>` where `<id>` is `key_` + 16 base32 characters and the secret
 * is 32 random bytes in base64url. The id lets a lookup hit the primary key; the secret is only
 * ever compared as an HMAC under a purpose-derived key, so a registry dump reveals no usable key.
 */
import { Clock, Context, Data, Effect, Either, Layer, Option } from "effect"
import * as crypto from "node:crypto"
import type { MintCode } from "../../domain/Errors.js"
import { type Grant, type KeyRole, parseGrant } from "../../domain/Grants.js"
import type { Principal } from "../../domain/Principal.js"
import { KeptReads } from "../registry/KeptReads.js"
import { Audit } from "../audit/Audit.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Row, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { Sealer, safeEqual } from "../secrets/Sealer.js"
import { oncePerObject } from "../../domain/Memo.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface ApiKeyRecord {
  readonly id: string
  readonly namespace: string
  readonly role: KeyRole
  readonly scopes: ReadonlyArray<string>
  readonly grants: ReadonlyArray<Grant>
  readonly label: string
  readonly createdAt: number
  readonly createdBy: string
  readonly expiresAt: number | undefined
  readonly revokedAt: number | undefined
}

export interface MintRequest {
  readonly namespace: string
  readonly role: KeyRole
  readonly scopes: ReadonlyArray<string>
  readonly label: string
  /** Unix milliseconds, or undefined for no expiry. */
  readonly expiresAt: number | undefined
  readonly createdBy: string
  /** `sign-in` for keys an end user minted from a session; a stricter session policy revokes those. */
  readonly origin?: "admin" | "sign-in"
}

export interface MintedKey {
  readonly record: ApiKeyRecord
  readonly apiKey: string
  /** The insert, for the caller's atomic batch. */
  readonly statement: Statement
}

/**
 * Who asks for a key. A principal is held to what it holds (no escalation); the operator's CLI,
 * which writes the registry directly, is trusted and named by `actor` in the audit trail.
 */
export type Minter =
  | { readonly _tag: "Principal"; readonly principal: Principal }
  | { readonly _tag: "Operator"; readonly actor: string }

export interface MintOrder {
  readonly namespace: string
  readonly role: KeyRole
  readonly scopes: ReadonlyArray<string>
  readonly label: string
  readonly expiresInDays: number | undefined
  /** `sign-in` for a key an end user takes from its session (audited as such). */
  readonly origin?: "admin" | "sign-in"
}

/** A mint the caller may not make; `grants` names what it asked for beyond what it holds. */
/** The minter asked beyond what it holds; answered with the rule's code and message. */
export class MintRefused extends Data.TaggedError("MintRefused")<{
  readonly rule: "GrantsNotHeld" | "AdminKeyNeedsAdmin" | "OtherNamespace"
  readonly grants: ReadonlyArray<string>
}> {
  get code(): MintCode {
    return this.rule === "OtherNamespace" ? "FORBIDDEN" : "GRANT_REQUIRED"
  }
  get reason(): string {
    return this.rule === "GrantsNotHeld"
      ? `you cannot mint grants you do not hold: ${this.grants.join(", ")}`
      : this.rule === "AdminKeyNeedsAdmin"
        ? "only owners and admins mint admin keys"
        : "a key is minted in the caller's own namespace"
  }
}

/** The scopes a principal asks for beyond the unrestricted grants it holds. */
export const exceeding = (minter: Principal, scopes: ReadonlyArray<string>): ReadonlyArray<string> => {
  const held = new Set<string>(minter.grants.filter((g) => g.pattern === undefined).map((g) => g.name))
  return scopes.filter((s) => !held.has(parseGrant(s)?.name ?? s))
}

/** Refuses a principal's order that would escalate: checked before anything is prepared. */
export const authorizeMint = (caller: Minter, order: MintOrder): Option.Option<MintRefused> => {
  if (caller._tag === "Operator") return Option.none()
  const p = caller.principal
  if (order.namespace !== p.namespace) return Option.some(new MintRefused({ rule: "OtherNamespace", grants: [] }))
  const beyond = exceeding(p, order.scopes)
  if (beyond.length > 0) return Option.some(new MintRefused({ rule: "GrantsNotHeld", grants: beyond }))
  if (order.role === "admin" && p.role !== "owner" && p.role !== "admin") {
    return Option.some(new MintRefused({ rule: "AdminKeyNeedsAdmin", grants: [] }))
  }
  return Option.none()
}

export interface ApiKeysService {
  /**
   * Mints a key for `caller`: authorization (a principal cannot mint grants it does not hold, nor
   * an admin key below admin), the key and its audit row written in one atomic batch.
   */
  readonly mint: (caller: Minter, order: MintOrder) => Effect.Effect<MintedKey, MintRefused | StoreError>
  /** Prepares a new key; nothing is written until the caller runs `statement`. */
  readonly prepare: (request: MintRequest) => Effect.Effect<MintedKey>
  /** The active key a presented credential names, if any. */
  readonly authenticate: (presented: string) => Effect.Effect<Option.Option<ApiKeyRecord>, StoreError>
  /** An active key by id (tokens exchanged from a key are checked against it). */
  readonly active: (id: string) => Effect.Effect<Option.Option<ApiKeyRecord>, StoreError>
  /** One page of the namespace's keys, revoked ones included, oldest first (key: created_at, id). */
  readonly list: (namespace: string, page: PageRequest) => Effect.Effect<Page<ApiKeyRecord>, StoreError>
  /** The conditional revoke for the caller's batch: touches only an unrevoked key of `namespace`. */
  readonly revokeStatement: (namespace: string, id: string, at: number) => Statement
  /**
   * `authenticate` and `active` answered on the spot, from a row read on the spot or kept
   * (KeptReads.ts; `KeptReads.forget` after a write that changed keys).
   */
  readonly now: ApiKeysNow
}

/** Undefined: the row must be read from the registry first (`authenticate` and `active` then). */
export interface ApiKeysNow {
  readonly authenticate: (presented: string, now: number) => Either.Either<Option.Option<ApiKeyRecord>, StoreError> | undefined
  readonly active: (id: string, now: number) => Either.Either<Option.Option<ApiKeyRecord>, StoreError> | undefined
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
const newKeyId = (): string => {
  const bytes = crypto.randomBytes(16)
  let out = "key_"
  for (const b of bytes) out += BASE32[b & 31]
  return out
}

const tokenPattern = /^portico_(key_[a-z2-7]{16})_([A-Za-z0-9_-]{43})$/

/** A presented key's id and secret, or undefined when it is not of the key's form. */
const parsePresented = (presented: string): { readonly id: string; readonly secret: string } | undefined => {
  const match = tokenPattern.exec(presented)
  const id = match?.[1]
  const secret = match?.[2]
  return id === undefined || secret === undefined ? undefined : { id, secret }
}

interface ParsedScopes {
  readonly scopes: ReadonlyArray<string>
  readonly grants: ReadonlyArray<Grant>
}

/**
 * Parsed scope lists by their stored JSON text. A key's scopes never change after minting, and
 * many requests present the same few keys, so parsing (JSON plus the grant patterns) is done once
 * per distinct text. This caches only the parse of a string, never whether a key is valid: every
 * request still reads the key's row, so revocation stays immediate.
 */
const parsedScopes = new Map<string, ParsedScopes>()
const PARSED_SCOPES_MAX = 1024

const grantsOf = (scopes: ReadonlyArray<string>): ReadonlyArray<Grant> =>
  scopes.flatMap((s) => {
    const g = parseGrant(s)
    return g === undefined ? [] : [g]
  })

const scopesOf = (text: unknown): ParsedScopes => {
  if (typeof text !== "string") return { scopes: [], grants: [] }
  const cached = parsedScopes.get(text)
  if (cached !== undefined) return cached
  const scopes = parseScopes(text)
  const parsed: ParsedScopes = { scopes: Object.freeze(scopes), grants: Object.freeze(grantsOf(scopes)) }
  if (parsedScopes.size >= PARSED_SCOPES_MAX) parsedScopes.clear()
  parsedScopes.set(text, parsed)
  return parsed
}

const toRecord = (row: Row): ApiKeyRecord => {
  const { grants, scopes } = scopesOf(row.scopes)
  return {
    id: String(row.id),
    namespace: String(row.namespace),
    role: String(row.role) as KeyRole,
    scopes,
    grants,
    label: String(row.label),
    createdAt: Number(row.created_at),
    createdBy: String(row.created_by),
    expiresAt: row.expires_at === null ? undefined : Number(row.expires_at),
    revokedAt: row.revoked_at === null ? undefined : Number(row.revoked_at)
  }
}

// A row kept by the registry between commits is the same object for every request that reads it
// (SqliteRegistryStore.ts), so its record is made once.
const recordOf = oncePerObject(toRecord)

const parseScopes = (text: string): Array<string> => {
  try {
    const value: unknown = JSON.parse(text)
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : []
  } catch {
    return []
  }
}

/** Keys whose matched secret is remembered (secretMatches). */
const MATCHED_MAX = 10_000

const COLUMNS = "id, namespace, hash, role, scopes, label, created_at, created_by, expires_at, revoked_at"

export class ApiKeys extends Context.Tag("portico/ApiKeys")<ApiKeys, ApiKeysService>() {
  /** Needs the registry and the sealer; the audit trail it writes to is built in. */
  static readonly Live = Layer.effect(
    ApiKeys,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const sealer = yield* Sealer
      const audit = yield* Audit
      const keptReads = yield* KeptReads
      const hashOf = (id: string, secret: string) => sealer.hash("api-key-hash", id + ":" + secret)

      const isActive = (record: ApiKeyRecord, now: number) =>
        record.revokedAt === undefined && (record.expiresAt === undefined || record.expiresAt > now)

      const byId = (id: string): Statement => ({ sql: `SELECT ${COLUMNS} FROM api_keys WHERE id = ?`, params: [id] })

      // A secret that matched its key's stored hash is not hashed again while that hash is the
      // one stored: the HMAC was most of what a request paid for its key once the row read became
      // cheap. Held in memory only, as the secret is while its request is served; bounded.
      const matched = new Map<string, { readonly hash: string; readonly secret: string }>()
      const secretMatches = (id: string, stored: string, secret: string): boolean => {
        const known = matched.get(id)
        if (known !== undefined && known.hash === stored) return safeEqual(known.secret, secret)
        if (!safeEqual(stored, hashOf(id, secret))) return false
        if (matched.size >= MATCHED_MAX) matched.clear()
        matched.set(id, { hash: stored, secret })
        return true
      }

      /** The presented key's row, when its secret matches and the key is live. */
      const accepted = (rows: ReadonlyArray<Row>, id: string, secret: string, now: number): Option.Option<ApiKeyRecord> => {
        const row = rows[0]
        if (row === undefined) return Option.none()
        const record = recordOf(row)
        return secretMatches(id, String(row.hash), secret) && isActive(record, now) ? Option.some(record) : Option.none()
      }
      const live = (rows: ReadonlyArray<Row>, now: number): Option.Option<ApiKeyRecord> =>
        Option.filter(Option.map(Option.fromNullable(rows[0]), recordOf), (record) => isActive(record, now))

      // A registry read on the spot (SQLite) is the row as it is now. One that reads over the
      // network keeps each key's row for a second (KeptReads.ts). Only a row found is kept: a key
      // minted a moment ago on another gateway is read, never refused from memory.
      const kept = keptReads.table<ReadonlyArray<Row>>()
      const keep = (id: string, rows: ReadonlyArray<Row>): void => {
        if (store.queryNow !== undefined || rows.length === 0) return
        kept.set(id, rows)
      }
      const keptRows = (id: string): Either.Either<ReadonlyArray<Row>, StoreError> | undefined => {
        const rows = kept.get(id)
        return rows === undefined ? undefined : Either.right(rows)
      }
      const queryNow = store.queryNow
      const readNow = queryNow === undefined ? keptRows : (id: string) => queryNow(byId(id))
      const readRows = (id: string) => Effect.tap(store.query(byId(id)), (rows) => Effect.sync(() => keep(id, rows)))
      const now: ApiKeysNow = {
        authenticate: (presented, at) => {
          const parsed = parsePresented(presented)
          if (parsed === undefined) return Either.right(Option.none())
          const rows = readNow(parsed.id)
          return rows === undefined ? undefined : Either.map(rows, (found) => accepted(found, parsed.id, parsed.secret, at))
        },
        active: (id, at) => {
          const rows = readNow(id)
          return rows === undefined ? undefined : Either.map(rows, (found) => live(found, at))
        }
      }

      const prepare: ApiKeysService["prepare"] = (request) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const id = newKeyId()
          const secret = crypto.randomBytes(32).toString("base64url")
          const record: ApiKeyRecord = {
            id,
            namespace: request.namespace,
            role: request.role,
            scopes: request.scopes,
            grants: grantsOf(request.scopes),
            label: request.label,
            createdAt: now,
            createdBy: request.createdBy,
            expiresAt: request.expiresAt,
            revokedAt: undefined
          }
          return {
            record,
            apiKey: `portico_${id}_${secret}`,
            statement: {
              sql: `INSERT INTO api_keys (${COLUMNS}, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
              params: [
                id,
                request.namespace,
                hashOf(id, secret),
                request.role,
                JSON.stringify(request.scopes),
                request.label,
                now,
                request.createdBy,
                request.expiresAt ?? null,
                request.origin ?? "admin"
              ]
            }
          }
        })

      const mint: ApiKeysService["mint"] = (caller, order) =>
        Effect.gen(function* () {
          const refused = authorizeMint(caller, order)
          if (Option.isSome(refused)) return yield* refused.value
          const actor = caller._tag === "Operator" ? caller.actor : caller.principal.subject
          const now = yield* Clock.currentTimeMillis
          const minted = yield* prepare({
            namespace: order.namespace,
            role: order.role,
            scopes: order.scopes,
            label: order.label,
            expiresAt: order.expiresInDays === undefined ? undefined : now + order.expiresInDays * 86_400_000,
            createdBy: actor,
            ...(order.origin === undefined ? {} : { origin: order.origin })
          })
          const { scopes, label } = order
          const detail = order.origin === "sign-in" ? { origin: "sign-in", scopes, label } : { role: order.role, scopes, label }
          const entry = yield* audit.entry(order.namespace, "key.create", actor, minted.record.id, detail)
          yield* store.batch([minted.statement, entry])
          return minted
        })

      return {
        mint,
        prepare,
        authenticate: (presented) => {
          const parsed = parsePresented(presented)
          if (parsed === undefined) return Effect.succeed(Option.none())
          return Effect.flatMap(readRows(parsed.id), (rows) => Effect.map(Clock.currentTimeMillis, (at) => accepted(rows, parsed.id, parsed.secret, at)))
        },
        active: (id) => Effect.flatMap(readRows(id), (rows) => Effect.map(Clock.currentTimeMillis, (at) => live(rows, at))),
        list: (namespace, page) =>
          readPage(
            store,
            { select: `SELECT ${COLUMNS} FROM api_keys`, where: ["namespace = ?"], params: [namespace], order: ["created_at", "id"], direction: "asc" },
            page,
            toRecord
          ),
        revokeStatement: (namespace, id, at) => ({
          sql: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND namespace = ? AND revoked_at IS NULL",
          params: [at, id, namespace]
        }),
        now
      }
    })
  ).pipe(Layer.provide(Audit.Live))

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    ApiKeys.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test,
          Audit.Test,
          KeptReads.Test
        )
      )
    )
  )
}
