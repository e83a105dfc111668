import { describe, expect, it } from "vitest"
import { PassThrough, Readable } from "node:stream"
import { flowingChunks, PrematureClose } from "../../src/api/FlowingBody.js"

const chunk = (n: number, fill: number) => Buffer.alloc(n, fill)

describe("flowingChunks", () => {
  it("yields every chunk in order, queued ones and ones that arrive while the consumer waits", async () => {
    const stream = new PassThrough()
    const got: Array<number> = []
    const reading = (async () => {
      for await (const c of flowingChunks(stream, 1 << 20)) got.push(c[0] as number)
    })()
    for (let i = 0; i < 50; i++) {
      stream.write(chunk(1000, i))
      // some arrive at once, some one at a time
      if (i % 7 === 0) await new Promise((r) => setImmediate(r))
    }
    stream.end()
    await reading
    expect(got).toEqual(Array.from({ length: 50 }, (_, i) => i))
  })

  it("pauses the stream at the bound and resumes it once half of it is read", async () => {
    const stream = new PassThrough({ highWaterMark: 1 })
    const iterator = flowingChunks(stream, 4096)[Symbol.asyncIterator]()
    // nothing is read until the consumer asks; writes go into the queue
    const first = iterator.next()
    for (let i = 0; i < 6; i++) stream.write(chunk(1024, i))
    expect((await first).value?.[0]).toBe(0)
    await new Promise((r) => setImmediate(r))
    // 4 KiB queued: paused, the last write still in the stream
    expect(stream.isPaused()).toBe(true)
    expect(stream.readableLength).toBe(1024)
    expect((await iterator.next()).value?.[0]).toBe(1)
    expect(stream.isPaused()).toBe(true)
    // 2 KiB left, half of the bound: flowing again
    expect((await iterator.next()).value?.[0]).toBe(2)
    expect(stream.isPaused()).toBe(false)
    stream.end()
    const rest: Array<number> = []
    for (;;) {
      const r = await iterator.next()
      if (r.done === true) break
      rest.push(r.value[0] as number)
    }
    expect(rest).toEqual([3, 4, 5])
  })

  it("fails when the stream errs or closes before its end, after the chunks that came before", async () => {
    const failing = new PassThrough()
    const seen: Array<number> = []
    const read = async (stream: Readable) => {
      for await (const c of flowingChunks(stream)) seen.push(c.length)
    }
    const erred = read(failing)
    failing.write(chunk(10, 1))
    await new Promise((r) => setImmediate(r))
    failing.destroy(new Error("socket hang up"))
    await expect(erred).rejects.toThrow("socket hang up")
    expect(seen).toEqual([10])

    const closing = new PassThrough()
    const closed = read(closing)
    closing.write(chunk(20, 1))
    await new Promise((r) => setImmediate(r))
    closing.destroy()
    await expect(closed).rejects.toBeInstanceOf(PrematureClose)
    expect(seen).toEqual([10, 20])
  })

  it("destroys a stream its consumer stopped reading before the end, and leaves an ended one alone", async () => {
    const stream = new PassThrough()
    stream.write(chunk(5, 1))
    stream.write(chunk(5, 2))
    for await (const c of flowingChunks(stream)) {
      expect(c[0]).toBe(1)
      break
    }
    expect(stream.destroyed).toBe(true)

    const whole = Readable.from([chunk(3, 1), chunk(3, 2)], { objectMode: false })
    const sizes: Array<number> = []
    for await (const c of flowingChunks(whole)) sizes.push(c.length)
    expect(sizes).toEqual([3, 3])
  })

  it("hands a stream its consumer stopped reading early to onStop instead, once, and not an ended one", async () => {
    const stream = new PassThrough()
    stream.write(chunk(5, 1))
    stream.write(chunk(5, 2))
    const stopped: Array<unknown> = []
    for await (const c of flowingChunks(stream, undefined, (r) => stopped.push(r))) {
      expect(c[0]).toBe(1)
      break
    }
    expect(stopped).toEqual([stream])
    expect(stream.destroyed).toBe(false)

    const whole = Readable.from([chunk(3, 1)], { objectMode: false })
    for await (const _ of flowingChunks(whole, undefined, (r) => stopped.push(r))) void _
    expect(stopped).toHaveLength(1)
  })
})
