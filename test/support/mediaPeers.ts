/**
 * Real WebRTC peers for real-time media's tests: each a werift peer in a process of its own
 * (test/support/mediaPeerChild.ts), joined to a room through a gateway's `/v1/webrtc/signal` as a
 * browser joins, driven from the test over IPC: write RTP on its video track, send on the room's
 * data channel, read what it heard.
 */
import { type ChildProcess, fork } from "node:child_process"
import * as path from "node:path"
import type { Command, Frame } from "./mediaPeerChild.js"

export type { Frame }

export interface PeerStats {
  readonly connection: string
  /** RTP packets received on any track. */
  readonly rtp: number
  readonly data: ReadonlyArray<string>
  readonly frames: ReadonlyArray<Frame>
}

export interface MediaPeer {
  readonly welcome: Frame
  readonly stats: () => Promise<PeerStats>
  /** Writes `count` RTP packets of `bytes` on the video track, `everyMs` apart. */
  readonly sendRtp: (count: number, everyMs?: number, bytes?: number) => Promise<void>
  readonly sendData: (text: string) => Promise<void>
  /** The first frame of `type` the server sent, waiting for it up to `ms`. */
  readonly next: (type: string, ms?: number) => Promise<Frame>
  /** Resolves with the socket's close code once the server closed it. */
  readonly closed: Promise<number>
  /** Leaves the room and ends the peer's process. */
  readonly close: () => Promise<void>
  /** Ends the peer's process at once, as a browser tab that crashed. */
  readonly kill: () => void
}

/** The handshake's refusal: status and envelope, for a join the gateway did not take. */
export class JoinRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: { readonly code?: string; readonly error?: string; readonly hint?: string }
  ) {
    super(`join refused: ${status} ${JSON.stringify(body)}`)
  }
}

const child = path.join(import.meta.dirname, "mediaPeerChild.ts")
const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const proc of running) proc.kill("SIGKILL")
})

/** Joins `room` through `gatewayUrl` with `token`, with an audio and a video track (silent until `sendRtp`). */
export const joinRoom = async (gatewayUrl: string, token: string, room: string): Promise<MediaPeer> => {
  const proc = fork(child, [], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] })
  running.add(proc)
  proc.once("exit", () => running.delete(proc))
  let next = 0
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
  let closedResolve: (code: number) => void = () => {}
  const closed = new Promise<number>((r) => (closedResolve = r))
  proc.on("message", (message: { id?: number; value?: unknown; error?: { refused?: { status: number; body: JoinRefused["body"] }; message?: string }; closed?: number }) => {
    if (message.closed !== undefined) return closedResolve(message.closed)
    const waiting = message.id === undefined ? undefined : pending.get(message.id)
    if (waiting === undefined) return
    pending.delete(message.id!)
    if (message.error === undefined) waiting.resolve(message.value)
    else if (message.error.refused !== undefined) waiting.reject(new JoinRefused(message.error.refused.status, message.error.refused.body))
    else waiting.reject(new Error(message.error.message))
  })
  proc.once("exit", () => {
    closedResolve(-1)
    for (const waiting of pending.values()) waiting.reject(new Error("the peer's process exited"))
    pending.clear()
  })
  const ask = <A,>(command: Record<string, unknown> & { readonly cmd: Command["cmd"] }): Promise<A> =>
    new Promise((resolve, reject) => {
      if (!proc.connected) return reject(new Error("the peer's process is gone"))
      const id = ++next
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      proc.send({ ...command, id })
    })
  try {
    const welcome = await ask<Frame>({ cmd: "join", url: gatewayUrl, token, room })
    const stats = () => ask<PeerStats>({ cmd: "stats" })
    return {
      welcome,
      stats,
      sendRtp: (count, everyMs = 5, bytes = 200) => ask({ cmd: "sendRtp", count, everyMs, bytes }),
      sendData: (text) => ask({ cmd: "sendData", text }),
      next: async (type, ms = 10_000) => {
        const end = Date.now() + ms
        for (;;) {
          const heard = (await stats()).frames
          const frame = heard.find((f) => f.type === type)
          if (frame !== undefined) return frame
          if (Date.now() > end) throw new Error(`no ${type} frame in ${ms} ms; heard ${heard.map((f) => f.type).join(", ")}`)
          await new Promise((r) => setTimeout(r, 50))
        }
      },
      closed,
      close: async () => {
        await ask({ cmd: "close" }).catch(() => {})
        await new Promise<void>((resolve) => (proc.exitCode !== null || proc.signalCode !== null ? resolve() : proc.once("exit", () => resolve())))
      },
      kill: () => void proc.kill("SIGKILL")
    }
  } catch (e) {
    proc.kill("SIGKILL")
    throw e
  }
}

/** Polls `check` until it holds or `ms` pass. */
export const until = async (check: () => boolean | Promise<boolean>, ms = 15_000, what = "the condition"): Promise<void> => {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what} did not hold in ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Both peers connected (the media server's connection to each is up). */
export const connected = async (...peers: ReadonlyArray<MediaPeer>): Promise<boolean> => {
  for (const peer of peers) if ((await peer.stats()).connection !== "connected") return false
  return true
}
