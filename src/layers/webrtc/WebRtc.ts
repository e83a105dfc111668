/**
 * Real-time media's control plane (spec §4.9; docs/webrtc.md): a namespace turns it on and off,
 * with stealth and admission as settings of its own, and its members get TURN credentials for the
 * servers the operator runs. Enabling makes the namespace's relay secret (32 random bytes, sealed
 * in the registry), which keys what its media server signs (spec §6.4); disabling drops it.
 */
import { Clock, Context, Effect, Either, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import type { WebRtcCode } from "../../domain/Errors.js"
import { turnCredential } from "../../domain/TurnCredentials.js"
import { Audit } from "../audit/Audit.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"

export interface WebRtcStatus {
  readonly enabled: boolean
  readonly stealth: boolean
  readonly requireAdmission: boolean
  /** The TURN URIs a client of this namespace is given (the stealth one when stealth is on and one is set). */
  readonly turnUris: ReadonlyArray<string>
}

export interface TurnCredentials {
  readonly username: string
  readonly password: string
  readonly ttl: number
  readonly expiresAt: number
  readonly uris: ReadonlyArray<string>
}

export interface WebRtcService {
  /** Turns real-time media on (idempotent: the relay secret made the first time stays). */
  readonly enable: (namespace: string, actor: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>
  /** Turns it off and drops the relay secret; stealth and admission are kept for a later enable. */
  readonly disable: (namespace: string, actor: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>
  readonly setStealth: (namespace: string, on: boolean, actor: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>
  readonly status: (namespace: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>
  readonly setRequireAdmission: (namespace: string, on: boolean, actor: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>
  /** Credentials for the TURN servers, for a namespace with real-time media on. */
  readonly turnCredentials: (namespace: string) => Effect.Effect<TurnCredentials, Refused<WebRtcCode>>
  /**
   * `turnCredentials` on the spot (`now` in Unix ms), for the fast lane: undefined when the
   * namespace's settings were not read in the last KEPT_MS, and the effectful call must read them.
   */
  readonly turnCredentialsNow: (namespace: string, now: number) => Either.Either<TurnCredentials, Refused<WebRtcCode>> | undefined
  /** The namespace's relay secret; undefined while real-time media is off. */
  readonly relaySecret: (namespace: string) => Effect.Effect<Uint8Array | undefined, Refused<WebRtcCode>>
  /**
   * What a join reads, on the spot (`now` in Unix ms): whether media is on, whether admission is
   * required, and the opened relay secret. Undefined when the settings were not read in the last
   * KEPT_MS or the secret is not opened yet: then `mayJoin` and `relaySecret` must read them.
   */
  readonly keptNow: (namespace: string, now: number) => { readonly enabled: boolean; readonly requireAdmission: boolean; readonly secret: Uint8Array | undefined } | undefined
  /**
   * Whether `user` may join `room` now, and muted or not: media on, and an admission that is
   * current and not revoked where the namespace requires one (403 otherwise, saying which).
   */
  readonly mayJoin: (namespace: string, room: string, user: string) => Effect.Effect<{ readonly muted: boolean }, Refused<WebRtcCode>>
  /** Lets `user` join `room` for `ttlSeconds` (a function's `webrtc_admit`), replacing an earlier admission. */
  readonly admit: (namespace: string, room: string, user: string, ttlSeconds: number, muted: boolean) => Effect.Effect<{ readonly expiresAt: number }, Refused<WebRtcCode>>
  /** Revokes `user`'s admission to `room`, if one is held (a kick): whether one was. */
  readonly revoke: (namespace: string, room: string, user: string) => Effect.Effect<boolean, Refused<WebRtcCode>>
}

interface Row {
  readonly enabled: boolean
  readonly stealth: boolean
  readonly requireAdmission: boolean
  readonly sealed: string | undefined
}

const off: Row = { enabled: false, stealth: false, requireAdmission: false, sealed: undefined }

/**
 * How long a namespace's settings read from the registry answer credentials on the spot. A change
 * made on this gateway is seen at once; one made on another gateway within this long (media turned
 * off, or stealth changed, there).
 */
const KEPT_MS = 5_000
const storeDown = () => refuse("UNAVAILABLE", "the registry did not answer", "retry shortly", 5)
const notEnabled = () =>
  refuse("FORBIDDEN", "real-time media is not enabled for this namespace", "an owner or admin enables it: POST /v1/namespace/webrtc/enable")

export class WebRtc extends Context.Tag("portico/WebRtc")<WebRtc, WebRtcService>() {
  static readonly Live = Layer.effect(
    WebRtc,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const sealer = yield* Sealer
      const audit = yield* Audit
      const turn = config.webrtc

      /** Each namespace's settings as last read or written here, with when. */
      const kept = new Map<string, { readonly row: Row; readonly at: number }>()
      const keep = (namespace: string, row: Row) => {
        if (kept.size >= 10_000) kept.clear()
        kept.set(namespace, { row, at: Date.now() })
        return row
      }

      const read = (namespace: string) =>
        Effect.mapError(
          Effect.map(
            store.query({ sql: "SELECT enabled, stealth, require_admission, relay_secret_sealed FROM webrtc_settings WHERE namespace = ?", params: [namespace] }),
            (rows): Row => {
              const row = rows[0]
              if (row === undefined) return keep(namespace, off)
              const sealed = row["relay_secret_sealed"]
              return keep(namespace, {
                enabled: Number(row["enabled"]) === 1,
                stealth: Number(row["stealth"]) === 1,
                requireAdmission: Number(row["require_admission"]) === 1,
                sealed: typeof sealed === "string" ? sealed : undefined
              })
            }
          ),
          storeDown
        )

      const view = (row: Row): WebRtcStatus => ({
        enabled: row.enabled,
        stealth: row.stealth,
        requireAdmission: row.requireAdmission,
        turnUris: row.stealth && turn.stealthUri !== undefined ? [turn.stealthUri] : turn.turnUris
      })

      /** Writes `row` for the namespace with its audit row, in one batch. */
      const write = (namespace: string, row: Row, action: string, actor: string, detail: Readonly<Record<string, unknown>>) =>
        Effect.gen(function* () {
          const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const entry = yield* audit.entry(namespace, action, actor, namespace, detail)
          yield* Effect.mapError(
            store.batch([
              {
                sql: `INSERT INTO webrtc_settings (namespace, enabled, stealth, require_admission, relay_secret_sealed, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                      ON CONFLICT (namespace) DO UPDATE SET enabled = excluded.enabled, stealth = excluded.stealth,
                      require_admission = excluded.require_admission, relay_secret_sealed = excluded.relay_secret_sealed, updated_at = excluded.updated_at`,
                params: [namespace, row.enabled ? 1 : 0, row.stealth ? 1 : 0, row.requireAdmission ? 1 : 0, row.sealed ?? null, now]
              },
              entry
            ]),
            storeDown
          )
          return view(keep(namespace, row))
        })

      const enable: WebRtcService["enable"] = (namespace, actor) =>
        Effect.flatMap(read(namespace), (row) =>
          row.enabled && row.sealed !== undefined
            ? Effect.succeed(view(row))
            : write(namespace, { ...row, enabled: true, sealed: sealer.seal("webrtc-relay", namespace, randomBytes(32)) }, "webrtc.enable", actor, {})
        )

      const disable: WebRtcService["disable"] = (namespace, actor) =>
        Effect.flatMap(read(namespace), (row) =>
          !row.enabled ? Effect.succeed(view(row)) : write(namespace, { ...row, enabled: false, sealed: undefined }, "webrtc.disable", actor, {})
        )

      const setStealth: WebRtcService["setStealth"] = (namespace, on, actor) =>
        Effect.flatMap(read(namespace), (row): Effect.Effect<WebRtcStatus, Refused<WebRtcCode>> => {
          if (!row.enabled) return Effect.fail(notEnabled())
          return row.stealth === on ? Effect.succeed(view(row)) : write(namespace, { ...row, stealth: on }, on ? "webrtc.stealth.enable" : "webrtc.stealth.disable", actor, {})
        })

      const setRequireAdmission: WebRtcService["setRequireAdmission"] = (namespace, on, actor) =>
        Effect.flatMap(read(namespace), (row) =>
          row.requireAdmission === on ? Effect.succeed(view(row)) : write(namespace, { ...row, requireAdmission: on }, "webrtc.config", actor, { require_admission: on })
        )

      /** The last credentials made for each namespace: the same for a whole second (their expiry counts seconds). */
      const minted = new Map<string, { readonly expiresAt: number; readonly stealth: boolean; readonly credentials: TurnCredentials }>()
      /** Credentials for a namespace whose settings are `row`, at `now` (Unix ms). */
      const credentialsFor = (namespace: string, row: Row, now: number): Either.Either<TurnCredentials, Refused<WebRtcCode>> => {
        if (!row.enabled) return Either.left(notEnabled())
        if (turn.turnSecret === undefined || turn.turnUris.length === 0) {
          return Either.left(refuse("UNAVAILABLE", "this gateway has no TURN servers configured", "the operator sets PORTICO_TURN_URIS and PORTICO_TURN_SECRET (docs/webrtc.md)", 60))
        }
        const expiresAt = Math.floor(now / 1000) + turn.credentialTtlSeconds
        const last = minted.get(namespace)
        if (last !== undefined && last.expiresAt === expiresAt && last.stealth === row.stealth) return Either.right(last.credentials)
        const credential = turnCredential(Redacted.value(turn.turnSecret), namespace, now / 1000, turn.credentialTtlSeconds)
        const credentials = { ...credential, ttl: turn.credentialTtlSeconds, uris: view(row).turnUris }
        if (minted.size >= 10_000) minted.clear()
        minted.set(namespace, { expiresAt, stealth: row.stealth, credentials })
        return Either.right(credentials)
      }

      const turnCredentials: WebRtcService["turnCredentials"] = (namespace) =>
        Effect.flatMap(Effect.zip(read(namespace), Clock.currentTimeMillis), ([row, now]) => credentialsFor(namespace, row, now))

      const turnCredentialsNow: WebRtcService["turnCredentialsNow"] = (namespace, now) => {
        const known = kept.get(namespace)
        return known === undefined || now - known.at >= KEPT_MS ? undefined : credentialsFor(namespace, known.row, now)
      }

      /**
       * The settings as this gateway read them in the last KEPT_MS, else read now: what each join
       * and each participant event reads, as credentials do (a change made on another gateway is
       * seen here within KEPT_MS).
       */
      const recent = (namespace: string) =>
        Effect.suspend(() => {
          const known = kept.get(namespace)
          return known !== undefined && Date.now() - known.at < KEPT_MS ? Effect.succeed(known.row) : read(namespace)
        })

      /** Relay secrets opened, by their sealed text: a join and an event each need one. */
      const opened = new Map<string, Uint8Array>()
      const relaySecret: WebRtcService["relaySecret"] = (namespace) =>
        Effect.flatMap(recent(namespace), (row) => {
          if (!row.enabled || row.sealed === undefined) return Effect.succeed(undefined)
          const known = opened.get(row.sealed)
          if (known !== undefined) return Effect.succeed(known)
          const sealed = row.sealed
          return Effect.mapError(
            Effect.tap(sealer.open("webrtc-relay", namespace, sealed), (secret) =>
              Effect.sync(() => {
                if (opened.size >= 10_000) opened.clear()
                opened.set(sealed, secret)
              })
            ),
            storeDown
          )
        })

      const keptNow: WebRtcService["keptNow"] = (namespace, now) => {
        const known = kept.get(namespace)
        if (known === undefined || now - known.at >= KEPT_MS) return undefined
        const { enabled, requireAdmission, sealed } = known.row
        if (!enabled || sealed === undefined) return { enabled, requireAdmission, secret: undefined }
        const secret = opened.get(sealed)
        return secret === undefined ? undefined : { enabled, requireAdmission, secret }
      }

      const mayJoin: WebRtcService["mayJoin"] = (namespace, room, user) =>
        Effect.gen(function* () {
          const row = yield* recent(namespace)
          if (!row.enabled) return yield* Effect.fail(notEnabled())
          if (!row.requireAdmission) return { muted: false }
          const rows = yield* Effect.mapError(
            store.query({
              sql: "SELECT muted, expires_at, revoked_at FROM webrtc_admissions WHERE namespace = ? AND room = ? AND user_id = ?",
              params: [namespace, room, user]
            }),
            storeDown
          )
          const admission = rows[0]
          const hint = "an admission is made by the namespace's function (host call webrtc_admit)"
          if (admission === undefined) return yield* Effect.fail(refuse("FORBIDDEN", `room ${room} requires an admission, and you hold none`, hint))
          if (admission["revoked_at"] !== null && admission["revoked_at"] !== undefined) {
            return yield* Effect.fail(refuse("FORBIDDEN", `your admission to room ${room} was revoked`, hint))
          }
          const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          if (Number(admission["expires_at"]) <= now) return yield* Effect.fail(refuse("FORBIDDEN", `your admission to room ${room} expired`, hint))
          return { muted: Number(admission["muted"]) === 1 }
        })

      const admit: WebRtcService["admit"] = (namespace, room, user, ttlSeconds, muted) =>
        Effect.gen(function* () {
          const row = yield* read(namespace)
          if (!row.enabled) return yield* Effect.fail(notEnabled())
          const expiresAt = Math.floor((yield* Clock.currentTimeMillis) / 1000) + ttlSeconds
          yield* Effect.mapError(
            store.exec({
              sql: `INSERT INTO webrtc_admissions (namespace, room, user_id, muted, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)
                    ON CONFLICT (namespace, room, user_id) DO UPDATE SET muted = excluded.muted, expires_at = excluded.expires_at, revoked_at = NULL`,
              params: [namespace, room, user, muted ? 1 : 0, expiresAt]
            }),
            storeDown
          )
          return { expiresAt }
        })

      const revoke: WebRtcService["revoke"] = (namespace, room, user) =>
        Effect.gen(function* () {
          const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const result = yield* Effect.mapError(
            store.exec({
              sql: "UPDATE webrtc_admissions SET revoked_at = ? WHERE namespace = ? AND room = ? AND user_id = ? AND revoked_at IS NULL",
              params: [now, namespace, room, user]
            }),
            storeDown
          )
          return result.rowsAffected > 0
        })

      return {
        enable,
        disable,
        setStealth,
        status: (namespace) => Effect.map(read(namespace), view),
        setRequireAdmission,
        turnCredentials,
        turnCredentialsNow,
        relaySecret,
        keptNow,
        mayJoin,
        admit,
        revoke
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => WebRtc.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test, Sealer.Test, Audit.Test))))
}
