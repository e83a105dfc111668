/**
 * A request body as an async iterable of its chunks, read in flowing mode with a backpressure
 * bound of its own.
 *
 * Why not the stream's own async iterator: IncomingMessage's highWaterMark is 16 KiB, so every
 * 64 KiB socket read went over it and paused the socket, and the iterator's next `read()` resumed
 * it: a stop and start of the socket and a pass through the stream's pause, read and push
 * machinery per read. A 256 MiB upload spent ~8% of its main thread there (docs/performance.md).
 * Here the stream pauses only when `maxQueued` bytes wait unread, and a chunk that arrives while
 * the consumer waits goes to it directly.
 *
 * As the stream's own iterator: a stream that fails or closes before its end fails the
 * iteration, and a consumer that stops early destroys a stream not read to its end, unless
 * `onStop` says what to do with it instead: destroying a request's body destroys its connection,
 * and with it the answer that says why the body was refused (NodeAdapter.ts drains it instead).
 */
import type { Readable } from "node:stream"

/** The stream closed before its end (the client went away mid-body). */
export class PrematureClose extends Error {
  constructor() {
    super("the body ended before it was complete")
  }
}

export const flowingChunks = (
  readable: Readable,
  maxQueued = 1024 * 1024,
  onStop: (readable: Readable) => void = (r) => r.destroy()
): AsyncIterable<Uint8Array> => ({
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    let queue: Array<Uint8Array> = []
    let head = 0
    let queued = 0
    let paused = false
    let ended = false
    let failure: { readonly error: unknown } | undefined
    let waiting: { readonly resolve: (r: IteratorResult<Uint8Array>) => void; readonly reject: (e: unknown) => void } | undefined

    const detach = () => {
      readable.off("data", onData)
      readable.off("end", onEnd)
      readable.off("error", onError)
      readable.off("close", onClose)
    }
    /** Tells a waiting consumer how the stream ended, once nothing is left to read. */
    const settle = () => {
      if (waiting === undefined || head < queue.length) return
      const w = waiting
      waiting = undefined
      if (failure !== undefined) w.reject(failure.error)
      else if (ended) w.resolve({ value: undefined, done: true })
    }
    function onData(chunk: Uint8Array) {
      if (waiting !== undefined) {
        const w = waiting
        waiting = undefined
        return w.resolve({ value: chunk, done: false })
      }
      queue.push(chunk)
      queued += chunk.length
      if (queued >= maxQueued && !paused) {
        paused = true
        readable.pause()
      }
    }
    function onEnd() {
      ended = true
      detach()
      settle()
    }
    function onError(error: unknown) {
      failure ??= { error }
      detach()
      settle()
    }
    function onClose() {
      if (!ended) onError(new PrematureClose())
    }
    readable.on("data", onData)
    readable.on("end", onEnd)
    readable.on("error", onError)
    readable.on("close", onClose)

    return {
      next: () => {
        if (head < queue.length) {
          const chunk = queue[head] as Uint8Array
          queue[head++] = EMPTY
          if (head === queue.length) {
            queue = []
            head = 0
          }
          queued -= chunk.length
          if (paused && queued <= maxQueued / 2) {
            paused = false
            readable.resume()
          }
          return Promise.resolve({ value: chunk, done: false })
        }
        if (failure !== undefined) return Promise.reject(failure.error)
        if (ended) return Promise.resolve({ value: undefined, done: true })
        return new Promise((resolve, reject) => {
          waiting = { resolve, reject }
        })
      },
      return: () => {
        detach()
        queue = []
        head = 0
        if (!ended && failure === undefined) onStop(readable)
        return Promise.resolve({ value: undefined, done: true })
      }
    }
  }
})

const EMPTY = new Uint8Array(0)
