/**
 * The registry's push tables (spec §2.6, §3.3) behind named reads and writes, on either registry
 * engine: credentials sealed per namespace and slot, device registrations per user, and topics
 * that keep only their id, a sealed provider token and an expiry. Field checks are the domain's
 * (src/domain/PushCredentials.ts, src/domain/PushRegistrations.ts); what reaches here is valid.
 *
 * Sealing: AES-256-GCM under the Sealer's `push-credentials` key, bound as associated data to
 * `<namespace>/<slot>` for a credential and `<namespace>/topic/<topic id>` for a topic's token,
 * so a sealed value copied to another namespace, slot or topic does not open. A value that does
 * not open (a damaged row, another root secret) is a StoreError of reason `statement`.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import type { CredentialSlot, StoredPushSecret } from "../../domain/PushCredentials.js"
import type { DeviceProvider, DeviceRegistration, TopicProvider } from "../../domain/PushRegistrations.js"
import { topicExpiry } from "../../domain/PushRegistrations.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type KeysetSpec, type Page, type PageRequest, pageOf, pageStatement } from "../registry/Keyset.js"
import { RegistryStore, type RegistryStoreService, type Row, type Statement, StoreError } from "../registry/RegistryStore.js"
import { decodeRows } from "../registry/RegistryRows.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer, type SealerService } from "../secrets/Sealer.js"

/** A stored credential (or push config) with who last wrote it, opened. */
export interface CredentialRecord {
  readonly secret: StoredPushSecret
  readonly updatedAt: number
  readonly updatedBy: string
}

/** A device registration as stored; `token` in full (for sending; listings redact it). */
export interface DeviceRecord {
  readonly deviceId: string
  readonly bound: boolean
  readonly provider: DeviceProvider
  readonly token: string
  readonly platform: DeviceRegistration["platform"]
  readonly appVersion: string | undefined
  readonly createdAt: number
  readonly updatedAt: number
}

/** What a send needs of a registration: where it goes. */
export interface DeliveryTarget {
  readonly deviceId: string
  readonly provider: DeviceProvider
  readonly token: string
}

/** A live topic: where its notifications go, until when. */
export interface TopicRecord {
  readonly topicId: string
  readonly provider: TopicProvider
  readonly token: string
  readonly expiresAt: number
}

export interface PushStoreService {
  /** Stores (replaces) a slot's credential; answers the record as stored. */
  readonly putCredential: (namespace: string, secret: StoredPushSecret, by: string) => Effect.Effect<CredentialRecord, StoreError>
  readonly credential: (namespace: string, slot: CredentialSlot) => Effect.Effect<Option.Option<CredentialRecord>, StoreError>
  /** Removes a slot's credential; answers whether one was stored (the route is 200 either way). */
  readonly deleteCredential: (namespace: string, slot: CredentialSlot) => Effect.Effect<boolean, StoreError>
  /** The slots with a stored credential, in name order. */
  readonly configuredSlots: (namespace: string) => Effect.Effect<ReadonlyArray<CredentialSlot>, StoreError>

  /**
   * Records (or replaces) `subject`'s registration of `registration.device_id`. `bound`: the id is
   * a device-bound session's verified device id (the service puts it there, not the body's).
   */
  readonly registerDevice: (
    namespace: string,
    subject: string,
    registration: DeviceRegistration,
    bound: boolean
  ) => Effect.Effect<DeviceRecord, StoreError>
  /**
   * `registerDevice` within a cap: none, and nothing written, when `subject` already holds
   * `maxPerSubject` registrations and this device id is not one of them. The count and the write
   * are one statement, so concurrent registrations cannot pass the cap together.
   */
  readonly registerDeviceWithin: (
    namespace: string,
    subject: string,
    registration: DeviceRegistration,
    bound: boolean,
    maxPerSubject: number
  ) => Effect.Effect<Option.Option<DeviceRecord>, StoreError>
  /**
   * `subject`'s registrations, oldest first. Registrations of a bound device that has since been
   * revoked are deleted on the way and not answered (spec §4.6).
   */
  readonly devices: (namespace: string, subject: string) => Effect.Effect<ReadonlyArray<DeviceRecord>, StoreError>
  /**
   * One page of `devices` (key: created_at, device_id), for the listing route. A revoked device's
   * registrations are deleted and left out, so a page may hold fewer than `limit`; `next` still
   * says whether more follow.
   */
  readonly devicesPage: (namespace: string, subject: string, page: PageRequest) => Effect.Effect<Page<DeviceRecord>, StoreError>
  /**
   * What a send to `subject` goes to, in device-id order: only the columns a delivery needs and
   * no sort beyond the key's, since a user may hold 10,000 registrations. A revoked bound device's
   * registrations are deleted on the way and left out, as in `devices`.
   */
  readonly deliveryTargets: (namespace: string, subject: string) => Effect.Effect<ReadonlyArray<DeliveryTarget>, StoreError>
  /** Removes one registration; answers whether there was one. */
  readonly deleteDevice: (namespace: string, subject: string, deviceId: string) => Effect.Effect<boolean, StoreError>
  /**
   * Removes a registration the provider reported gone (APNs 410 / BadDeviceToken, Expo
   * DeviceNotRegistered), only while it still holds that token: a registration renewed meanwhile
   * stays.
   */
  readonly dropDeviceToken: (namespace: string, subject: string, deviceId: string, token: string) => Effect.Effect<boolean, StoreError>

  /**
   * Registers a topic (spec §3.3): a new one, or the same one again with its expiry moved forward
   * and its token replaced. Another topic of the namespace holding the same provider token is
   * removed in the same atomic batch.
   */
  readonly registerTopic: (
    namespace: string,
    topicId: string,
    provider: TopicProvider,
    token: string
  ) => Effect.Effect<{ readonly topicId: string; readonly expiresAt: number }, StoreError>
  /** The live topic; none when unknown, expired, or another namespace's. */
  readonly topic: (namespace: string, topicId: string) => Effect.Effect<Option.Option<TopicRecord>, StoreError>
  /** Removes a live topic; answers whether there was one (200 / 404). */
  readonly deleteTopic: (namespace: string, topicId: string) => Effect.Effect<boolean, StoreError>
}

/**
 * Device revocation (spec §3.1) ends that device's push registrations: a statement for the
 * revoking batch (src/layers/devices/Devices.ts).
 */
export const endDeviceRegistrations = (namespace: string, deviceId: string): Statement => ({
  sql: "DELETE FROM push_devices WHERE namespace = ? AND device_id = ? AND bound = 1",
  params: [namespace, deviceId]
})

const CredentialRow = Schema.Struct({
  provider: Schema.String,
  sealed: Schema.String,
  updated_at: Schema.Number,
  updated_by: Schema.String
})

const DeviceRow = Schema.Struct({
  device_id: Schema.String,
  bound: Schema.Number,
  provider: Schema.Literal("ios_push", "relay_push", "legacy_push"),
  token: Schema.String,
  platform: Schema.NullOr(Schema.Literal("ios", "android", "web")),
  app_version: Schema.NullOr(Schema.String),
  created_at: Schema.Number,
  updated_at: Schema.Number,
  device_status: Schema.NullOr(Schema.String)
})

/**
 * A delivery row, checked by hand: a send reads every device of a user at once (10,000 in
 * bench/push), and an array Schema decode of them allocated more than the rest of the send's
 * preparation together, all of it alive while the send runs.
 */
const targetRowOf = (row: Row): { readonly target: DeliveryTarget; readonly revoked: boolean } | undefined => {
  const { device_id, provider, token, device_status } = row
  if (typeof device_id !== "string" || typeof token !== "string") return undefined
  if (provider !== "ios_push" && provider !== "relay_push" && provider !== "legacy_push") return undefined
  if (device_status !== null && typeof device_status !== "string") return undefined
  return { target: { deviceId: device_id, provider, token }, revoked: device_status === "revoked" }
}

const TopicRow = Schema.Struct({ sealed_token: Schema.String, expires_at: Schema.Number })

/** What a topic's sealed token holds: the provider beside the token, so no column names it. */
const SealedTopic = Schema.parseJson(
  Schema.Struct({ provider: Schema.Literal("relay_push", "legacy_push", "ios_push", "ios_voip_push"), token: Schema.String })
)

const decodeCredentials = decodeRows("push credential", CredentialRow)
const decodeDevices = decodeRows("push device", DeviceRow)
const decodeTopics = decodeRows("push topic", TopicRow)

const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

const damaged = (what: string) => (e: { readonly detail?: string; readonly message?: string }) =>
  new StoreError({ reason: "statement", detail: `${what} does not open: ${e.detail ?? e.message ?? "unknown"}` })

const credentialOwner = (namespace: string, slot: CredentialSlot) => `${namespace}/${slot}`
const topicOwner = (namespace: string, topicId: string) => `${namespace}/topic/${topicId}`

export interface PushStoreOptions {
  /** Topic lifetime in seconds (spec §8: 7 days, the default). */
  readonly topicLifetimeSeconds?: number
}

export const makePushStore = (store: RegistryStoreService, sealer: SealerService, options: PushStoreOptions = {}): PushStoreService => {
  const lifetime = options.topicLifetimeSeconds

  const openCredential = (namespace: string, slot: CredentialSlot, sealed: string) =>
    sealer.open("push-credentials", credentialOwner(namespace, slot), sealed).pipe(
      Effect.mapError(damaged(`the ${slot} credential of ${namespace}`)),
      Effect.flatMap((bytes) =>
        Effect.try({
          try: () => JSON.parse(Buffer.from(bytes).toString("utf8")) as StoredPushSecret,
          catch: () => new StoreError({ reason: "statement", detail: `the ${slot} credential of ${namespace} is not JSON` })
        })
      ),
      Effect.filterOrFail(
        (secret) => secret.provider === slot,
        () => new StoreError({ reason: "statement", detail: `the ${slot} credential of ${namespace} names another slot` })
      )
    )

  const putCredential: PushStoreService["putCredential"] = (namespace, secret, by) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const sealed = sealer.seal("push-credentials", credentialOwner(namespace, secret.provider), Buffer.from(JSON.stringify(secret), "utf8"))
      yield* store.exec({
        sql: `INSERT INTO push_credentials (namespace, provider, sealed, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
              ON CONFLICT (namespace, provider) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
        params: [namespace, secret.provider, sealed, now, by]
      })
      return { secret, updatedAt: now, updatedBy: by }
    })

  const credential: PushStoreService["credential"] = (namespace, slot) =>
    Effect.gen(function* () {
      const rows = yield* decodeCredentials(
        yield* store.query({
          sql: "SELECT provider, sealed, updated_at, updated_by FROM push_credentials WHERE namespace = ? AND provider = ?",
          params: [namespace, slot]
        })
      )
      const row = rows[0]
      if (row === undefined) return Option.none()
      const secret = yield* openCredential(namespace, slot, row.sealed)
      return Option.some({ secret, updatedAt: row.updated_at, updatedBy: row.updated_by })
    })

  const deleteCredential: PushStoreService["deleteCredential"] = (namespace, slot) =>
    Effect.map(
      store.exec({ sql: "DELETE FROM push_credentials WHERE namespace = ? AND provider = ?", params: [namespace, slot] }),
      (result) => result.rowsAffected > 0
    )

  const configuredSlots: PushStoreService["configuredSlots"] = (namespace) =>
    Effect.map(
      store.query({ sql: "SELECT provider FROM push_credentials WHERE namespace = ? ORDER BY provider", params: [namespace] }),
      (rows) => rows.map((row) => String(row["provider"]) as CredentialSlot)
    )

  const toDevice = (row: typeof DeviceRow.Type): DeviceRecord => ({
    deviceId: row.device_id,
    bound: row.bound === 1,
    provider: row.provider,
    token: row.token,
    platform: row.platform ?? undefined,
    appVersion: row.app_version ?? undefined,
    createdAt: row.created_at,
    updatedAt: row.updated_at
  })

  /** Writes the registration (within `maxPerSubject` when given); answers it as stored, or none when the cap refused it. */
  const upsertDevice = (namespace: string, subject: string, registration: DeviceRegistration, bound: boolean, maxPerSubject?: number) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const values = [
        namespace,
        subject,
        registration.device_id,
        bound ? 1 : 0,
        registration.provider,
        registration.token,
        registration.platform ?? null,
        registration.app_version ?? null,
        now,
        now
      ]
      const onConflict = `ON CONFLICT (namespace, subject, device_id) DO UPDATE SET bound = excluded.bound, provider = excluded.provider,
                token = excluded.token, platform = excluded.platform, app_version = excluded.app_version, updated_at = excluded.updated_at`
      const written = yield* store.exec(
        maxPerSubject === undefined
          ? {
              sql: `INSERT INTO push_devices (namespace, subject, device_id, bound, provider, token, platform, app_version, created_at, updated_at)
              VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ${onConflict}`,
              params: values
            }
          : {
              // a held device id is always renewed; a new one only while the subject is under the cap
              // (the WHERE also keeps SQLite from reading ON CONFLICT as a join constraint)
              sql: `INSERT INTO push_devices (namespace, subject, device_id, bound, provider, token, platform, app_version, created_at, updated_at)
              SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
              WHERE EXISTS (SELECT 1 FROM push_devices WHERE namespace = ? AND subject = ? AND device_id = ?)
                 OR (SELECT COUNT(*) FROM push_devices WHERE namespace = ? AND subject = ?) < ? ${onConflict}`,
              params: [...values, namespace, subject, registration.device_id, namespace, subject, maxPerSubject]
            }
      )
      if (written.rowsAffected === 0) return Option.none<DeviceRecord>()
      const kept = (yield* devicesWithRevoked(namespace, subject, registration.device_id))[0]
      return kept === undefined
        ? yield* new StoreError({ reason: "statement", detail: "a registration just written is missing" })
        : Option.some(toDevice(kept))
    })

  const registerDevice: PushStoreService["registerDevice"] = (namespace, subject, registration, bound) =>
    Effect.flatMap(upsertDevice(namespace, subject, registration, bound), (kept) =>
      Option.match(kept, {
        onNone: () => Effect.fail(new StoreError({ reason: "statement", detail: "a registration was not written" })),
        onSome: Effect.succeed
      })
    )

  const registerDeviceWithin: PushStoreService["registerDeviceWithin"] = (namespace, subject, registration, bound, maxPerSubject) =>
    upsertDevice(namespace, subject, registration, bound, maxPerSubject)

  /** The subject's registrations (or the one of `deviceId`) with the status of a bound device. */
  const devicesWithRevoked = (namespace: string, subject: string, deviceId?: string) =>
    Effect.flatMap(
      store.query({
        sql: `SELECT p.device_id, p.bound, p.provider, p.token, p.platform, p.app_version, p.created_at, p.updated_at, d.status AS device_status
              FROM push_devices p LEFT JOIN devices d ON p.bound = 1 AND d.namespace = p.namespace AND d.id = p.device_id
              WHERE p.namespace = ? AND p.subject = ?${deviceId === undefined ? "" : " AND p.device_id = ?"} ORDER BY p.created_at, p.device_id`,
        params: deviceId === undefined ? [namespace, subject] : [namespace, subject, deviceId]
      }),
      decodeDevices
    )

  const devices: PushStoreService["devices"] = (namespace, subject) =>
    Effect.gen(function* () {
      const rows = yield* devicesWithRevoked(namespace, subject)
      const revoked = rows.filter((row) => row.device_status === "revoked")
      if (revoked.length > 0) yield* store.batch(revoked.map((row) => endDeviceRegistrations(namespace, row.device_id)))
      return rows.filter((row) => row.device_status !== "revoked").map(toDevice)
    })

  const deliveryTargets: PushStoreService["deliveryTargets"] = (namespace, subject) =>
    Effect.gen(function* () {
      const rows = yield* store.query({
        sql: `SELECT p.device_id, p.provider, p.token, d.status AS device_status
              FROM push_devices p LEFT JOIN devices d ON p.bound = 1 AND d.namespace = p.namespace AND d.id = p.device_id
              WHERE p.namespace = ? AND p.subject = ?`,
        params: [namespace, subject]
      })
      const targets: Array<DeliveryTarget> = []
      const revoked: Array<Statement> = []
      for (const row of rows) {
        const checked = targetRowOf(row)
        if (checked === undefined) return yield* new StoreError({ reason: "statement", detail: "a push delivery row is not of its shape" })
        if (checked.revoked) revoked.push(endDeviceRegistrations(namespace, checked.target.deviceId))
        else targets.push(checked.target)
      }
      if (revoked.length > 0) yield* store.batch(revoked)
      return targets
    })

  /** The registrations with their bound device's status, as one relation the keyset reads by unqualified names. */
  const devicesKeyset = (namespace: string, subject: string): KeysetSpec => ({
    select: `SELECT device_id, bound, provider, token, platform, app_version, created_at, updated_at, device_status FROM (
               SELECT p.namespace, p.subject, p.device_id, p.bound, p.provider, p.token, p.platform, p.app_version, p.created_at, p.updated_at,
                 d.status AS device_status
               FROM push_devices p LEFT JOIN devices d ON p.bound = 1 AND d.namespace = p.namespace AND d.id = p.device_id)`,
    where: ["namespace = ?", "subject = ?"],
    params: [namespace, subject],
    order: ["created_at", "device_id"],
    direction: "asc"
  })

  const devicesPage: PushStoreService["devicesPage"] = (namespace, subject, page) =>
    Effect.gen(function* () {
      const spec = devicesKeyset(namespace, subject)
      const read = pageOf(yield* store.query(pageStatement(spec, page)), spec, page, (row) => row)
      const rows = yield* decodeDevices(read.items)
      const revoked = rows.filter((row) => row.device_status === "revoked")
      if (revoked.length > 0) yield* store.batch(revoked.map((row) => endDeviceRegistrations(namespace, row.device_id)))
      return { items: rows.filter((row) => row.device_status !== "revoked").map(toDevice), next: read.next }
    })

  const deleteDevice: PushStoreService["deleteDevice"] = (namespace, subject, deviceId) =>
    Effect.map(
      store.exec({ sql: "DELETE FROM push_devices WHERE namespace = ? AND subject = ? AND device_id = ?", params: [namespace, subject, deviceId] }),
      (result) => result.rowsAffected > 0
    )

  const dropDeviceToken: PushStoreService["dropDeviceToken"] = (namespace, subject, deviceId, token) =>
    Effect.map(
      store.exec({
        sql: "DELETE FROM push_devices WHERE namespace = ? AND subject = ? AND device_id = ? AND token = ?",
        params: [namespace, subject, deviceId, token]
      }),
      (result) => result.rowsAffected > 0
    )

  const tokenHash = (namespace: string, provider: TopicProvider, token: string) =>
    sealer.hash("push-credentials", `topic-token\n${namespace}\n${provider}\n${token}`)

  const registerTopic: PushStoreService["registerTopic"] = (namespace, topicId, provider, token) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const expiresAt = topicExpiry(now, lifetime)
      const hash = tokenHash(namespace, provider, token)
      const sealed = sealer.seal("push-credentials", topicOwner(namespace, topicId), Buffer.from(JSON.stringify({ provider, token }), "utf8"))
      yield* store.batch([
        // expired topics of every namespace go first (by the expiry index), so none lingers
        { sql: "DELETE FROM push_topics WHERE expires_at <= ?", params: [now] },
        // one provider token belongs to one topic per namespace: another topic holding it is replaced
        { sql: "DELETE FROM push_topics WHERE namespace = ? AND token_hash = ? AND topic_id <> ?", params: [namespace, hash, topicId] },
        {
          sql: `INSERT INTO push_topics (namespace, topic_id, token_hash, sealed_token, expires_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (namespace, topic_id) DO UPDATE SET token_hash = excluded.token_hash, sealed_token = excluded.sealed_token,
                  expires_at = MAX(push_topics.expires_at, excluded.expires_at)`,
          params: [namespace, topicId, hash, sealed, expiresAt]
        }
      ])
      // The expiry never moves back (a gateway with a slower clock re-registering): read it.
      const rows = yield* decodeTopics(
        yield* store.query({ sql: "SELECT sealed_token, expires_at FROM push_topics WHERE namespace = ? AND topic_id = ?", params: [namespace, topicId] })
      )
      return { topicId, expiresAt: rows[0]?.expires_at ?? expiresAt }
    })

  const topic: PushStoreService["topic"] = (namespace, topicId) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const rows = yield* decodeTopics(
        yield* store.query({
          sql: "SELECT sealed_token, expires_at FROM push_topics WHERE namespace = ? AND topic_id = ? AND expires_at > ?",
          params: [namespace, topicId, now]
        })
      )
      const row = rows[0]
      if (row === undefined) return Option.none()
      const bytes = yield* Effect.mapError(sealer.open("push-credentials", topicOwner(namespace, topicId), row.sealed_token), damaged(`topic ${topicId}`))
      const opened = yield* Effect.mapError(
        Schema.decodeUnknown(SealedTopic)(Buffer.from(bytes).toString("utf8")),
        () => new StoreError({ reason: "statement", detail: `topic ${topicId} holds no provider token` })
      )
      return Option.some({ topicId, provider: opened.provider, token: opened.token, expiresAt: row.expires_at })
    })

  const deleteTopic: PushStoreService["deleteTopic"] = (namespace, topicId) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const result = yield* store.exec({
        sql: "DELETE FROM push_topics WHERE namespace = ? AND topic_id = ? AND expires_at > ?",
        params: [namespace, topicId, now]
      })
      return result.rowsAffected > 0
    })

  return {
    putCredential,
    credential,
    deleteCredential,
    configuredSlots,
    registerDevice,
    registerDeviceWithin,
    devices,
    devicesPage,
    deliveryTargets,
    deleteDevice,
    dropDeviceToken,
    registerTopic,
    topic,
    deleteTopic
  }
}

export class PushStore extends Context.Tag("portico/PushStore")<PushStore, PushStoreService>() {
  static readonly Live = Layer.effect(
    PushStore,
    Effect.gen(function* () {
      const settings = yield* PorticoConfig
      return makePushStore(yield* RegistryStore, yield* Sealer, { topicLifetimeSeconds: settings.pushTopicLifetimeSeconds })
    })
  )
  /** The store over the registry's and the sealer's test doubles, with the spec's topic lifetime. */
  static readonly Test = Layer.suspend(() =>
    PushStore.Live.pipe(Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, Sealer.Test, PorticoConfig.Test)))
  )
}
