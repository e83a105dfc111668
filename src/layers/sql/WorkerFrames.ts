/**
 * The bytes between the gateway and a SQLite worker process (SqliteWorkers.ts, sqliteWorker.ts).
 *
 * Not Node's IPC channel: that costs a serializer object, a write and a `message` event per
 * message on both sides. Here the gateway writes one frame per event-loop turn holding every
 * request of the turn for that worker (v8 serialization: bind values may be bigint), on the
 * worker's stdin; the worker writes one small frame per answer, in request order, on fd 3. An
 * answer carries no id: the n-th answer is the n-th request's. The common answer, a statement's
 * JSON text, crosses as its UTF-8 bytes with a one-byte tag, so neither side encodes an object.
 *
 * Frame: u32 little-endian length of what follows, then the payload.
 */
import { deserialize, serialize } from "node:v8"
import type { WorkerFailure, WorkerRequest, WorkerValue } from "./SqliteProtocol.js"

/** An answer's tag byte. */
export const AnswerTag = {
  /** `{type: "json"}`: the payload is the JSON text itself. */
  Json: 0,
  /** Any other WorkerValue, as JSON. */
  Value: 1,
  /** A WorkerFailure, as JSON. */
  Failure: 2
} as const

/** The worker's first frame, alone: it is ready, and the clock of the request it owes starts. */
export const READY_TAG = 3
export const readyFrame = (): Buffer => Buffer.from([1, 0, 0, 0, READY_TAG])

export type Answer = { readonly ok: true; readonly value: WorkerValue } | { readonly ok: false; readonly failure: WorkerFailure }

/** One frame holding a turn's requests, in order. */
export const requestFrame = (requests: ReadonlyArray<WorkerRequest>): Buffer => {
  const body = serialize(requests)
  const frame = Buffer.allocUnsafe(4 + body.length)
  frame.writeUInt32LE(body.length, 0)
  body.copy(frame, 4)
  return frame
}

export const answerFrame = (answer: Answer): Buffer => {
  const [tag, text] = !answer.ok
    ? [AnswerTag.Failure, JSON.stringify(answer.failure)]
    : answer.value.type === "json"
      ? [AnswerTag.Json, answer.value.json]
      : [AnswerTag.Value, JSON.stringify(answer.value)]
  const length = Buffer.byteLength(text)
  const frame = Buffer.allocUnsafe(5 + length)
  frame.writeUInt32LE(length + 1, 0)
  frame[4] = tag
  frame.write(text, 5, "utf8")
  return frame
}

/**
 * Cuts a byte stream into frames. `push` returns the payloads completed by a chunk; a partial
 * frame waits for the next chunk. The chunks of a frame are kept as they came and joined once
 * the frame is whole: joining at every chunk copied a large answer (tens of MiB in 64 KiB reads)
 * once per read, which grew with the square of its size.
 */
export class FrameReader {
  private chunks: Array<Buffer> = []
  private buffered = 0
  /** Bytes the frame at the head needs in all (its length prefix and payload), once the prefix is in. */
  private needed: number | undefined

  push(chunk: Buffer): Array<Buffer> {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    if (this.needed === undefined && this.buffered >= 4) this.needed = 4 + this.joined().readUInt32LE(0)
    if (this.needed === undefined || this.buffered < this.needed) return []
    const data = this.joined()
    this.chunks = []
    this.buffered = 0
    this.needed = undefined
    const frames: Array<Buffer> = []
    let at = 0
    while (data.length - at >= 4) {
      const length = data.readUInt32LE(at)
      if (data.length - at - 4 < length) break
      frames.push(data.subarray(at + 4, at + 4 + length))
      at += 4 + length
    }
    if (at < data.length) {
      // copied, so a large chunk is not kept alive by a small remainder
      const rest = Buffer.from(data.subarray(at))
      this.chunks = [rest]
      this.buffered = rest.length
      if (rest.length >= 4) this.needed = 4 + rest.readUInt32LE(0)
    }
    return frames
  }

  /** The chunks held, as one buffer (and kept so, so the next join copies nothing twice). */
  private joined(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)]
    return this.chunks[0] as Buffer
  }
}

export const readRequests = (payload: Buffer): Array<WorkerRequest> => deserialize(payload) as Array<WorkerRequest>

export const readAnswer = (payload: Buffer): Answer => {
  const text = payload.toString("utf8", 1)
  switch (payload[0]) {
    case AnswerTag.Json:
      return { ok: true, value: { type: "json", json: text } }
    case AnswerTag.Value:
      return { ok: true, value: JSON.parse(text) as WorkerValue }
    default:
      return { ok: false, failure: JSON.parse(text) as WorkerFailure }
  }
}
