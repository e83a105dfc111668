/** The bytes between the gateway and a SQLite worker: frames cut right wherever a chunk ends. */
import { describe, expect, it } from "vitest"
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
})
