/**
 * This node's media server (docs/webrtc.md, "The media server"): the SFU built from engines/sfu,
 * run by the gateway as its child on a loopback port, so that only this gateway reaches it. The
 * gateway makes its key (32 random bytes, per start): the SFU takes its control calls and the
 * gateway's channel (MediaChannel.ts) with it as a bearer, and opens join tickets sealed under it.
 * The child watches its stdin, which the gateway holds open, and exits when the gateway is gone,
 * however the gateway stopped. A child that exits is started again after a pause; its rooms'
 * peers rejoin.
 *
 * The child also gets node's IPC channel, on which the gateway hands it a client's signalling
 * socket with the join it decided (`hand`; engines/sfu/handed.go); the child answers each with
 * the status it answered the client's handshake with, and says when a handed peer's socket ended.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as net from "node:net"
import { Context, Effect, Layer, Redacted } from "effect"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { ChannelJoin } from "./MediaChannel.js"

export interface Participant {
  readonly peer_id: string
  readonly user: string
  readonly device: string
  readonly muted: boolean
  readonly joined_at: number
}

export interface RoomView {
  readonly room: string
  readonly participants: ReadonlyArray<Participant>
}

export interface ControlOrder {
  readonly ns: string
  readonly room: string
  readonly user: string
  readonly peer: string
  /** `end`: every peer of the namespace, in every room (room, user and peer empty). */
  readonly action: "kick" | "mute" | "unmute" | "end"
}

/** This node's own order: `revoke` closes the handed peer `peer` with 4401, as the gateway closes a revoked credential's sockets. */
export type LocalOrder = ControlOrder | (Omit<ControlOrder, "action"> & { readonly action: "revoke" })

/** What goes with a handed socket: the decided join, and the client's handshake key. */
export interface HandOrder {
  readonly join: ChannelJoin
  readonly key: string
}

export interface MediaServerService {
  /** Whether this node runs a media server (`PORTICO_SFU_BINARY` is set). */
  readonly configured: boolean
  /** Starts it, once the gateway listens at `gatewayUrl` (its events go there). */
  readonly start: (gatewayUrl: string) => void
  /** Where it listens and its key, while it is up. */
  readonly current: () => { readonly url: string; readonly key: Buffer } | undefined
  /** Calls `listener` each time it comes up (started, or started again after it exited). */
  readonly onUp: (listener: () => void) => void
  /** Its counts, or undefined when it is not up or does not answer. */
  readonly health: Effect.Effect<{ readonly rooms: number; readonly peers: number } | undefined>
  /** The namespace's rooms on this node; undefined when the media server does not answer. */
  readonly rooms: (namespace: string) => Effect.Effect<ReadonlyArray<RoomView> | undefined>
  /**
   * Gives the client's socket, its handshake read and nothing buffered, to the media server with
   * its join: the status the media server answered the handshake with (101, or a refusal's; 0 when
   * it went away first). `ended` is called once the peer's socket has closed. Undefined when the
   * media server cannot take sockets (not up, no channel): the socket is still the caller's.
   */
  readonly hand: (socket: net.Socket, order: HandOrder, ended: () => void) => Promise<number> | undefined
  /** Kicks or mutes matching peers here: how many; undefined when it does not answer. */
  readonly control: (order: LocalOrder) => Effect.Effect<number | undefined>
}

const RESTART_MS = 1_000
const CALL_MS = 1_500

const freePort = (host: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, host, () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

export class MediaServer extends Context.Tag("portico/MediaServer")<MediaServer, MediaServerService>() {
  static readonly Live = Layer.scoped(
    MediaServer,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const settings = config.webrtc
      const key = randomBytes(32)
      let child: ChildProcess | undefined
      let url: string | undefined
      let up = false
      const upListeners: Array<() => void> = []
      let stopped = false
      let started = false
      /** Handed joins by peer id: the handshake's outcome still awaited, and the end of the socket. */
      const handed = new Map<string, { answered?: (status: number) => void; readonly ended: () => void }>()
      const letGo = () => {
        for (const h of handed.values()) {
          h.answered?.(0)
          h.ended()
        }
        handed.clear()
      }

      const run = async (gatewayUrl: string) => {
        if (stopped || settings.sfuBinary === undefined) return
        const port = settings.sfuPort !== 0 ? settings.sfuPort : await freePort("127.0.0.1").catch(() => 0)
        if (port === 0 || stopped) return void setTimeout(() => void run(gatewayUrl), RESTART_MS).unref()
        const env: Record<string, string> = {
          PATH: process.env["PATH"] ?? "/usr/bin:/bin",
          SFU_LISTEN: `127.0.0.1:${port}`,
          SFU_KEY: key.toString("hex"),
          SFU_NODE: config.nodeId,
          SFU_EVENTS_URL: `${gatewayUrl}/v1/internal/webrtc/events`,
          SFU_MAX_PEERS: String(settings.roomPeers),
          SFU_MAX_ROOMS: String(settings.rooms),
          SFU_PARENT_STDIN: "1",
          ...(process.env["PION_LOG_DEBUG"] === undefined ? {} : { PION_LOG_DEBUG: process.env["PION_LOG_DEBUG"] })
        }
        if (settings.turnSecret !== undefined && settings.turnUris.length > 0) {
          env["SFU_TURN_URIS"] = settings.turnUris.join(",")
          env["SFU_TURN_SECRET"] = Redacted.value(settings.turnSecret)
        }
        const proc = spawn(settings.sfuBinary, [], { env, stdio: ["pipe", "ignore", "pipe", "ipc"] })
        child = proc
        proc.channel?.unref()
        proc.on("message", (m: { readonly peer?: unknown; readonly status?: unknown; readonly ended?: unknown }) => {
          const h = typeof m?.peer === "string" ? handed.get(m.peer) : undefined
          if (h === undefined) return
          if (typeof m.status === "number") {
            h.answered?.(m.status)
            h.answered = undefined
            if (m.status !== 101) {
              handed.delete(m.peer as string)
              h.ended()
            }
          } else if (m.ended === true) {
            handed.delete(m.peer as string)
            h.answered?.(0)
            h.ended()
          }
        })
        let said = ""
        // its log lines go to the gateway's, named: one write for what one read brought (a line
        // for each join and leave, so formatting each through console.error would be per-join work)
        let partial = ""
        proc.stderr!.on("data", (chunk: Buffer) => {
          const lines = (partial + chunk.toString()).split("\n")
          partial = lines.pop()!.slice(-4096)
          let out = ""
          for (const line of lines) {
            if (line.trim() !== "") out += `media server: ${line}\n`
            said = line
            if (!up && line.includes("sfu listening")) {
              up = true
              url = `http://127.0.0.1:${port}`
              for (const listener of upListeners) listener()
            }
          }
          if (out !== "") process.stderr.write(out)
        })
        proc.stdin!.on("error", () => {})
        proc.on("error", (e) => console.error(`media server: ${settings.sfuBinary} did not start: ${e.message}`))
        proc.on("exit", (code, signal) => {
          letGo()
          up = false
          url = undefined
          child = undefined
          if (stopped) return
          console.error(`media server exited (${signal ?? code}); starting it again in ${RESTART_MS} ms${said === "" ? "" : `: ${said.trim()}`}`)
          setTimeout(() => void run(gatewayUrl), RESTART_MS).unref()
        })
      }

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          stopped = true
          child?.kill("SIGTERM")
        })
      )

      const call = (path: string, init?: { readonly method: string; readonly body: string }) =>
        Effect.promise(async (): Promise<unknown> => {
          if (!up || url === undefined) return undefined
          try {
            const answer = await fetch(`${url}${path}`, {
              method: init?.method ?? "GET",
              headers: { authorization: `Bearer ${key.toString("hex")}`, ...(init === undefined ? {} : { "content-type": "application/json" }) },
              body: init?.body,
              signal: AbortSignal.timeout(CALL_MS)
            })
            return answer.ok ? await answer.json() : undefined
          } catch {
            return undefined
          }
        })

      const service: MediaServerService = {
        configured: settings.sfuBinary !== undefined,
        start: (gatewayUrl) => {
          if (started) return
          started = true
          void run(gatewayUrl)
        },
        current: () => (up && url !== undefined ? { url, key } : undefined),
        onUp: (listener) => void upListeners.push(listener),
        hand: (socket, order, ended) => {
          const proc = child
          if (!up || proc === undefined || !proc.connected || handed.has(order.join.peer)) return undefined
          // The gateway stops reading the socket before it goes: node detaches the handle when it
          // sends it but keeps it reading until the child's acknowledgement, and whatever it read
          // meanwhile (a client's first frames, its close) would be lost to the media server.
          const handle = (socket as unknown as { _handle?: { readStop?: () => number; reading?: boolean } | null })._handle
          if (handle?.readStop === undefined) return undefined
          handle.readStop()
          handle.reading = false
          // Not sent as one of the server's connections: node would then count it as the child's
          // and make the server's close wait on (and answer from) the child rather than drain the
          // connections left here. Ended below once sent, it leaves the server's count as any
          // closed connection does.
          ;(socket as unknown as { server: unknown }).server = null
          let resolve!: (status: number) => void
          const answered = new Promise<number>((r) => (resolve = r))
          const entry = { answered: resolve as ((status: number) => void) | undefined, ended }
          handed.set(order.join.peer, entry)
          try {
            proc.send(order, socket, (error) => {
              // Sent: the socket's handle is the child's (node detached it when it sent it). The
              // socket object is ended so that its listeners hear it is gone, and the server it
              // came from counts it closed.
              socket.destroy()
              if (error === null || handed.get(order.join.peer) !== entry) return
              handed.delete(order.join.peer)
              resolve(0)
              ended()
            })
          } catch {
            // not sent (the channel refused the message at once): the socket is still the
            // caller's, reading again, for the channel to take
            handed.delete(order.join.peer)
            if (socket.destroyed || (socket as unknown as { _handle: unknown })._handle !== handle) return undefined
            ;(handle as { readStart?: () => number }).readStart?.()
            handle.reading = true
            return undefined
          }
          return answered
        },
        health: Effect.map(call("/health"), (body) => {
          const b = body as { rooms?: unknown; peers?: unknown } | undefined
          return typeof b?.rooms === "number" && typeof b.peers === "number" ? { rooms: b.rooms, peers: b.peers } : undefined
        }),
        rooms: (namespace) =>
          Effect.map(call(`/rooms?ns=${encodeURIComponent(namespace)}`), (body) => {
            const rooms = (body as { rooms?: unknown } | undefined)?.rooms
            return Array.isArray(rooms) ? (rooms as ReadonlyArray<RoomView>) : undefined
          }),
        control: (order) =>
          Effect.map(call("/control", { method: "POST", body: JSON.stringify(order) }), (body) => {
            const affected = (body as { affected?: unknown } | undefined)?.affected
            return typeof affected === "number" ? affected : undefined
          })
      }
      return service
    })
  )

  /** No media server: what a gateway without `PORTICO_SFU_BINARY` has. */
  static readonly Test = Layer.succeed(MediaServer, {
    configured: false,
    start: () => {},
    current: () => undefined,
    onUp: () => {},
    hand: () => undefined,
    health: Effect.succeed(undefined),
    rooms: () => Effect.succeed(undefined),
    control: () => Effect.succeed(undefined)
  })
}
