import { describe, expect, it } from "vitest"
import type { Delivery, HistoryAnswer, Position } from "../../../src/layers/pubsub/PubSubEngine.js"
import { TopicFeed } from "../../../src/layers/pubsub/TopicFeed.js"

const d = (offset: number, epoch = "e1"): Delivery => ({ topic: "t", offset, epoch, frame: JSON.stringify({ offset, epoch }) })

/** A feed over a fake history holding `kept`; what it sends, as `offset@epoch` or `gap:<reason>`. */
const harness = (start: Position, kept: ReadonlyArray<Delivery>, head: Position | null = { epoch: "e1", offset: kept.at(-1)?.offset ?? 0 }) => {
  const sent: Array<string> = []
  let asked = 0
  const feed = new TopicFeed("t", start, {
    send: (frame) => {
      const f = JSON.parse(frame.toString()) as { offset: number; epoch: string; type?: string; reason?: string }
      sent.push(f.type === "gap" ? `gap:${f.reason}` : `${f.offset}@${f.epoch}`)
    },
    history: async (after): Promise<HistoryAnswer | undefined> => {
      asked++
      if (head === null) return undefined
      if (after.epoch !== head.epoch || after.offset > head.offset) return { complete: false, position: head }
      const deliveries = kept.filter((k) => k.epoch === after.epoch && k.offset > after.offset)
      const next = deliveries[0]?.offset ?? head.offset + 1
      return next === after.offset + 1 ? { complete: true, deliveries, position: head } : { complete: false, position: head }
    }
  })
  return { feed, sent, asked: () => asked }
}

const settle = () => new Promise((r) => setTimeout(r, 5))

describe("a socket's feed of one topic", () => {
  it("queues until open, then sends in order, skipping what it has sent", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 0 }, [])
    feed.deliver(d(1))
    feed.deliver(d(2))
    expect(sent).toEqual([])
    feed.open(false)
    feed.deliver(d(2))
    feed.deliver(d(3))
    expect(sent).toEqual(["1@e1", "2@e1", "3@e1"])
  })

  it("fills a hole from history before sending anything newer", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 0 }, [d(1), d(2), d(3), d(4)])
    feed.open(false)
    feed.deliver(d(1))
    feed.deliver(d(4))
    feed.deliver(d(5))
    await settle()
    expect(sent).toEqual(["1@e1", "2@e1", "3@e1", "4@e1", "5@e1"])
  })

  it("resumes from a point: history first, then what arrived meanwhile, nothing twice", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 6 }, [d(3), d(4), d(5), d(6)])
    feed.resumeFrom({ epoch: "e1", offset: 3 })
    feed.deliver(d(6))
    feed.deliver(d(7))
    feed.open(true)
    await settle()
    expect(sent).toEqual(["4@e1", "5@e1", "6@e1", "7@e1"])
  })

  it("tells a gap history cannot fill, then goes on from the first message it can give", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 10 }, [d(8), d(9), d(10)])
    feed.resumeFrom({ epoch: "e1", offset: 2 })
    feed.deliver(d(11))
    feed.open(true)
    await settle()
    expect(sent).toEqual(["gap:history-exceeded", "11@e1"])
  })

  it("tells a new epoch as a gap, and takes the new sequence from its first message", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 4 }, [d(1, "e2")], { epoch: "e2", offset: 1 })
    feed.open(false)
    feed.deliver(d(1, "e2"))
    feed.deliver(d(2, "e2"))
    await settle()
    expect(sent).toEqual(["gap:epoch-changed", "1@e2", "2@e2"])
  })

  it("says so when the engine does not answer history, and does not stall", async () => {
    const { feed, sent } = harness({ epoch: "e1", offset: 1 }, [], null)
    feed.open(false)
    feed.deliver(d(5))
    feed.deliver(d(6))
    await settle()
    expect(sent).toEqual(["gap:engine-interrupted", "5@e1", "6@e1"])
    feed.interrupted()
    expect(sent.at(-1)).toBe("gap:engine-interrupted")
  })
})
