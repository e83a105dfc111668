/**
 * A publish/subscribe socket client for the e2e suites: opens `GET /v1/pubsub/ws`, keeps every
 * frame it receives (parsed), and answers the handshake's refusal as status, headers and body.
 */
import type * as http from "node:http"
import { WebSocket } from "ws"

export interface Frame {
  readonly type: string
  readonly [member: string]: unknown
}

export interface Subscriber {
  readonly ws: WebSocket
  readonly frames: Array<Frame>
  readonly closed: Promise<{ readonly code: number; readonly reason: string; readonly at: number }>
  /** Waits until `count` frames of `type` arrived (or any frames, without a type); fails after `ms`. */
  readonly waitFor: (count: number, type?: string, ms?: number) => Promise<ReadonlyArray<Frame>>
  readonly ofType: (type: string) => ReadonlyArray<Frame>
  /** Sends a publish frame and waits for its ack or error. */
  readonly publish: (topic: string, data: string, id: string) => Promise<Frame>
}

export interface Refused {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

export const isSubscriber = (x: Subscriber | Refused): x is Subscriber => "ws" in x

export const openSubscriber = (
  baseUrl: string,
  query: string,
  token: string | undefined,
  options: { readonly via?: "header" | "query"; readonly autoPong?: boolean } = {}
): Promise<Subscriber | Refused> =>
  new Promise((resolve, reject) => {
    const via = options.via ?? "header"
    const url = `${baseUrl.replace(/^http/, "ws")}/v1/pubsub/ws?${query}${via === "query" && token !== undefined ? `&jwt=${encodeURIComponent(token)}` : ""}`
    const ws = new WebSocket(url, { headers: via === "header" && token !== undefined ? { authorization: `Bearer ${token}` } : {}, maxPayload: 64 * 1024 * 1024, autoPong: options.autoPong ?? true })
    const frames: Array<Frame> = []
    const waiters = new Set<() => void>()
    const closed = new Promise<{ code: number; reason: string; at: number }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: reason.toString(), at: Date.now() }))
    )
    ws.on("message", (data: Buffer) => {
      frames.push(JSON.parse(data.toString("utf8")) as Frame)
      for (const w of [...waiters]) w()
    })
    const ofType = (type: string) => frames.filter((f) => f.type === type)
    const waitFor = (count: number, type?: string, ms = 10_000) =>
      new Promise<ReadonlyArray<Frame>>((done, fail) => {
        const pick = () => (type === undefined ? frames : ofType(type))
        const check = () => {
          if (pick().length < count) return
          clearTimeout(timer)
          waiters.delete(check)
          done(pick())
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          fail(new Error(`waited ${ms} ms for ${count} ${type ?? "frames"}; got ${JSON.stringify(frames).slice(0, 2000)}`))
        }, ms)
        waiters.add(check)
        check()
      })
    const publish = async (topic: string, data: string, id: string) => {
      ws.send(JSON.stringify({ type: "publish", topic, data_base64: Buffer.from(data).toString("base64"), id }))
      const seen = (f: Frame) => (f.type === "ack" || f.type === "error") && f["id"] === id
      for (;;) {
        const found = frames.find(seen)
        if (found !== undefined) return found
        await waitFor(frames.length + 1)
      }
    }
    ws.on("open", () => resolve({ ws, frames, closed, waitFor, ofType, publish }))
    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === "" ? undefined : JSON.parse(text) }))
    })
    ws.on("error", (e) => reject(e))
  })

export const b64 = (text: string) => Buffer.from(text).toString("base64")
export const unb64 = (text: unknown) => Buffer.from(String(text), "base64").toString("utf8")
