/** The bytes between the gateway and a SQLite worker: frames cut right wherever a chunk ends. */
import { describe, expect, it, vi } from "vitest"
import type { WorkerRequest } from "../../../src/layers/sql/SqliteProtocol.js"
import { answerFrame, FrameReader, readAnswer, readRequests, READY_TAG, readyFrame, requestFrame } from "../../../src/layers/sql/WorkerFrames.js"

describe("worker frames", () => {
  it("reads requests and answers back whatever the chunk boundaries, bigints and text intact", () => {
    const requests: Array<WorkerRequest> = [
      { op: "statement", file: "/f.db", sql: "SELECT ?, ?", params: [9223372036854775807n, "é ✓"], kind: "read", shape: "table" },
      { op: "drop", file: "/g.db" }
    ]
    const answers = [
      answerFrame({ ok: true, value: { type: "json", json: '{"columns":["x"],"rows":[["é ✓"]]}' } }),
      answerFrame({ ok: true, value: { type: "done" } }),
      answerFrame({ ok: false, failure: { kind: "statement", message: "no such table: t", index: 2 } })
    ]
    const stream = Buffer.concat([requestFrame(requests), readyFrame(), ...answers])
    // every split of the stream into two chunks, and one byte at a time
    const splits = [...Array.from({ length: stream.length + 1 }, (_, at) => [stream.subarray(0, at), stream.subarray(at)]), [...stream].map((b) => Buffer.from([b]))]
    for (const chunks of splits) {
      const reader = new FrameReader()
      const frames = chunks.flatMap((chunk) => reader.push(chunk))
      expect(frames).toHaveLength(5)
      expect(readRequests(frames[0]!)).toEqual(requests)
      expect(frames[1]![0]).toBe(READY_TAG)
      expect(readAnswer(frames[2]!)).toEqual({ ok: true, value: { type: "json", json: '{"columns":["x"],"rows":[["é ✓"]]}' } })
      expect(readAnswer(frames[3]!)).toEqual({ ok: true, value: { type: "done" } })
      expect(readAnswer(frames[4]!)).toEqual({ ok: false, failure: { kind: "statement", message: "no such table: t", index: 2 } })
    }
  })

  it("joins a large answer's chunks once, not at every chunk", () => {
    const json = JSON.stringify({ columns: ["b"], rows: [["x".repeat(8 * 1024 * 1024)]] })
    const stream = Buffer.concat([answerFrame({ ok: true, value: { type: "json", json } }), readyFrame()])
    const concat = vi.spyOn(Buffer, "concat")
    try {
      const reader = new FrameReader()
      const frames: Array<Buffer> = []
      for (let at = 0; at < stream.length; at += 64 * 1024) frames.push(...reader.push(stream.subarray(at, at + 64 * 1024)))
      expect(frames).toHaveLength(2)
      expect(readAnswer(frames[0]!)).toEqual({ ok: true, value: { type: "json", json } })
      // what was copied in joins: about the answer once, where joining at every chunk copied it 64 times over
      const copied = concat.mock.calls.reduce((sum, [list]) => sum + list.reduce((n, b) => n + b.length, 0), 0)
      expect(copied).toBeLessThan(2 * stream.length)
    } finally {
      concat.mockRestore()
    }
  })
})
