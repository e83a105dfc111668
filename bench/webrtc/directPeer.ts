/**
 * One side of bench/webrtc's direct media pair: a werift peer connection in a process of its own
 * (as test/support/mediaPeerChild.ts is: werift's peers do not connect inside some hosts' workers,
 * and a browser is its own process anyway), relay-only through the TURN servers it is given, that
 * either offers a video track (`sender`) or answers and counts what arrives (`receiver`). The two
 * exchange their offer and answer through the bench (no SFU, no signalling server), each with its
 * ICE candidates in the description (gathering waited for, so no trickle is needed).
 *
 * Its SRTP rollover counter is srtpRollover.mjs's, as the SFU side's peers' is.
 *
 * Driven over IPC by bench/webrtc/run.ts (`startDirectPeer` below): `offer`, `answer`, `accept`,
 * `sendRtp` (the same RTP as mediaPeerChild writes: payload type 96, running sequence numbers, a
 * marker on each), `stats` and `close`, each answered `{id, value}` or `{id, error}`.
 */
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"

/** The preload both sides' peers run (srtpRollover.mjs: SRTP's rollover counter as RFC 3711 estimates it). */
export const SRTP_ROLLOVER = new URL("./srtpRollover.mjs", import.meta.url).href

export interface IceServer {
  readonly urls: ReadonlyArray<string>
  readonly username: string
  readonly credential: string
}

export type DirectCommand =
  | { readonly id: number; readonly cmd: "offer"; readonly iceServers: ReadonlyArray<IceServer> }
  | { readonly id: number; readonly cmd: "answer"; readonly iceServers: ReadonlyArray<IceServer>; readonly sdp: string }
  | { readonly id: number; readonly cmd: "accept"; readonly sdp: string }
  | { readonly id: number; readonly cmd: "sendRtp"; readonly count: number; readonly everyMs: number; readonly bytes: number }
  | { readonly id: number; readonly cmd: "stats" }
  | { readonly id: number; readonly cmd: "close" }

type Request = DirectCommand extends infer C ? (C extends { readonly id: number } ? Omit<C, "id"> : never) : never

export interface DirectPeer {
  readonly pid: number
  readonly ask: <A>(command: Request) => Promise<A>
  readonly stats: () => Promise<{ readonly connection: string; readonly rtp: number; readonly candidates: ReadonlyArray<string> }>
  readonly sendRtp: (count: number, everyMs?: number, bytes?: number) => Promise<void>
  readonly close: () => Promise<void>
}

/** Starts one direct peer in a process of its own (this file, forked with tsx). */
export const startDirectPeer = (): DirectPeer => {
  const proc: ChildProcess = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx", "--import", SRTP_ROLLOVER], stdio: ["ignore", "inherit", "inherit", "ipc"] })
  process.once("exit", () => proc.kill("SIGKILL"))
  let next = 0
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
  proc.on("message", (message: { id: number; value?: unknown; error?: string }) => {
    const waiting = pending.get(message.id)
    if (waiting === undefined) return
    pending.delete(message.id)
    if (message.error === undefined) waiting.resolve(message.value)
    else waiting.reject(new Error(message.error))
  })
  proc.once("exit", () => {
    for (const waiting of pending.values()) waiting.reject(new Error("the direct peer's process exited"))
    pending.clear()
  })
  const ask = <A,>(command: Request): Promise<A> =>
    new Promise((resolve, reject) => {
      if (!proc.connected) return reject(new Error("the direct peer's process is gone"))
      const id = ++next
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      proc.send({ ...command, id })
    })
  return {
    pid: proc.pid ?? 0,
    ask,
    stats: () => ask({ cmd: "stats" }),
    sendRtp: (count, everyMs = 0, bytes = 200) => ask({ cmd: "sendRtp", count, everyMs, bytes }),
    close: async () => {
      await Promise.race([ask({ cmd: "close" }).catch(() => {}), new Promise((r) => setTimeout(r, 2_000))])
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
    }
  }
}

const child = async () => {
  const { MediaStreamTrack, RTCPeerConnection, RtpHeader, RtpPacket } = await import("werift")
  let pc: InstanceType<typeof RTCPeerConnection> | undefined
  const video = new MediaStreamTrack({ kind: "video" })
  let rtp = 0
  let sequence = 0
  const make = (iceServers: ReadonlyArray<IceServer>) => {
    const made = new RTCPeerConnection({ iceServers: iceServers.map((s) => ({ ...s, urls: [...s.urls] })) as never, iceTransportPolicy: "relay" })
    // as mediaPeerChild counts: each track once, every RTP packet on it
    const counted = new Set<unknown>()
    made.ontrack = (event) => {
      for (const track of event.transceiver.receiver.tracks) {
        if (counted.has(track)) continue
        counted.add(track)
        track.onReceiveRtp.subscribe(() => rtp++)
      }
    }
    pc = made
    return made
  }
  /** The local description once gathering is complete: its candidates (relay only) are in it. */
  const described = async (made: InstanceType<typeof RTCPeerConnection>) => {
    const end = Date.now() + 15_000
    while (made.iceGatheringState !== "complete") {
      if (Date.now() > end) throw new Error("ICE gathering did not complete in 15 s")
      await new Promise((r) => setTimeout(r, 20))
    }
    return made.localDescription!.sdp
  }
  const candidatesOf = (sdp: string | undefined) => (sdp ?? "").split(/\r?\n/).filter((l) => l.startsWith("a=candidate:"))
  const run = async (command: DirectCommand): Promise<unknown> => {
    switch (command.cmd) {
      case "offer": {
        const made = make(command.iceServers)
        made.addTransceiver(video, { direction: "sendonly" })
        await made.setLocalDescription(await made.createOffer())
        return described(made)
      }
      case "answer": {
        const made = make(command.iceServers)
        await made.setRemoteDescription({ type: "offer", sdp: command.sdp })
        await made.setLocalDescription(await made.createAnswer())
        return described(made)
      }
      case "accept":
        await pc!.setRemoteDescription({ type: "answer", sdp: command.sdp })
        return null
      case "sendRtp":
        for (let i = 0; i < command.count; i++) {
          // the same packets as test/support/mediaPeerChild.ts writes
          const seq = sequence++
          const header = new RtpHeader({ payloadType: 96, sequenceNumber: seq & 0xffff, timestamp: (seq * 3000) >>> 0, marker: true, ssrc: 4242 })
          video.writeRtp(new RtpPacket(header, Buffer.alloc(command.bytes, 7)))
          if (command.everyMs > 0) await new Promise((r) => setTimeout(r, command.everyMs))
        }
        return null
      case "stats":
        return { connection: pc?.connectionState ?? "new", rtp, candidates: candidatesOf(pc?.localDescription?.sdp) }
      case "close":
        await Promise.race([pc?.close().catch(() => {}), new Promise((r) => setTimeout(r, 1_000))])
        setTimeout(() => process.exit(0), 50)
        return null
    }
  }
  process.on("message", (command: DirectCommand) => {
    run(command).then(
      (value) => process.send!({ id: command.id, value: value ?? null }),
      (e: unknown) => process.send!({ id: command.id, error: String(e) })
    )
  })
  process.on("disconnect", () => process.exit(0))
}

if (process.send !== undefined && process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) void child()
