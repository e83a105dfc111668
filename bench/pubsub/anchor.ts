/**
 * The bare anchor of bench/pubsub: `node:http` + `ws` doing the same fan-out as the gateway, with
 * the same frame envelope and no rules (no credential, no grant, no history, no queue bound).
 * `POST /publish {topic, data_base64}` answers `{"status":"ok"}` once every local subscriber's
 * send was started (embedded) or Redis answered the PUBLISH (with ANCHOR_REDIS_URL, where one
 * subscriber connection relays what Redis delivers). `GET /ws?topic=` subscribes.
 */
import * as http from "node:http"
import { Redis } from "ioredis"
import { type WebSocket, WebSocketServer } from "ws"

const redisUrl = process.env.ANCHOR_REDIS_URL
const topics = new Map<string, Set<WebSocket>>()
let seq = 0
const fanOut = (topic: string, frame: string) => {
  const bytes = Buffer.from(frame)
  for (const ws of topics.get(topic) ?? []) ws.send(bytes, { binary: false })
}
const publisher = redisUrl === undefined ? undefined : new Redis(redisUrl)
const subscriber = redisUrl === undefined ? undefined : new Redis(redisUrl)
subscriber?.on("message", (channel: string, frame: string) => fanOut(channel.slice("anchor:".length), frame))

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false })
const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    const { topic, data_base64 } = JSON.parse(Buffer.concat(chunks).toString()) as { topic: string; data_base64: string }
    const frame = `{"topic":${JSON.stringify(topic)},"offset":${++seq},"timestamp":${Date.now()},"type":"message","data":"${data_base64}"}`
    const done = () => res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}')
    if (publisher === undefined) {
      fanOut(topic, frame)
      done()
    } else void publisher.publish(`anchor:${topic}`, frame).then(done)
  })
})
server.on("upgrade", (req, socket, head) => {
  const topic = new URL(req.url ?? "/", "http://x").searchParams.get("topic") ?? ""
  const subscribed = subscriber === undefined || topics.has(topic) ? Promise.resolve() : subscriber.subscribe(`anchor:${topic}`).then(() => undefined)
  void subscribed.then(() =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      const set = topics.get(topic) ?? new Set()
      topics.set(topic, set)
      set.add(ws)
      ws.on("close", () => set.delete(ws))
      ws.send(JSON.stringify({ type: "subscribed", topics: [{ topic }] }))
    })
  )
})
server.listen(Number(process.env.ANCHOR_PORT), "127.0.0.1", () => console.log("listening"))
