/**
 * Fetch capabilities (spec §4.4): bearer tokens that let anyone holding one read one CID of one
 * namespace, with no credential, until they expire or are revoked. A device-bound session mints
 * them; each comes with a revoke key that cancels it without a credential.
 *
 * Token `pfc1.<id>.<secret>`: the id finds the row, the secret proves it. Only keyed hashes of the
 * secret and of the revoke key are stored, so a registry dump mints nothing. A capability may be
 * used any number of times until it expires: a player seeking through a file sends many ranges.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { canonicalCid } from "../../domain/ContentId.js"
import { Code } from "../../domain/Errors.js"
import { hasGrant, type Principal } from "../../domain/Principal.js"
import { Audit } from "../audit/Audit.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { safeEqual, Sealer } from "../secrets/Sealer.js"
import { ContentIndex } from "./ContentIndex.js"
import { notCanonical, refuse, type StorageRefused } from "./StorageRefused.js"
import { FETCH_CAP_LIMITS } from "../../domain/Limits.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export { FETCH_CAP_LIMITS }

export interface MintedCap {
  readonly id: string
  readonly token: string
  readonly revoke_key: string
  /** Unix seconds. */
  readonly expires_at: number
}

export interface FetchCapsService {
  readonly mint: (
    caller: Principal,
    cidText: string,
    count: number,
    ttlSeconds: number
  ) => Effect.Effect<{ readonly namespace: string; readonly cid: string; readonly caps: ReadonlyArray<MintedCap> }, StorageRefused>
  readonly revoke: (id: string, revokeKey: string | undefined) => Effect.Effect<void, StorageRefused>
  /** The namespace a capability lets its bearer read `cid` from. */
  readonly redeem: (token: string, cid: string) => Effect.Effect<string, StorageRefused>
}

const ID = /^[0-9a-f]{32}$/
const TOKEN = /^pfc1\.([0-9a-f]{32})\.([A-Za-z0-9_-]{43})$/

const unavailable = () =>
  refuse(Code.FETCH_CAP_UNAVAILABLE, "the capability service is unavailable", "retry shortly", 2)
const invalid = () =>
  refuse(Code.FETCH_CAP_INVALID, "the fetch capability is not valid for this content", "ask the content's owner for a new one")

export class FetchCaps extends Context.Tag("portico/FetchCaps")<FetchCaps, FetchCapsService>() {
  static readonly Live = Layer.effect(
    FetchCaps,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const sealer = yield* Sealer
      const index = yield* ContentIndex
      const audit = yield* Audit
      const hash = (value: string) => sealer.hash("fetch-cap-hash", value)

      return {
        mint: (caller, cidText, count, ttlSeconds) =>
          Effect.gen(function* () {
            // a capability outlives the request; only a session a device holds may hand them out
            if (caller.method !== "jwt" || caller.keyId !== undefined || caller.deviceId === undefined) {
              return yield* Effect.fail(
                refuse(Code.FETCH_CAP_DEVICE_REQUIRED, "minting fetch capabilities needs a device-bound session", "sign in with a device key")
              )
            }
            // checked here, after the credential kind, so an API key always hears it needs a device
            if (!hasGrant(caller, "storage-read")) {
              return yield* Effect.fail(refuse(Code.GRANT_REQUIRED, "this route needs the storage-read grant"))
            }
            const cid = canonicalCid(cidText)
            if (cid === undefined) return yield* Effect.fail(notCanonical(cidText))
            const held = yield* Effect.mapError(index.holds(caller.namespace, cid), unavailable)
            if (!held) return yield* Effect.fail(refuse(Code.NOT_FOUND, "this namespace holds no content with that CID"))
            const now = yield* Clock.currentTimeMillis
            const expiresAt = Math.floor(now / 1000) + ttlSeconds
            const caps: Array<MintedCap> = []
            const rows = []
            for (let i = 0; i < count; i++) {
              const id = randomBytes(16).toString("hex")
              const secret = randomBytes(32).toString("base64url")
              const revokeKey = randomBytes(32).toString("base64url")
              caps.push({ id, token: `pfc1.${id}.${secret}`, revoke_key: revokeKey, expires_at: expiresAt })
              rows.push({
                sql: `INSERT INTO fetch_caps (id, namespace, cid, token_hash, revoke_hash, created_by, created_at, expires_at)
                      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
                params: [id, caller.namespace, cid, hash(secret), hash(revokeKey), caller.subject, now, expiresAt]
              })
            }
            // expired rows go with each mint, so the table stays the size of what is live
            rows.push({ sql: "DELETE FROM fetch_caps WHERE expires_at < ?", params: [Math.floor(now / 1000) - 86400] })
            yield* Effect.mapError(store.batch(rows), unavailable)
            yield* audit.record(caller.namespace, "storage.fetch_caps", caller.subject, cid, { count, ttl_seconds: ttlSeconds })
            return { namespace: caller.namespace, cid, caps }
          }),

        revoke: (id, revokeKey) =>
          Effect.gen(function* () {
            if (!ID.test(id)) {
              return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, "a capability id is 32 hexadecimal characters"))
            }
            const wrongKey = refuse(Code.FETCH_CAP_REVOKE_KEY_INVALID, "the revoke key does not match this capability", "send X-Portico-Revoke-Key: <revoke_key>")
            if (revokeKey === undefined || revokeKey.length === 0 || revokeKey.length > 256) return yield* Effect.fail(wrongKey)
            const rows = yield* Effect.mapError(store.query({ sql: "SELECT revoke_hash FROM fetch_caps WHERE id = ?", params: [id] }), unavailable)
            const row = rows[0]
            // an unknown id answers like a wrong key: ids are not enumerable
            if (row === undefined || !safeEqual(String(row["revoke_hash"]), hash(revokeKey))) return yield* Effect.fail(wrongKey)
            const now = yield* Clock.currentTimeMillis
            yield* Effect.mapError(
              store.exec({ sql: "UPDATE fetch_caps SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", params: [now, id] }),
              unavailable
            )
          }),

        redeem: (token, cidText) =>
          Effect.gen(function* () {
            const cid = canonicalCid(cidText)
            if (cid === undefined) return yield* Effect.fail(notCanonical(cidText))
            const match = TOKEN.exec(token)
            if (match === null) return yield* Effect.fail(invalid())
            const [, id, secret] = match as unknown as [string, string, string]
            const rows = yield* Effect.mapError(
              store.query({ sql: "SELECT namespace, cid, token_hash, expires_at, revoked_at FROM fetch_caps WHERE id = ?", params: [id] }),
              unavailable
            )
            const row = rows[0]
            if (row === undefined || !safeEqual(String(row["token_hash"]), hash(secret))) return yield* Effect.fail(invalid())
            if (row["revoked_at"] !== null && row["revoked_at"] !== undefined) {
              return yield* Effect.fail(refuse(Code.FETCH_CAP_REVOKED, "the fetch capability was revoked"))
            }
            const now = yield* Clock.currentTimeMillis
            if (Number(row["expires_at"]) <= Math.floor(now / 1000) || row["cid"] !== cid) return yield* Effect.fail(invalid())
            return String(row["namespace"])
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    FetchCaps.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test,
          ContentIndex.Test,
          Audit.Test
        )
      )
    )
  )
}
