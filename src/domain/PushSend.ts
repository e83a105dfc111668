/**
 * Sending push (spec §2.6, §4.6): the send message, the two send requests (by user, by topic)
 * and the per-device envelope both answer with. Pure: schemas and the rules that turn provider
 * outcomes into the envelope; delivery is src/layers/push/PushSender.ts. Client-safe: the route
 * group (src/api/groups/PushSendGroup.ts) uses these schemas as its wire shapes, and the function
 * host will decode its message JSON with the same ones.
 *
 * Decisions (docs/push.md, "Sending"):
 * - the filters are spec §2.6's `target_provider` and `exclude_provider`, each one provider or a
 *   list of them; a device is sent to when its provider is targeted (every provider when no
 *   target is named) and not excluded;
 * - the whole message, as JSON, is at most 16 KiB (spec §8, the function host's cap), on the HTTP
 *   routes too;
 * - `ok` is true when at least one device was delivered, or when no device was attempted (filters
 *   that exclude everything, a user with no registrations, providers whose credential is gone:
 *   spec §4.6 makes those no-ops, not failures); an unknown or expired topic is the one `ok: false`
 *   with nothing attempted.
 */
import { Schema } from "effect"
import { type PushProvider, pushProviders } from "./PushProviders.js"

/** Spec §8: a push message for the function host is at most 16 KiB; the HTTP routes keep the same cap. */
export const MAX_PUSH_MESSAGE_BYTES = 16 * 1024

const strict = <S extends Schema.Schema.Any>(schema: S): S => schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

const Provider = Schema.Literal(...pushProviders).annotations({ identifier: "PushProvider" })

/** One provider or a list of them (at most the four there are). */
const ProviderFilter = Schema.Union(Provider, Schema.Array(Provider).pipe(Schema.maxItems(pushProviders.length)))

const printable = (max: number, description: string) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^[\\x21-\\x7e]{1,${max}}$`), { message: () => `1-${max} printable characters without spaces` })
  ).annotations({ description })

/** Spec §2.6's send message: what every provider's form (src/layers/push/Messages.ts) is made from. */
const messageFields = {
  title: Schema.String.pipe(Schema.maxLength(1024)).annotations({ description: "the notification's title (APNs alert title, ntfy Title, Expo title)" }),
  body: Schema.String.pipe(Schema.maxLength(8192)).annotations({ description: "the notification's text" }),
  channel: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^[-_.:A-Za-z0-9]{1,64}$/, { message: () => "1-64 of [-_.:A-Za-z0-9]" })).annotations({
      description: "APNs thread-id, Expo channelId, the ntfy tag"
    })
  ),
  priority: Schema.optional(Schema.Literal("high", "normal")).annotations({ description: "default high" }),
  badge: Schema.optional(Schema.Int.pipe(Schema.between(0, 99_999))),
  sound: Schema.optional(printable(256, "a sound name, or default")),
  data: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
      description: "custom keys: beside aps for APNs (an aps key is dropped), Expo data; ntfy carries none"
    })
  ),
  message_id: Schema.optional(printable(256, "the sender's id for the message; APNs collapse id when it fits 64 bytes")),
  target_provider: Schema.optional(ProviderFilter).annotations({ description: "send only to devices of this provider (or these)" }),
  exclude_provider: Schema.optional(ProviderFilter).annotations({ description: "send to no device of this provider (or these)" })
}

/**
 * The message's size as JSON. A request's integers past 2^53 arrive as bigints (src/domain/ExactJson.ts),
 * which JSON.stringify refuses: each is measured as its digits (written as a string, less its quotes).
 */
const utf8 = new TextEncoder()
const jsonBytes = (message: unknown): number => {
  let bigints = 0
  const text = JSON.stringify(message, (_key, value: unknown) => {
    if (typeof value !== "bigint") return value
    bigints += 1
    return value.toString()
  })
  // TextEncoder, not node's Buffer: the typed client checks a send with this schema in a browser too (the console)
  return utf8.encode(text).byteLength - 2 * bigints
}

/** The whole message as JSON within the 16 KiB cap. */
const withinCap = <S extends Schema.Schema.Any>(self: S) =>
  self.pipe(
    Schema.filter((message) => jsonBytes(message) <= MAX_PUSH_MESSAGE_BYTES || `the message is over ${MAX_PUSH_MESSAGE_BYTES} bytes as JSON`)
  )

export const SendMessage = strict(Schema.Struct(messageFields)).pipe(withinCap).annotations({ identifier: "PushMessage" })
export type SendMessage = typeof SendMessage.Type

export const UserSendBody = strict(
  Schema.Struct({
    user_id: printable(512, "the user (session subject) whose registered devices are sent to, in the caller's namespace"),
    ...messageFields
  })
).pipe(withinCap).annotations({ identifier: "PushSend" })
export type UserSendBody = typeof UserSendBody.Type

export const TopicSendBody = strict(
  Schema.Struct({
    topic_id: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "topic_id: must be 64 lowercase hex characters" })).annotations({
      description: "the topic id: lowercase hex SHA-256 of the topic secret's bytes (400 otherwise)"
    }),
    ...messageFields
  })
).pipe(withinCap).annotations({ identifier: "PushTopicSend" })
export type TopicSendBody = typeof TopicSendBody.Type

/** The message fields of a send body (the user id or topic id taken out). */
export const messageOf = (body: UserSendBody | TopicSendBody): SendMessage => {
  const { user_id: _u, topic_id: _t, ...message } = body as UserSendBody & TopicSendBody
  return message
}

const asList = (filter: SendMessage["target_provider"]): ReadonlyArray<PushProvider> | undefined =>
  filter === undefined ? undefined : typeof filter === "string" ? [filter] : filter

/** Whether the message's filters let it go to a device of `provider`. */
export const providerSelected = (message: Pick<SendMessage, "target_provider" | "exclude_provider">, provider: PushProvider): boolean => {
  const target = asList(message.target_provider)
  const exclude = asList(message.exclude_provider)
  return (target === undefined || target.includes(provider)) && !(exclude?.includes(provider) ?? false)
}

/** A topic id as senders name it (spec §4.6): exactly 64 lowercase hex characters. */
export const isSendTopicId = (value: string): boolean => /^[0-9a-f]{64}$/.test(value)

// ---- the envelope (spec §2.6) ----

export const SendResult = Schema.Struct({
  device_id: Schema.optional(Schema.String).annotations({ description: "the registration's device id (absent for a topic)" }),
  provider: Schema.optional(Provider).annotations({ description: "absent only for TopicNotFound" }),
  status: Schema.Int.annotations({ description: "the provider's HTTP status for this device; 0 when no request was answered or made" }),
  reason: Schema.optional(Schema.String).annotations({
    description: "the provider's reason (APNs reason, Expo error, ntfy error) or ours: Timeout, ConnectionFailed, EgressRefused, NotConfigured, TopicNotFound, ..."
  }),
  unregistered: Schema.Boolean.annotations({ description: "the provider said the token is gone: the registration was deleted" })
}).annotations({ identifier: "PushSendResult" })
export type SendResult = typeof SendResult.Type

export const SendEnvelope = Schema.Struct({
  ok: Schema.Boolean.annotations({ description: "at least one device delivered, or none attempted (nothing to do is no failure); false for an unknown topic" }),
  devices_attempted: Schema.Int.annotations({ description: "devices a provider request was made for" }),
  results: Schema.Array(SendResult).annotations({
    description: "one per device sent to, plus one per device skipped because its provider has no credential (NotConfigured); filtered-out devices are not listed"
  })
}).annotations({ identifier: "PushSendEnvelope" })
export type SendEnvelope = typeof SendEnvelope.Type

/** Reasons of the send path itself (the clients' own are in src/layers/push/Delivery.ts). */
export const SendReasons = {
  /** The provider has no credential in the namespace (never stored, or deleted): a no-op. */
  notConfigured: "NotConfigured",
  topicNotFound: "TopicNotFound"
} as const

/** What one device's delivery came to, as the envelope needs it. */
export interface DeviceOutcome {
  readonly deviceId?: string | undefined
  readonly provider: PushProvider
  /** `skipped`: a no-op, no request made (its provider is not configured). */
  readonly outcome: "ok" | "unregistered" | "failed" | "skipped"
  readonly status: number
  readonly reason?: string | undefined
}

export const envelopeOf = (outcomes: ReadonlyArray<DeviceOutcome>): SendEnvelope => {
  let attempted = 0
  let delivered = 0
  // one shape for every result (an absent member is undefined, which JSON leaves out): a send to
  // 10,000 devices built spread objects of four shapes at about twice the cost
  const results = outcomes.map((o): SendResult => {
    if (o.outcome !== "skipped") attempted += 1
    if (o.outcome === "ok") delivered += 1
    return { device_id: o.deviceId, provider: o.provider, status: o.status, reason: o.reason, unregistered: o.outcome === "unregistered" }
  })
  return { ok: attempted === 0 || delivered > 0, devices_attempted: attempted, results }
}

/** Spec §4.6: an unknown or expired topic is no failure of the call, but nothing was sent. */
export const topicNotFoundEnvelope: SendEnvelope = {
  ok: false,
  devices_attempted: 0,
  results: [{ status: 404, reason: SendReasons.topicNotFound, unregistered: true }]
}

/** The reason a provider client gives an answer it could not read (Delivery.ts `Reasons.badAnswer`). */
export const UNREADABLE_ANSWER = "UnreadableAnswer"

/**
 * Whether a topic's one outcome is the provider refusing it (the topic send's 502): it answered
 * and said no (a 4xx, or an Expo ticket error under a 200), other than "this token is gone". A
 * timeout, a 5xx, no answer at all or an answer we cannot read (`UnreadableAnswer`: it may have
 * delivered) is a failure the envelope reports (200).
 */
export const providerRefused = (o: DeviceOutcome): boolean =>
  o.outcome === "failed" && o.status >= 200 && o.status < 500 && o.reason !== UNREADABLE_ANSWER
