/**
 * A stand-in for Apple's APNs provider API: HTTP/2 over TLS on 127.0.0.1 (certificate from
 * testCa.ts, so clients trust it through NODE_EXTRA_CA_CERTS or a `ca` option). It checks what
 * APNs checks and answers with APNs' status codes and reason strings:
 *
 * - `POST /3/device/<hex token>` (405 `MethodNotAllowed`, 404 `BadPath`);
 * - `authorization: bearer <ES256 JWT>` verified against the public key of a registered p8 key
 *   (header `kid`, claim `iss` = team id, `iat` at most an hour old): 403 `MissingProviderToken`,
 *   `InvalidProviderToken`, `ExpiredProviderToken`; a team key whose token changes within 20
 *   minutes of the last change gets 429 `TooManyProviderTokenUpdates`;
 * - `apns-topic` (the key's bundle id, `.voip` only with `apns-push-type: voip`), `apns-push-type`,
 *   `apns-priority`, `apns-expiration`, `apns-collapse-id` (64 bytes);
 * - payload: empty 400 `PayloadEmpty`, over 4096 bytes (5120 for VoIP) 413 `PayloadTooLarge`;
 * - tokens the test marks: 410 `Unregistered` with `timestamp`, 400 `BadDeviceToken`, a stall
 *   (never answers) or any status and reason.
 *
 * 200 answers carry `apns-id` (the request's, else a new UUID). It records every accepted request
 * and every distinct provider token it saw.
 */
import { decodeProtectedHeader, jwtVerify } from "jose"
import * as crypto from "node:crypto"
import * as http2 from "node:http2"
import { testCa } from "./testCa.js"
import { listenOnLoopback } from "./process.js"

export interface ApnsKey {
  readonly teamId: string
  readonly keyId: string
  readonly bundleId: string
  /** PKCS#8 PEM of the P-256 private key; the stand-in keeps only its public key. */
  readonly p8Key: string
}

export interface ApnsReceived {
  readonly token: string
  readonly topic: string
  readonly pushType: string
  readonly priority: string | undefined
  readonly expiration: string | undefined
  readonly collapseId: string | undefined
  readonly apnsId: string
  readonly payload: string
}

export interface ApnsStandIn {
  /** `https://127.0.0.1:<port>` */
  readonly url: string
  readonly caFile: string
  readonly caPem: string
  readonly addKey: (key: ApnsKey) => void
  readonly markUnregistered: (token: string, timestampMs?: number) => void
  readonly markBad: (token: string) => void
  /** The request is read and never answered (a timeout for the client). */
  readonly stall: (token: string) => void
  /** Answer this token with `status` and `{reason}` (e.g. 500 `InternalServerError`). */
  readonly answer: (token: string, status: number, reason: string) => void
  readonly received: Array<ApnsReceived>
  /** Every distinct provider token presented, valid or not. */
  readonly jwtsSeen: () => number
  /** TLS connections accepted. */
  readonly connections: () => number
  /**
   * From now on, each connection is closed gracefully (GOAWAY) once it has taken `streams`
   * streams, as APNs rotates connections: streams the client opened after that are refused.
   */
  readonly goAwayAfter: (streams: number | undefined) => void
  /** Connections open now. */
  readonly openConnections: () => number
  /** Ends every open connection (GOAWAY, then close), as APNs does to idle or old connections. */
  readonly dropConnections: () => Promise<void>
  readonly stop: () => Promise<void>
}

export interface ApnsStandInOptions {
  /** Milliseconds since the epoch, for `iat` checks and the 20-minute update rule. */
  readonly now?: () => number
}

/** A fresh P-256 key in Apple's `.p8` form (PKCS#8 PEM). */
export const makeP8Key = (): string =>
  crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()

const PUSH_TYPES = new Set(["alert", "background", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "location", "controls", "widgets"])

type Verdict = { readonly ok: true; readonly keyId: string; readonly iat: number } | { readonly ok: false; readonly reason: string }

export const startApnsStandIn = async (options: ApnsStandInOptions = {}): Promise<ApnsStandIn> => {
  const ca = testCa()
  const now = options.now ?? Date.now
  const keys = new Map<string, { key: ApnsKey; publicKey: crypto.KeyObject; currentJwt?: string; changedAt?: number }>()
  const verdicts = new Map<string, Promise<Verdict>>()
  const marks = new Map<string, { status: number; reason: string; timestamp?: number } | "stall">()
  const received: Array<ApnsReceived> = []
  const sessions = new Set<http2.ServerHttp2Session>()
  let connections = 0
  let goAwayAfter: number | undefined
  const streamsOf = new WeakMap<http2.Http2Session, number>()

  const verify = (jwt: string): Promise<Verdict> => {
    const known = verdicts.get(jwt)
    if (known !== undefined) return known
    const verdict = (async (): Promise<Verdict> => {
      try {
        const header = decodeProtectedHeader(jwt)
        const entry = header.kid === undefined ? undefined : keys.get(header.kid)
        if (header.alg !== "ES256" || entry === undefined) return { ok: false, reason: "InvalidProviderToken" }
        const { payload } = await jwtVerify(jwt, entry.publicKey, { algorithms: ["ES256"] })
        if (payload.iss !== entry.key.teamId || typeof payload.iat !== "number") return { ok: false, reason: "InvalidProviderToken" }
        return { ok: true, keyId: entry.key.keyId, iat: payload.iat }
      } catch {
        return { ok: false, reason: "InvalidProviderToken" }
      }
    })()
    verdicts.set(jwt, verdict)
    return verdict
  }

  const server = http2.createSecureServer({ key: ca.keyPem, cert: ca.certPem, settings: { maxConcurrentStreams: 1000 } })
  server.on("session", (session) => {
    connections += 1
    sessions.add(session)
    session.on("close", () => sessions.delete(session))
    session.on("error", () => undefined)
  })
  server.on("stream", (stream, headers) => {
    stream.on("error", () => undefined)
    const session = stream.session
    if (session !== undefined && goAwayAfter !== undefined) {
      const taken = (streamsOf.get(session) ?? 0) + 1
      streamsOf.set(session, taken)
      if (taken === goAwayAfter) session.close()
    }
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.on("end", () => {
      void handle(stream, headers, Buffer.concat(chunks).toString("utf8"))
    })
  })

  const reply = (stream: http2.ServerHttp2Stream, status: number, apnsId: string, reason?: string, timestamp?: number) => {
    if (stream.destroyed || stream.closed) return
    stream.respond({ ":status": status, "apns-id": apnsId, ...(reason === undefined ? {} : { "content-type": "application/json" }) })
    stream.end(reason === undefined ? undefined : JSON.stringify(timestamp === undefined ? { reason } : { reason, timestamp }))
  }

  const handle = async (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, payload: string) => {
    const requestId = headers["apns-id"]
    const apnsId = typeof requestId === "string" ? requestId : crypto.randomUUID()
    if (headers[":method"] !== "POST") return reply(stream, 405, apnsId, "MethodNotAllowed")
    const match = /^\/3\/device\/([^/?]+)$/.exec(String(headers[":path"] ?? ""))
    if (match === null) return reply(stream, 404, apnsId, "BadPath")
    const token = match[1] ?? ""
    const authorization = headers["authorization"]
    if (typeof authorization !== "string" || !authorization.startsWith("bearer ")) return reply(stream, 403, apnsId, "MissingProviderToken")
    const jwt = authorization.slice("bearer ".length)
    const verdict = await verify(jwt)
    if (!verdict.ok) return reply(stream, 403, apnsId, verdict.reason)
    const entry = keys.get(verdict.keyId)
    if (entry === undefined) return reply(stream, 403, apnsId, "InvalidProviderToken")
    const at = now()
    if (at / 1000 - verdict.iat > 3600) return reply(stream, 403, apnsId, "ExpiredProviderToken")
    if (entry.currentJwt !== jwt) {
      // A token replaced within 20 minutes of the last replacement is churn.
      if (entry.changedAt !== undefined && at - entry.changedAt < 20 * 60_000) return reply(stream, 429, apnsId, "TooManyProviderTokenUpdates")
      entry.currentJwt = jwt
      entry.changedAt = at
    }
    const topic = headers["apns-topic"]
    const pushType = headers["apns-push-type"]
    if (typeof topic !== "string") return reply(stream, 400, apnsId, "MissingTopic")
    if (typeof pushType !== "string" || !PUSH_TYPES.has(pushType)) return reply(stream, 400, apnsId, "InvalidPushType")
    const voip = pushType === "voip"
    if (topic !== entry.key.bundleId + (voip ? ".voip" : "")) return reply(stream, 400, apnsId, voip ? "InvalidPushType" : "BadTopic")
    const priority = headers["apns-priority"]
    if (priority !== undefined && !["10", "5", "1"].includes(String(priority))) return reply(stream, 400, apnsId, "BadPriority")
    const expiration = headers["apns-expiration"]
    if (expiration !== undefined && !/^\d+$/.test(String(expiration))) return reply(stream, 400, apnsId, "BadExpirationDate")
    const collapseId = headers["apns-collapse-id"]
    if (typeof collapseId === "string" && Buffer.byteLength(collapseId) > 64) return reply(stream, 400, apnsId, "BadCollapseId")
    if (payload.length === 0) return reply(stream, 400, apnsId, "PayloadEmpty")
    if (Buffer.byteLength(payload) > (voip ? 5120 : 4096)) return reply(stream, 413, apnsId, "PayloadTooLarge")
    if (!/^[0-9a-fA-F]+$/.test(token)) return reply(stream, 400, apnsId, "BadDeviceToken")
    const mark = marks.get(token.toLowerCase())
    if (mark === "stall") return
    if (mark !== undefined) return reply(stream, mark.status, apnsId, mark.reason, mark.timestamp)
    received.push({
      token, topic, pushType, apnsId, payload,
      priority: priority === undefined ? undefined : String(priority),
      expiration: expiration === undefined ? undefined : String(expiration),
      collapseId: typeof collapseId === "string" ? collapseId : undefined
    })
    reply(stream, 200, apnsId)
  }

  const port = await listenOnLoopback(server)

  return {
    url: `https://127.0.0.1:${port}`,
    caFile: ca.caFile,
    caPem: ca.caPem,
    addKey: (key) => {
      keys.set(key.keyId, { key, publicKey: crypto.createPublicKey(crypto.createPrivateKey(key.p8Key)) })
    },
    markUnregistered: (token, timestampMs) => marks.set(token.toLowerCase(), { status: 410, reason: "Unregistered", timestamp: timestampMs ?? now() }),
    markBad: (token) => marks.set(token.toLowerCase(), { status: 400, reason: "BadDeviceToken" }),
    stall: (token) => marks.set(token.toLowerCase(), "stall"),
    answer: (token, status, reason) => marks.set(token.toLowerCase(), { status, reason }),
    received,
    jwtsSeen: () => verdicts.size,
    connections: () => connections,
    goAwayAfter: (streams) => {
      goAwayAfter = streams
    },
    openConnections: () => sessions.size,
    dropConnections: async () => {
      await Promise.all([...sessions].map((session) => new Promise<void>((resolve) => session.close(() => resolve()))))
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const session of sessions) session.destroy()
        server.close(() => resolve())
      })
  }
}
