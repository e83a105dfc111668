/**
 * The JSON calls between nodes, on `node:http` with connections kept alive: a node-local
 * database's forward is one such call per client request, and `fetch` (undici) costs several
 * times a plain request's CPU on that path (bench/cluster, the forward hop). Streams and files
 * stay on `fetch` (Coordination.ts), where the bytes, not the call, dominate. A vault share goes
 * as bytes both ways (`postBytes`): it is held whole, and its call is one per node per push or pull.
 */
import * as http from "node:http"
import * as https from "node:https"

/** Connections to peers, reused across calls; idle ones close after 30 s. */
const agents = {
  http: new http.Agent({ keepAlive: true, keepAliveMsecs: 1_000, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 }),
  https: new https.Agent({ keepAlive: true, keepAliveMsecs: 1_000, maxSockets: 64, maxFreeSockets: 16, timeout: 30_000 })
}

/** The most bytes of a peer's JSON answer read: more is a broken peer, not an answer. */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024

export interface PeerTextAnswer {
  readonly status: number
  readonly text: string
  readonly retryAfter: string | undefined
}

/** A peer's answer kept as bytes, with its headers: for a route that answers bytes (a vault share). */
export interface PeerBytesAnswer {
  readonly status: number
  readonly bytes: Buffer
  readonly headers: http.IncomingHttpHeaders
}

/** POSTs `body` to `url`; the answer's status, bytes and headers. Rejects on a transport failure or `signal`. */
export const postBytes = (url: string, headers: Record<string, string>, body: string | Uint8Array, signal: AbortSignal): Promise<PeerBytesAnswer> =>
  new Promise((resolve, reject) => {
    const target = new URL(url)
    const secure = target.protocol === "https:"
    const request = (secure ? https : http).request(
      target,
      {
        method: "POST",
        agent: secure ? agents.https : agents.http,
        headers: { ...headers, "content-length": String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength) },
        signal
      },
      (response) => {
        const chunks: Array<Buffer> = []
        let size = 0
        response.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_ANSWER_BYTES) response.destroy(new Error(`the peer answered over ${MAX_ANSWER_BYTES} bytes`))
          else chunks.push(chunk)
        })
        response.on("error", reject)
        response.on("end", () => resolve({ status: response.statusCode ?? 0, bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), headers: response.headers }))
      }
    )
    request.on("error", reject)
    request.end(body)
  })

/** POSTs `body` to `url`; the answer's status, text and Retry-After. Rejects on a transport failure or `signal`. */
export const postText = (url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<PeerTextAnswer> =>
  postBytes(url, headers, body, signal).then((answer) => {
    const retryAfter = answer.headers["retry-after"]
    return { status: answer.status, text: answer.bytes.toString("utf8"), retryAfter: typeof retryAfter === "string" ? retryAfter : undefined }
  })
