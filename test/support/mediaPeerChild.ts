/**
 * One real WebRTC peer, in a process of its own as a browser is (test/support/mediaPeers.ts starts
 * and drives it over IPC): a werift (pure TypeScript) peer connection that joins a room through a
 * gateway's `/v1/webrtc/signal` as a browser would (the access token in `?jwt=`), answers the
 * media server's offers with a video track (RTP written on `sendRtp`) and a silent audio one, and
 * uses the room's data channel. werift's peers did not connect inside a vitest worker (their own
 * process did), and a browser is its own process anyway.
 */
import { MediaStreamTrack, RTCPeerConnection, type RTCDataChannel, RtpHeader, RtpPacket } from "werift"
import WebSocket from "ws"

export interface Frame {
  readonly type: string
  readonly [member: string]: unknown
}

interface Peer {
  readonly ws: WebSocket
  readonly pc: RTCPeerConnection
  readonly frames: Array<Frame>
  readonly rtp: () => number
  readonly data: Array<string>
  readonly welcome: Frame
  readonly sendRtp: (count: number, everyMs?: number, bytes?: number) => Promise<void>
  readonly sendData: (text: string) => void
  readonly closed: Promise<number>
  readonly close: () => Promise<void>
}

const iceServersOf = (welcome: Frame) => (welcome["ice_servers"] as Array<{ urls: Array<string>; username: string; credential: string }> | undefined) ?? []

/** Joins `room` through `gatewayUrl` with `token`, with an audio and a video track (silent until `sendRtp`). */
const joinRoom = (gatewayUrl: string, token: string, room: string): Promise<Peer> =>
  new Promise((resolve, reject) => {
    const url = `${gatewayUrl.replace(/^http/, "ws")}/v1/webrtc/signal?room=${encodeURIComponent(room)}&jwt=${encodeURIComponent(token)}`
    const ws = new WebSocket(url)
    const frames: Array<Frame> = []
    const data: Array<string> = []
    let rtp = 0
    let pc: RTCPeerConnection | undefined
    let channel: RTCDataChannel | undefined
    const video = new MediaStreamTrack({ kind: "video" })
    let attached = false
    let sequence = 0
    // candidates found while the first answer is being made go after it, as a browser's do once
    // the answer is on its way
    let answered = false
    const early: Array<string> = []
    // the server's frames are handled one at a time: an offer waits for the answer before it
    let chain: Promise<void> = Promise.resolve()
    let closedResolve: (code: number) => void = () => {}
    const closed = new Promise<number>((r) => (closedResolve = r))

    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => {
        let body = {}
        try {
          body = JSON.parse(text)
        } catch {
          body = { error: text }
        }
        reject({ refused: { status: res.statusCode ?? 0, body } })
      })
    })
    ws.on("error", (e) => reject(e))
    ws.on("close", (code) => closedResolve(code))

    const handle = async (frame: Frame) => {
      frames.push(frame)
      if (frame.type === "welcome") {
        const iceServers = iceServersOf(frame)
        pc = new RTCPeerConnection({ iceServers: iceServers as never, iceTransportPolicy: iceServers.length > 0 ? "relay" : "all" })
        pc.onIceCandidate.subscribe((c) => {
          if (c === undefined || ws.readyState !== WebSocket.OPEN) return
          const frame = JSON.stringify({ type: "candidate", candidate: c.toJSON() })
          if (answered) ws.send(frame)
          else early.push(frame)
        })
        pc.onDataChannel.subscribe((dc) => {
          channel = dc
          dc.onMessage.subscribe((m) => data.push(m.toString()))
        })
        // werift fires ontrack again at each renegotiation, and keeps a track per SSRC on a
        // receiver (a reused m-line brings another): each track is counted once
        const counted = new Set<unknown>()
        pc.ontrack = (event) => {
          for (const track of event.transceiver.receiver.tracks) {
            if (counted.has(track)) continue
            counted.add(track)
            track.onReceiveRtp.subscribe(() => rtp++)
          }
        }
        resolve(peer(frame))
      }
      if (frame.type === "offer" && pc !== undefined) {
        await pc.setRemoteDescription({ type: "offer", sdp: String(frame["sdp"]) })
        // a track on each of the first offer's transceivers, as a browser with a camera and a
        // microphone has: werift answers a transceiver it sends nothing on with port 0, which
        // rejects the m-line the offer's bundle stands on
        if (!attached) {
          attached = true
          for (const transceiver of pc.getTransceivers().filter((t) => t.kind === "audio" || t.kind === "video")) {
            transceiver.setDirection("sendonly")
            transceiver.sender.replaceTrack(transceiver.kind === "video" ? video : new MediaStreamTrack({ kind: "audio" }))
          }
        }
        await pc.setLocalDescription(await pc.createAnswer())
        ws.send(JSON.stringify({ type: "answer", sdp: pc.localDescription!.sdp }))
        answered = true
        for (const frame of early.splice(0)) ws.send(frame)
      }
      if (frame.type === "candidate" && pc !== undefined && frame["candidate"] !== undefined) {
        await pc.addIceCandidate(frame["candidate"] as never).catch(() => {})
      }
    }
    ws.on("message", (raw) => {
      const frame = JSON.parse(raw.toString()) as Frame
      chain = chain.then(() => handle(frame)).catch(() => {})
    })

    const peer = (welcome: Frame): Peer => ({
      ws,
      pc: pc!,
      frames,
      rtp: () => rtp,
      data,
      welcome,
      sendRtp: async (count, everyMs = 5, bytes = 200) => {
        for (let i = 0; i < count; i++) {
          // sequence numbers run on across calls: SRTP refuses a number it has seen as a replay
          const seq = sequence++
          const header = new RtpHeader({ payloadType: 96, sequenceNumber: seq & 0xffff, timestamp: (seq * 3000) >>> 0, marker: true, ssrc: 4242 })
          video.writeRtp(new RtpPacket(header, Buffer.alloc(bytes, 7)))
          if (everyMs > 0) await new Promise((r) => setTimeout(r, everyMs))
        }
      },
      sendData: (text) => {
        if (channel === undefined) throw new Error("the room's data channel is not open")
        channel.send(text)
      },
      closed,
      close: async () => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "leave" }))
        ws.close()
        // werift's close waits on its transports; a peer whose connection never came up is let go
        await Promise.race([pc?.close().catch(() => {}), new Promise((r) => setTimeout(r, 1_000))])
      }
    })
  })

/** The commands test/support/mediaPeers.ts sends, each answered `{id, value}` or `{id, error}`. */
export type Command =
  | { readonly id: number; readonly cmd: "join"; readonly url: string; readonly token: string; readonly room: string }
  | { readonly id: number; readonly cmd: "stats" }
  | { readonly id: number; readonly cmd: "sendRtp"; readonly count: number; readonly everyMs: number; readonly bytes: number }
  | { readonly id: number; readonly cmd: "sendData"; readonly text: string }
  | { readonly id: number; readonly cmd: "close" }

if (process.send !== undefined) {
  let peer: Peer | undefined
  const reply = (id: number, value: unknown) => process.send!({ id, value })
  process.on("message", (command: Command) => {
    const run = async (): Promise<unknown> => {
      switch (command.cmd) {
        case "join":
          peer = await joinRoom(command.url, command.token, command.room)
          void peer.closed.then((code) => process.send!({ closed: code }))
          return peer.welcome
        case "stats":
          return { connection: peer?.pc.connectionState ?? "new", rtp: peer?.rtp() ?? 0, data: peer?.data ?? [], frames: peer?.frames ?? [] }
        case "sendRtp":
          return peer?.sendRtp(command.count, command.everyMs, command.bytes)
        case "sendData":
          return peer?.sendData(command.text)
        case "close":
          await peer?.close()
          setTimeout(() => process.exit(0), 50)
          return undefined
      }
    }
    run().then(
      (value) => reply(command.id, value ?? null),
      (e: unknown) => process.send!({ id: command.id, error: e !== null && typeof e === "object" && "refused" in e ? e : { message: String(e) } })
    )
  })
  // the test's process gone: so is this peer
  process.on("disconnect", () => process.exit(0))
}
