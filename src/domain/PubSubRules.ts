/**
 * Publish/subscribe's pure rules (docs/pubsub.md): what a topic may be called, the platform's
 * reserved prefix, grants narrowed to topics, a message's payload and a resume position. Both
 * engines, the routes and the socket share them.
 */
import { matchesKeyPattern } from "./Grants.js"
import type { Principal } from "./Principal.js"
import { PLATFORM_PREFIX } from "./Names.js"

/** Topic names: 1-256 characters of letters, digits and `. _ ~ : / @ + = -` (no `*`, `,` or space). */
export const TOPIC_MAX = 256
export const TOPIC_SHAPE = /^[A-Za-z0-9._~:/@+=-]{1,256}$/
export const TOPIC_RULE = "1-256 characters of letters, digits and . _ ~ : / @ + = -"

/** The platform's own topics (membership events of media rooms, ...): tenants may read, never publish. */
export const RESERVED_PREFIX = PLATFORM_PREFIX

export const isTopic = (text: string): boolean => TOPIC_SHAPE.test(text)

export const isReserved = (topic: string): boolean => topic.startsWith(RESERVED_PREFIX)

/** Whether the caller's `pubsub` grants reach `topic` (a grant narrowed by `pubsub:topic=<glob>` or whole). */
export const reachesTopic = (caller: Principal, topic: string): boolean => {
  for (const g of caller.grants) {
    if (g.name === "pubsub" && (g.pattern === undefined || matchesKeyPattern(g.pattern, topic))) return true
  }
  return false
}

/**
 * A message's payload: standard base64 with padding, as `data_base64` carries it. Canonical only
 * (a string that decodes and encodes back to itself), so a message has one spelling and its size
 * is known from its length. Answers the decoded byte count, or undefined when not canonical.
 */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
export const base64Bytes = (text: string): number | undefined => {
  if (!BASE64.test(text)) return undefined
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0
  // the unused low bits of the last character must be zero, else two texts decode alike
  if (padding > 0) {
    const last = text.charCodeAt(text.length - padding - 1)
    const value = last >= 65 && last <= 90 ? last - 65 : last >= 97 && last <= 122 ? last - 71 : last >= 48 && last <= 57 ? last + 4 : last === 43 ? 62 : 63
    if ((value & (padding === 2 ? 0x0f : 0x03)) !== 0) return undefined
  }
  return (text.length / 4) * 3 - padding
}

/**
 * Where a reconnecting subscriber stood on a topic: the epoch and the offset of the last message it
 * saw, as every frame names them. `since=<topic>,<epoch>,<offset>` on the socket's query.
 */
export interface ResumePoint {
  readonly topic: string
  readonly epoch: string
  readonly offset: number
}

const EPOCH_SHAPE = /^[A-Za-z0-9_-]{1,64}$/

/** Parses one `since` value; undefined when malformed. */
export const parseResumePoint = (text: string): ResumePoint | undefined => {
  const parts = text.split(",")
  if (parts.length !== 3) return undefined
  const [topic, epoch, offset] = parts as [string, string, string]
  if (!isTopic(topic) || !EPOCH_SHAPE.test(epoch) || !/^(0|[1-9][0-9]{0,15})$/.test(offset)) return undefined
  const n = Number(offset)
  return Number.isSafeInteger(n) ? { topic, epoch, offset: n } : undefined
}

/** A presence member's metadata: a JSON object of at most this many bytes of text. */
export const MEMBER_META_MAX = 1024
/** A presence member's id: what the client calls itself on the topic (default: its subject). */
export const MEMBER_ID_SHAPE = /^[^\s\p{Cc}\p{Cs}]{1,128}$/u

/** The metadata's JSON text when it is a JSON object within the bound; undefined otherwise. */
export const parseMemberMeta = (text: string): string | undefined => {
  if (Buffer.byteLength(text) > MEMBER_META_MAX) return undefined
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? JSON.stringify(value) : undefined
  } catch {
    return undefined
  }
}
