/**
 * What the gateway and its node's media server (engines/sfu) sign for each other (docs/webrtc.md,
 * "The media server"):
 *
 * - A **join ticket**: who joins which room, for 30 s, sealed with AES-256-GCM under the node's
 *   SFU key, for a client that opens the media server's `/signal?ticket=` itself (the gateway
 *   passes its own joins on its channel, MediaChannel.ts). Sealed rather than signed because it
 *   carries the namespace's event key, which the client holding the ticket must not read.
 * - The **event key**: HMAC-SHA256 of a fixed label under the namespace's relay secret. The media
 *   server MACs each participant event with it, so an event is authenticated by a key only the
 *   namespace's relay secret makes (spec §6.4) and the relay secret itself never leaves the gateway.
 */
import { createCipheriv, createDecipheriv, createHmac, type KeyObject, randomBytes, timingSafeEqual } from "node:crypto"

const TICKET_AAD = Buffer.from("portico-sfu-ticket-v1")
const EVENT_KEY_LABEL = "portico-webrtc-events-v1"

/** How long a join ticket lasts: from the gateway's handshake to the media server's, on one node. */
export const TICKET_SECONDS = 30

export interface JoinTicket {
  readonly ns: string
  readonly room: string
  readonly user: string
  readonly device: string
  readonly peer: string
  /** Unix seconds. */
  readonly exp: number
  readonly muted: boolean
  /** The namespace's event key, hex. */
  readonly ek: string
}

/** The key a namespace's participant events are MAC'd with, from its relay secret. */
export const eventKeyOf = (relaySecret: Uint8Array): Buffer => createHmac("sha256", relaySecret).update(EVENT_KEY_LABEL).digest()

/** `v1.` + base64url(nonce || AES-256-GCM(ticket JSON) || tag). */
export const sealTicket = (key: Uint8Array, ticket: JoinTicket): string => {
  const nonce = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", key, nonce)
  cipher.setAAD(TICKET_AAD)
  const sealed = Buffer.concat([nonce, cipher.update(JSON.stringify(ticket), "utf8"), cipher.final(), cipher.getAuthTag()])
  return `v1.${sealed.toString("base64url")}`
}

/** The ticket `sealTicket` made under `key`, or undefined (the media server's check, for tests and tools). */
export const openTicket = (key: Uint8Array, text: string): JoinTicket | undefined => {
  if (!text.startsWith("v1.")) return undefined
  const raw = Buffer.from(text.slice(3), "base64url")
  if (raw.length < 12 + 16) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
    decipher.setAAD(TICKET_AAD)
    decipher.setAuthTag(raw.subarray(raw.length - 16))
    const plain = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()])
    return JSON.parse(plain.toString("utf8")) as JoinTicket
  } catch {
    return undefined
  }
}

/** The event MAC the media server sends (`X-Portico-Webrtc-Mac`): hex HMAC-SHA256 of the raw body. */
const eventMacBytes = (eventKey: Uint8Array | KeyObject, body: Uint8Array | string): Buffer => createHmac("sha256", eventKey).update(body).digest()
export const eventMac = (eventKey: Uint8Array | KeyObject, body: Uint8Array | string): string => eventMacBytes(eventKey, body).toString("hex")

/** Whether `given` is the event MAC of `body` under `eventKey`, compared in constant time. */
export const eventMacHolds = (eventKey: Uint8Array | KeyObject, body: Uint8Array | string, given: string | undefined): boolean => {
  if (given === undefined || !/^[0-9a-f]{64}$/.test(given)) return false
  return timingSafeEqual(eventMacBytes(eventKey, body), Buffer.from(given, "hex"))
}

/**
 * The node that hosts a room: rendezvous hashing of (namespace, room, node) over the nodes whose
 * media server answers, so every gateway that sees the same healthy nodes picks the same one, and a
 * node's loss moves only its own rooms.
 */
export const placeRoom = (namespace: string, room: string, nodes: ReadonlyArray<string>): string | undefined => {
  // one node up (a single machine, or all but one down): nothing to rank
  if (nodes.length <= 1) return nodes[0]
  let best: string | undefined
  let bestScore = ""
  for (const node of nodes) {
    const score = createHmac("sha256", "portico-room-placement").update(`${namespace}\u0000${room}\u0000${node}`).digest("hex")
    if (best === undefined || score > bestScore) {
      best = node
      bestScore = score
    }
  }
  return best
}

/** A room's name as a client gives it: 1-64 of [A-Za-z0-9_-.]. */
export const ROOM_NAME = /^[A-Za-z0-9_.-]{1,64}$/
