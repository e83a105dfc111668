/**
 * An account's devices: listing (revoked included, as tombstones) and revocation. Revoking ends
 * every session of the device in the same atomic write, so its refresh tokens die with them and
 * its access tokens stop at their next request on every gateway (sessions are checked per
 * request against the shared registry); the device's push registrations end in that write too
 * (spec §3.1), so no notification is sent to a revoked device.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { type SessionCode, statusOfCode } from "../../domain/Errors.js"
import { Audit } from "../audit/Audit.js"
import { KeptReads } from "../registry/KeptReads.js"
import { endDeviceRegistrations } from "../push/PushStore.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Row, type StoreError } from "../registry/RegistryStore.js"
import { SessionRefused, Sessions } from "../sessions/Sessions.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface DeviceView {
  readonly id: string
  readonly wallet: string
  readonly label: string
  readonly status: "active" | "pending" | "revoked"
  readonly createdAt: number
  readonly revokedAt: number | undefined
}

export interface DevicesService {
  /** One page of a wallet's devices, oldest first (key: created_at, id). */
  readonly list: (namespace: string, wallet: string, page: PageRequest) => Effect.Effect<Page<DeviceView>, StoreError>
  /**
   * Revokes a device. `account` limits it to one wallet's devices (undefined: an operator with
   * members write). A caller bound to a device proves that device's key over the target id.
   */
  readonly revoke: (input: {
    readonly namespace: string
    readonly account: string | undefined
    readonly deviceId: string
    readonly callerDeviceId: string | undefined
    readonly deviceProof: unknown
    readonly actor: string
  }) => Effect.Effect<void, SessionRefused | StoreError>
}

const refuse = (code: SessionCode, reason: string) => new SessionRefused({ status: statusOfCode[code], code, reason })

const toView = (r: Row): DeviceView => ({
  id: String(r.id),
  wallet: String(r.wallet),
  label: String(r.label),
  status: String(r.status) as DeviceView["status"],
  createdAt: Number(r.created_at),
  revokedAt: r.revoked_at === null ? undefined : Number(r.revoked_at)
})

export class Devices extends Context.Tag("portico/Devices")<Devices, DevicesService>() {
  static readonly Live = Layer.effect(
    Devices,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* Audit
      const sessions = yield* Sessions
      const kept = yield* KeptReads

      const row = (namespace: string, id: string) =>
        Effect.map(
          store.query({
            sql: "SELECT id, wallet, label, status, public_jwk, created_at, revoked_at FROM devices WHERE namespace = ? AND id = ?",
            params: [namespace, id]
          }),
          (rows) => Option.fromNullable(rows[0])
        )

      return {
        list: (namespace, wallet, page) =>
          readPage(
            store,
            {
              select: "SELECT id, wallet, label, status, created_at, revoked_at FROM devices",
              where: ["namespace = ?", "wallet = ?"],
              params: [namespace, wallet],
              order: ["created_at", "id"],
              direction: "asc"
            },
            page,
            toView
          ),
        revoke: (input) =>
          Effect.gen(function* () {
            const target = yield* row(input.namespace, input.deviceId)
            if (Option.isNone(target) || (input.account !== undefined && target.value.wallet !== input.account)) {
              return yield* refuse("DEVICE_NOT_FOUND", "no such device for this account")
            }
            // A caller bound to a device proves that device's key over the target id.
            if (input.callerDeviceId !== undefined) {
              yield* sessions.proveWithDevice(input.namespace, input.callerDeviceId, "revoke", input.deviceId, input.deviceProof)
            }
            // A tombstone stays a tombstone: revoking again changes nothing and still answers ok.
            if (target.value.status === "revoked") return
            const now = yield* Clock.currentTimeMillis
            const entry = yield* audit.entry(input.namespace, "device.revoke", input.actor, input.deviceId, {
              wallet: String(target.value.wallet)
            }, { onlyIfChanged: true })
            yield* store.batch([
              {
                sql: "UPDATE devices SET status = 'revoked', revoked_at = ? WHERE namespace = ? AND id = ? AND status <> 'revoked'",
                params: [now, input.namespace, input.deviceId]
              },
              entry,
              {
                sql: `UPDATE sessions SET ended_at = ?, end_reason = 'device_revoked'
                      WHERE namespace = ? AND device_id = ? AND ended_at IS NULL`,
                params: [now, input.namespace, input.deviceId]
              },
              {
                sql: "UPDATE device_requests SET status = 'revoked' WHERE namespace = ? AND device_id = ? AND status = 'pending'",
                params: [input.namespace, input.deviceId]
              },
              endDeviceRegistrations(input.namespace, input.deviceId)
            ])
            // the device's sessions stop at once on this gateway (KeptReads.ts)
            kept.forget()
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Devices.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Audit.Test,
          Sessions.Test,
          KeptReads.Test
        )
      )
    )
  )
}
