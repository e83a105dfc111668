/**
 * One send message (spec 2.6: title, body, channel, priority, badge, sound, data, message_id) in
 * each provider's form. The routes decode the wire message; these only map fields.
 *
 * - APNs: `aps.alert {title, body}`, `aps.badge`, `aps.sound`, `aps.thread-id` = channel, the
 *   `data` keys beside `aps` (a `data.aps` key is dropped, never merged into Apple's dictionary);
 *   priority high → 10, normal → 5; `message_id` → `apns-collapse-id` when it fits 64 bytes.
 * - Expo: `title`, `body`, `data`, `sound`, `badge`, `channelId` = channel, priority as is.
 * - ntfy: `Title`, body, `Priority`, and the channel as the one tag (ntfy has no data field).
 */
import { APNS_MAX_COLLAPSE_ID_BYTES, type ApnsMessage } from "./ApnsClient.js"
import type { ExpoMessage } from "./ExpoClient.js"
import type { NtfyMessage } from "./NtfyClient.js"
import { stringifyExactJson } from "../../domain/ExactJson.js"

export interface OutgoingPush {
  readonly title: string
  readonly body: string
  readonly channel?: string
  readonly priority?: "high" | "normal"
  readonly badge?: number
  readonly sound?: string
  readonly data?: Readonly<Record<string, unknown>>
  readonly messageId?: string
}

/** The APNs JSON payload text; its byte length is what APNs' 4096-byte limit counts. */
export const apnsPayloadOf = (push: OutgoingPush): string => {
  const { aps: _dropped, ...data } = push.data ?? {}
  const aps: Record<string, unknown> = { alert: { title: push.title, body: push.body } }
  if (push.badge !== undefined) aps["badge"] = push.badge
  if (push.sound !== undefined) aps["sound"] = push.sound
  if (push.channel !== undefined) aps["thread-id"] = push.channel
  // a request's integers past 2^53 arrive as bigints (ExactJson.ts) and are sent with every digit
  return stringifyExactJson({ ...data, aps })
}

export const apnsMessageOf = (push: OutgoingPush, deviceToken: string, voip = false): ApnsMessage => {
  const base = { deviceToken, payload: apnsPayloadOf(push), voip, priority: push.priority === "normal" ? 5 : 10 } as const
  return push.messageId !== undefined && push.messageId !== "" && Buffer.byteLength(push.messageId) <= APNS_MAX_COLLAPSE_ID_BYTES
    ? { ...base, collapseId: push.messageId }
    : base
}

export const expoMessageOf = (push: OutgoingPush, to: string): ExpoMessage => ({
  to,
  title: push.title,
  body: push.body,
  ...(push.data === undefined ? {} : { data: push.data }),
  ...(push.sound === undefined ? {} : { sound: push.sound }),
  ...(push.badge === undefined ? {} : { badge: push.badge }),
  ...(push.channel === undefined ? {} : { channelId: push.channel }),
  priority: push.priority === "normal" ? "normal" : "high"
})

export const ntfyMessageOf = (push: OutgoingPush): NtfyMessage => ({
  title: push.title,
  body: push.body,
  priority: push.priority ?? "normal",
  ...(push.channel === undefined || push.channel === "" ? {} : { tags: [push.channel] })
})
