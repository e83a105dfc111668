/**
 * The operator plane's records (docs/operators.md): the operator list, one-use invites to join
 * it, the creators allowlist and the operator settings. Every change and its operator audit row
 * are one atomic batch; conditional changes are SQL predicates whose row counts decide.
 *
 * PORTICO_OPERATORS is a bootstrap list: the wallets it names are operators as long as the
 * setting names them, beside the registry's list, and cannot be removed over HTTP.
 */
import { Clock, Context, Effect, Layer } from "effect"
import * as crypto from "node:crypto"
import type { OperatorCode } from "../../domain/Errors.js"
import { isSettingName, SETTING_DEFAULTS, type SettingName, settingRefusal } from "../../domain/OperatorSettings.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { OperatorAudit } from "./OperatorAudit.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** An invite's default and longest life (spec §8). */
export const INVITE_MAX_SECONDS = 3600

export interface OperatorRecord {
  readonly wallet: string
  readonly addedAt: number
  readonly addedBy: string
  /** `registry`: on the list; `config`: named by PORTICO_OPERATORS. */
  readonly source: "registry" | "config"
}

export interface CreatorRecord {
  readonly wallet: string
  readonly addedAt: number
  readonly addedBy: string
}

export interface Invite {
  /** The bearer secret, shown once: only its keyed hash is kept. */
  readonly token: string
  readonly expiresAt: number
}

export type OperatorRefused = Refused<OperatorCode>

export interface OperatorsService {
  readonly isOperator: (wallet: string) => Effect.Effect<boolean, StoreError>
  /** Adds a wallet to the list; false when it was there already (nothing written then). */
  readonly add: (wallet: string, actor: string) => Effect.Effect<boolean, StoreError>
  readonly list: Effect.Effect<ReadonlyArray<OperatorRecord>, StoreError>
  /**
   * Takes a wallet off the registry's list; true when it was there. Refused (409): a wallet
   * PORTICO_OPERATORS names (removed only there), and the last operator (nobody could act then).
   */
  readonly remove: (wallet: string, actor: string) => Effect.Effect<boolean, OperatorRefused | StoreError>
  readonly invite: (actor: string, expirySeconds: number) => Effect.Effect<Invite, StoreError>
  /** The signed-in wallet joins the list with an unspent, unexpired invite, spending it. */
  readonly redeem: (token: string, wallet: string) => Effect.Effect<void, OperatorRefused | StoreError>
  readonly creators: Effect.Effect<ReadonlyArray<CreatorRecord>, StoreError>
  readonly isCreator: (wallet: string) => Effect.Effect<boolean, StoreError>
  readonly allowCreator: (wallet: string, actor: string) => Effect.Effect<boolean, StoreError>
  readonly removeCreator: (wallet: string, actor: string) => Effect.Effect<boolean, StoreError>
  /** Every setting, its default where none was stored. */
  readonly settings: Effect.Effect<Readonly<Record<SettingName, string>>, StoreError>
  readonly setting: (name: SettingName) => Effect.Effect<string, StoreError>
  /** Checks then stores a value; an unusable one is refused with nothing written. */
  readonly set: (name: string, value: string, actor: string) => Effect.Effect<void, OperatorRefused | StoreError>
}

export class Operators extends Context.Tag("portico/Operators")<Operators, OperatorsService>() {
  static readonly Live = Layer.effect(
    Operators,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* OperatorAudit
      const bootstrap = (yield* PorticoConfig).operators
      // an invite is 192 random bits: a plain SHA-256 of it cannot be walked back to the token
      const inviteHash = (token: string) => crypto.createHash("sha256").update(token).digest("base64url")

      const listed = (wallet: string) =>
        Effect.map(store.query({ sql: "SELECT 1 AS ok FROM operators WHERE wallet = ?", params: [wallet] }), (rows) => rows.length > 0)

      const setting = (name: SettingName) =>
        Effect.map(store.query({ sql: "SELECT value FROM operator_settings WHERE name = ?", params: [name] }), (rows) =>
          rows[0] === undefined ? SETTING_DEFAULTS[name] : String(rows[0].value)
        )

      /** A change and its audit row in one batch; true when the change touched a row. */
      const changed = (sql: string, params: ReadonlyArray<string | number>, entry: Parameters<typeof audit.statement>[0]) =>
        Effect.gen(function* () {
          // no row changed, no audit row
          const row = yield* audit.statement(entry, { sql: "changes() > 0" })
          const [result] = yield* store.batch([{ sql, params }, row])
          return result !== undefined && result.rowsAffected > 0
        })

      return {
        isOperator: (wallet) => (bootstrap.includes(wallet) ? Effect.succeed(true) : listed(wallet)),
        add: (wallet, actor) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            changed("INSERT INTO operators (wallet, added_at, added_by) VALUES (?, ?, ?) ON CONFLICT (wallet) DO NOTHING", [wallet, now, actor], {
              actor,
              action: "operator.add",
              target: wallet
            })
          ),
        list: Effect.map(store.query({ sql: "SELECT wallet, added_at, added_by FROM operators ORDER BY added_at, wallet LIMIT 1000" }), (rows) => {
          const fromRegistry: Array<OperatorRecord> = rows.map((r) => ({
            wallet: String(r.wallet),
            addedAt: Number(r.added_at),
            addedBy: String(r.added_by),
            source: "registry"
          }))
          const fromConfig: Array<OperatorRecord> = bootstrap
            .filter((w) => !fromRegistry.some((r) => r.wallet === w))
            .map((wallet) => ({ wallet, addedAt: 0, addedBy: "PORTICO_OPERATORS", source: "config" }))
          return [...fromConfig, ...fromRegistry]
        }),
        remove: (wallet, actor) =>
          Effect.gen(function* () {
            if (bootstrap.includes(wallet)) {
              return yield* refuse("CONFLICT", `${wallet} is an operator through PORTICO_OPERATORS`, "remove it from PORTICO_OPERATORS and restart the gateway")
            }
            // without bootstrap operators, the last listed one stays: checked in the statement itself,
            // so two operators removing each other at once cannot both go
            const keepOne = bootstrap.length === 0 ? " AND (SELECT COUNT(*) FROM operators) > 1" : ""
            const removed = yield* changed(`DELETE FROM operators WHERE wallet = ?${keepOne}`, [wallet], { actor, action: "operator.remove", target: wallet })
            if (removed || keepOne === "") return removed
            if (yield* listed(wallet)) {
              return yield* refuse("CONFLICT", "the last operator cannot be removed", "add another operator first (POST /v1/operator/invites)")
            }
            return false
          }),
        invite: (actor, expirySeconds) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const token = "inv_" + crypto.randomBytes(24).toString("base64url")
            const expiresAt = now + expirySeconds * 1000
            const entry = yield* audit.statement({ actor, action: "operator.invite", detail: { expires_at: Math.floor(expiresAt / 1000) } })
            yield* store.batch([
              // spent and expired invites older than a day go with each new one
              { sql: "DELETE FROM operator_invites WHERE expires_at < ?", params: [now - 86_400_000] },
              {
                sql: "INSERT INTO operator_invites (hash, created_by, created_at, expires_at) VALUES (?, ?, ?, ?)",
                params: [inviteHash(token), actor, now, expiresAt]
              },
              entry
            ])
            return { token, expiresAt }
          }),
        redeem: (token, wallet) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const hash = inviteHash(token)
            const entry = yield* audit.statement(
              { actor: wallet, action: "operator.join", target: wallet },
              { sql: "EXISTS (SELECT 1 FROM operator_invites WHERE hash = ? AND redeemed_at = ? AND redeemed_by = ?)", params: [hash, now, wallet] }
            )
            // spending the invite is the condition of everything after it
            const [spent] = yield* store.batch([
              {
                sql: "UPDATE operator_invites SET redeemed_by = ?, redeemed_at = ? WHERE hash = ? AND redeemed_at IS NULL AND expires_at > ?",
                params: [wallet, now, hash, now]
              },
              {
                sql: `INSERT INTO operators (wallet, added_at, added_by)
                      SELECT ?, ?, created_by FROM operator_invites WHERE hash = ? AND redeemed_at = ? AND redeemed_by = ?
                      ON CONFLICT (wallet) DO NOTHING`,
                params: [wallet, now, hash, now, wallet]
              },
              entry
            ])
            if (spent === undefined || spent.rowsAffected === 0) {
              return yield* refuse("NOT_FOUND", "unknown, expired or already used invite", "ask an operator for a new invite (POST /v1/operator/invites)")
            }
          }),
        creators: Effect.map(store.query({ sql: "SELECT wallet, added_at, added_by FROM namespace_creators ORDER BY added_at, wallet LIMIT 10000" }), (rows) =>
          rows.map((r) => ({ wallet: String(r.wallet), addedAt: Number(r.added_at), addedBy: String(r.added_by) }))
        ),
        isCreator: (wallet) =>
          Effect.map(store.query({ sql: "SELECT 1 AS ok FROM namespace_creators WHERE wallet = ?", params: [wallet] }), (rows) => rows.length > 0),
        allowCreator: (wallet, actor) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            changed("INSERT INTO namespace_creators (wallet, added_at, added_by) VALUES (?, ?, ?) ON CONFLICT (wallet) DO NOTHING", [wallet, now, actor], {
              actor,
              action: "creators.add",
              target: wallet
            })
          ),
        removeCreator: (wallet, actor) =>
          changed("DELETE FROM namespace_creators WHERE wallet = ?", [wallet], { actor, action: "creators.remove", target: wallet }),
        settings: Effect.map(store.query({ sql: "SELECT name, value FROM operator_settings" }), (rows) => {
          const values: Record<SettingName, string> = { ...SETTING_DEFAULTS }
          for (const r of rows) {
            const name = String(r.name)
            if (isSettingName(name)) values[name] = String(r.value)
          }
          return values
        }),
        setting,
        set: (name, value, actor) =>
          Effect.gen(function* () {
            if (!isSettingName(name)) return yield* refuse("NOT_FOUND", `no setting ${name}`, "settings: namespace-creation, max-namespaces-per-wallet, auto-update, update-channel, update-window, release-repo")
            const refusal = settingRefusal(name, value)
            if (refusal !== undefined) return yield* refuse("VALIDATION_FAILED", refusal)
            const now = yield* Clock.currentTimeMillis
            yield* store.batch([
              {
                sql: `INSERT INTO operator_settings (name, value, updated_at, updated_by) VALUES (?, ?, ?, ?)
                      ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
                params: [name, value, now, actor]
              },
              yield* audit.statement({ actor, action: "settings.set", target: name, detail: { value } })
            ])
          })
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Operators.Live.pipe(Layer.provide(Layer.mergeAll(OperatorAudit.Test, PorticoConfig.Test, SqliteRegistryStore.Test)))
  )
}

