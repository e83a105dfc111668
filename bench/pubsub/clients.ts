/**
 * The clients of bench/pubsub, one process for both sides (so the client's own cost is the same):
 * WebSocket subscribers and one publisher over keep-alive HTTP, driven by JSON lines on stdin,
 * each answered by one JSON line on stdout.
 *
 * - `{"cmd":"open","url","query","count","token"}`: opens `count` subscribers, answers once each
 *   has its `subscribed` frame.
 * - `{"cmd":"run","url","path","topic","messages","inFlight","token"}`: publishes `messages` of 256
 *   bytes (the send time and the sequence number in their first 16 bytes), `inFlight` requests at
 *   a time on as many keep-alive connections, until every subscriber has every message; answers
 *   the milliseconds from the first publish to the last delivery and publish-to-receive latency
 *   percentiles (every 8th message at every subscriber, decoded from the frame).
 * - `{"cmd":"close"}`: closes the subscribers.
 */
import * as http from "node:http"
import * as readline from "node:readline"
import { WebSocket } from "ws"

const PAYLOAD = 256
let sockets: Array<WebSocket> = []
let expected = 0
let delivered = 0
let onDelivered: (() => void) | undefined
let latencies: Array<number> = []

const dataAt = (frame: string) => {
  const at = frame.indexOf('"data":"')
  return at < 0 ? undefined : frame.slice(at + 8, frame.indexOf('"', at + 8))
}

const onFrame = (raw: Buffer) => {
  const frame = raw.toString("latin1")
  if (!frame.includes('"type":"message"')) return
  delivered++
  const data = dataAt(frame)
  if (data !== undefined) {
    // 16 bytes are the first 24 characters of the base64
    const head = Buffer.from(data.slice(0, 24), "base64")
    if (head.readUInt32LE(8) % 8 === 0) latencies.push(performance.now() - head.readDoubleLE(0))
  }
  if (delivered >= expected) onDelivered?.()
}

const open = async (url: string, query: string, count: number, token: string | undefined) => {
  const opened = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(`${url.replace(/^http/, "ws")}${query}`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, perMessageDeflate: false })
          ws.once("message", () => {
            ws.on("message", onFrame)
            resolve(ws)
          })
          ws.once("error", reject)
          ws.once("unexpected-response", (_q, res) => reject(new Error(`handshake answered ${res.statusCode}`)))
        })
    )
  )
  sockets.push(...opened)
  return { open: sockets.length }
}

const run = async (command: { url: string; path: string; topic: string; messages: number; inFlight: number; token?: string }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: command.inFlight })
  const target = new URL(command.path, command.url)
  const headers = { "content-type": "application/json", ...(command.token === undefined ? {} : { authorization: `Bearer ${command.token}` }) }
  expected = delivered + command.messages * sockets.length
  latencies = []
  const all = new Promise<void>((resolve) => (onDelivered = resolve))
  const payload = Buffer.alloc(PAYLOAD, 7)
  let next = 0
  const started = performance.now()
  const publishOne = (n: number) =>
    new Promise<void>((resolve, reject) => {
      payload.writeDoubleLE(performance.now(), 0)
      payload.writeUInt32LE(n, 8)
      const body = JSON.stringify({ topic: command.topic, data_base64: payload.toString("base64") })
      const req = http.request(target, { method: "POST", agent, headers: { ...headers, "content-length": Buffer.byteLength(body) } }, (res) => {
        res.resume()
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`publish answered ${res.statusCode}`))))
      })
      req.on("error", reject)
      req.end(body)
    })
  const worker = async () => {
    while (next < command.messages) await publishOne(next++)
  }
  await Promise.all(Array.from({ length: command.inFlight }, worker))
  await all
  const ms = performance.now() - started
  agent.destroy()
  const sorted = [...latencies].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
  return { ms, delivered: command.messages * sockets.length, p50: at(0.5), p99: at(0.99) }
}

const lines = readline.createInterface({ input: process.stdin })
lines.on("line", (line) => {
  const command = JSON.parse(line) as { cmd: string } & Record<string, unknown>
  const answer =
    command.cmd === "open"
      ? open(String(command["url"]), String(command["query"]), Number(command["count"]), command["token"] as string | undefined)
      : command.cmd === "run"
        ? run(command as never)
        : Promise.resolve().then(() => {
            for (const ws of sockets) ws.terminate()
            sockets = []
            return { open: 0 }
          })
  answer.then(
    (result) => process.stdout.write(JSON.stringify(result) + "\n"),
    (error: unknown) => process.stdout.write(JSON.stringify({ error: String(error) }) + "\n")
  )
})
