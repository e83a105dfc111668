/**
 * The platform relay's node-to-node call, `POST /v1/internal/push/ntfy/<topic>` (spec §4.6, §4.10):
 * ntfy's publish form, the message as a text body and only `Title`, `Priority` and `Tags` as
 * headers. Both ends build what the coordination MAC covers from here, so the sender, the
 * PeerGate and the route agree on it.
 *
 * What is signed: the coordination MAC v2 of every internal route (Coordination.ts), over the
 * request's own path (the topic is in it) and, as its body, the canonical JSON of
 * `{message, priority, tags, title}` with each header's value as sent (absent headers left out).
 * The other internal routes sign their JSON body as sent; this route's body is text and three of
 * its headers are relayed too, so those are what it signs. A header the MAC does not cover is
 * never relayed.
 */
import { PushRelayGroup } from "../../api/groups/PushRelayGroup.js"
import { canonicalJson } from "../coordination/Coordination.js"
import { headerValue, type NtfyMessage } from "./NtfyClient.js"

/** The relay route's path up to its topic, as its group declares it (`/v1/internal/push/ntfy/`). */
const relayPrefix = (): string => {
  const route = Object.values(PushRelayGroup.endpoints).find((e) => e.name === "relay")
  if (route === undefined) throw new Error("the push relay group has no relay endpoint")
  return route.path.replace(/:topic$/, "")
}

export const RELAY_CALL_PREFIX = relayPrefix()

/**
 * The largest message a relay call carries, in UTF-8 bytes: ntfy's default `message-size-limit`.
 * A longer body is one a default ntfy server takes only as an attachment (and refuses with 400
 * where attachments are off), so the route's body cap is this (413 at the listener) and the
 * sender does not post a longer one to a peer.
 */
export const RELAY_MESSAGE_MAX_BYTES = 4096

/** The path a relay call for `topic` is posted to and signed over. */
export const relayCallPath = (topic: string): string => RELAY_CALL_PREFIX + topic

/** Whether `path` (without its query) is a relay call's. */
export const isRelayCallPath = (path: string): boolean => path.startsWith(RELAY_CALL_PREFIX)

/** The three headers a relay call carries, as sent (lower-case names, as node reads them). */
export interface RelayedHeaders {
  readonly title?: string | undefined
  readonly priority?: string | undefined
  readonly tags?: string | undefined
}

const RELAYED = ["title", "priority", "tags"] as const

/** The relayed headers of a request; every other header is dropped here. */
export const relayedHeadersOf = (headers: Readonly<Record<string, string | undefined>>): RelayedHeaders => {
  const picked: Record<string, string> = {}
  for (const name of RELAYED) {
    const value = headers[name]
    if (value !== undefined) picked[name] = value
  }
  return picked
}

/** What the MAC of a relay call covers as its body. */
export const relaySignedBody = (message: string, relayed: RelayedHeaders): string =>
  canonicalJson({ message, title: relayed.title, priority: relayed.priority, tags: relayed.tags })

/**
 * The body a node sends and signs for `message`: the text as its UTF-8 bytes read back, so a lone
 * surrogate (which the wire carries as U+FFFD) is signed as the receiver will read it.
 */
export const relayBodyOf = (message: NtfyMessage): string => Buffer.from(message.body, "utf8").toString("utf8")

/**
 * The headers a node sends for `message`, as the ntfy client would publish them: non-ASCII as
 * RFC 2047 encoded words, our `normal` priority as ntfy's `default`. Values are trimmed first:
 * fetch strips a header value's surrounding blanks on the way out, and the MAC must cover what
 * the receiver reads.
 */
export const relayHeadersFor = (message: NtfyMessage): RelayedHeaders => {
  const title = message.title?.trim()
  const tags = message.tags?.map((tag) => tag.trim()).filter((tag) => tag !== "").join(",")
  return {
    ...(title !== undefined && title !== "" ? { title: headerValue(title) } : {}),
    ...(message.priority !== undefined ? { priority: message.priority === "high" ? "high" : "default" } : {}),
    ...(tags !== undefined && tags !== "" ? { tags: headerValue(tags) } : {})
  }
}

/**
 * The message a receiving node publishes: the values as received, which the ntfy client sends on
 * unchanged (printable ASCII, so an encoded word stays as it came; a tag list splits and joins
 * back to the same text).
 */
export const messageOfRelay = (body: string, relayed: RelayedHeaders): NtfyMessage => ({
  body,
  ...(relayed.title !== undefined ? { title: relayed.title } : {}),
  ...(relayed.priority !== undefined ? { priority: relayed.priority === "high" ? "high" : "normal" } : {}),
  ...(relayed.tags !== undefined ? { tags: relayed.tags.split(",") } : {})
})
