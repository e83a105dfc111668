/**
 * The PubSubEngine contract, run unchanged against every engine: offsets in publish order,
 * delivery to every subscriber once and in order, a subscription that sees everything published
 * after it resolved, history after a position (and the gap it cannot fill), live topics sorted
 * and scoped by namespace, presence entries joined by member with join and leave events, expiry of
 * a crashed gateway's entries, a namespace's deletion.
 *
 * Each harness provisions a fresh engine (`history`: 5 messages, 60 s) in the test's scope; an
 * engine shared by gateways (Redis) is provisioned twice over one server as `pair`, so the suite
 * checks what one gateway publishes reaches the other's subscribers in the same order.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Scope } from "effect"
import { type Delivery, PubSubEngine, type PubSubEngineService } from "../../../src/layers/pubsub/PubSubEngine.js"

export interface PubSubEngineHarness {
  /** Two engines over one shared state (for the embedded engine, the same engine twice). */
  readonly pair: Effect.Effect<readonly [Layer.Layer<PubSubEngine, unknown>, Layer.Layer<PubSubEngine, unknown>], unknown, Scope.Scope>
}

const build = (layer: Layer.Layer<PubSubEngine, unknown>) => Effect.map(Layer.build(layer), (c) => Context.get(c, PubSubEngine))

const engines = (harness: PubSubEngineHarness): Effect.Effect<readonly [PubSubEngineService, PubSubEngineService], unknown, Scope.Scope> =>
  Effect.flatMap(harness.pair, ([a, b]) => Effect.all([build(a), build(b)]))

const message = (n: number) => `"type":"message","data":"${Buffer.from(`m${n}`).toString("base64")}"`

/** A listener that keeps what it is given. */
const collector = () => {
  const got: Array<Delivery> = []
  const interruptions: Array<string> = []
  return { got, interruptions, listener: { deliver: (d: Delivery) => void got.push(d), interrupted: (detail: string) => void interruptions.push(detail) } }
}

/** Waits in real time until `check` holds (an engine on another connection delivers later); dies after `ms`. */
export const waitFor = (check: () => boolean, ms = 5000) =>
  Effect.gen(function* () {
    const until = Date.now() + ms
    while (!check()) {
      if (Date.now() > until) return yield* Effect.dieMessage("timed out waiting")
      yield* Effect.sleep("5 millis")
    }
  })

const frameOf = (d: Delivery) => JSON.parse(d.frame) as Record<string, unknown>

export const pubSubEngineSuite = (name: string, harness: PubSubEngineHarness): void => {
  describe(name, () => {
    it.scopedLive("delivers every message in publish order, from either gateway, with the frame's members", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const onA = collector()
        const onB = collector()
        const subA = yield* a.subscribe("ns", "room", onA.listener)
        yield* b.subscribe("ns", "room", onB.listener)
        expect(subA.position.offset).toBe(0)
        const positions = []
        for (let n = 1; n <= 20; n++) positions.push(yield* (n % 2 === 0 ? a : b).publish("ns", "room", message(n), 1_700_000_000_000 + n))
        expect(positions.map((p) => p.offset)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
        expect(new Set(positions.map((p) => p.epoch)).size).toBe(1)
        yield* waitFor(() => onA.got.length === 20 && onB.got.length === 20)
        for (const got of [onA.got, onB.got]) {
          expect(got.map((d) => d.offset)).toEqual(positions.map((p) => p.offset))
          const first = frameOf(got[0]!)
          expect(first).toEqual({
            topic: "room",
            offset: 1,
            epoch: positions[0]!.epoch,
            timestamp: 1_700_000_000_001,
            type: "message",
            data: Buffer.from("m1").toString("base64")
          })
        }
      })
    )

    it.scopedLive("a subscription sees what is published after it resolved, and its position says where the topic stood", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        yield* a.publish("ns", "t", message(1), 1)
        yield* a.publish("ns", "t", message(2), 2)
        const late = collector()
        const sub = yield* b.subscribe("ns", "t", late.listener)
        expect(sub.position.offset).toBe(2)
        yield* a.publish("ns", "t", message(3), 3)
        yield* waitFor(() => late.got.length === 1)
        expect(late.got[0]!.offset).toBe(3)
        sub.close()
        yield* a.publish("ns", "t", message(4), 4)
        yield* Effect.sleep("50 millis")
        expect(late.got.length).toBe(1)
      })
    )

    it.scopedLive("history answers the messages after a position, and says when it cannot fill the gap", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        let last = { epoch: "", offset: 0 }
        for (let n = 1; n <= 8; n++) last = yield* a.publish("ns", "h", message(n), n)
        // the suite's engines keep 5 messages: 4..8
        const fromFive = yield* b.history("ns", "h", { epoch: last.epoch, offset: 5 })
        expect(fromFive.complete).toBe(true)
        if (fromFive.complete) expect(fromFive.deliveries.map((d) => d.offset)).toEqual([6, 7, 8])
        const upToDate = yield* b.history("ns", "h", { epoch: last.epoch, offset: 8 })
        expect(upToDate.complete && upToDate.deliveries.length === 0).toBe(true)
        const fromThree = yield* b.history("ns", "h", { epoch: last.epoch, offset: 3 })
        expect(fromThree.complete).toBe(true)
        const tooOld = yield* b.history("ns", "h", { epoch: last.epoch, offset: 2 })
        expect(tooOld).toEqual({ complete: false, position: last })
        const otherEpoch = yield* b.history("ns", "h", { epoch: "elsewhere", offset: 7 })
        expect(otherEpoch.complete).toBe(false)
        const ahead = yield* b.history("ns", "h", { epoch: last.epoch, offset: 9 })
        expect(ahead.complete).toBe(false)
      })
    )

    it.scopedLive("lists the namespace's topics with a subscriber, sorted, never another namespace's", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const c = collector()
        const zebra = yield* a.subscribe("acme", "zebra", c.listener)
        yield* b.subscribe("acme", "alpha/1", c.listener)
        yield* a.subscribe("acme", "alpha", c.listener)
        yield* b.subscribe("other", "secret", c.listener)
        yield* a.publish("acme", "published-only", message(1), 1)
        expect(yield* b.topics("acme")).toEqual(["alpha", "alpha/1", "zebra"])
        zebra.close()
        yield* Effect.sleep("50 millis")
        expect(yield* a.topics("acme")).toEqual(["alpha", "alpha/1"])
        expect(yield* a.topics("other")).toEqual(["secret"])
        expect(yield* a.topics("nobody")).toEqual([])
      })
    )

    it.scopedLive("presence: one entry per connection, listed by member, join and leave events on the topic", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const watcher = collector()
        yield* a.subscribe("ns", "lobby", watcher.listener)
        const later = Date.now() + 60_000
        const entry = (connection: string, memberId: string, joinedAt: number, meta?: string) => ({
          connection,
          memberId,
          subject: `0xsubject-${memberId}`,
          joinedAt,
          meta
        })
        yield* a.join("ns", "lobby", entry("c1", "alice", 10, '{"colour":"red"}'), later)
        yield* b.join("ns", "lobby", entry("c2", "alice", 20), later)
        yield* b.join("ns", "lobby", entry("c3", "bob", 30), later)
        const members = yield* a.presence("ns", "lobby")
        expect(members).toEqual([
          { memberId: "alice", subject: "0xsubject-alice", joinedAt: 10, meta: '{"colour":"red"}', connections: 2 },
          { memberId: "bob", subject: "0xsubject-bob", joinedAt: 30, meta: undefined, connections: 1 }
        ])
        yield* a.leave("ns", "lobby", "c1")
        yield* b.leave("ns", "lobby", "c2")
        yield* b.leave("ns", "lobby", "c2")
        yield* waitFor(() => watcher.got.length === 3)
        const events = watcher.got.map(frameOf).map((f) => [f["type"], f["event"], (f["member"] as { member_id: string }).member_id])
        expect(events).toEqual([
          ["presence", "join", "alice"],
          ["presence", "join", "bob"],
          ["presence", "leave", "alice"]
        ])
        expect(frameOf(watcher.got[0]!)["member"]).toEqual({ member_id: "alice", subject: "0xsubject-alice", joined_at: 10, meta: { colour: "red" } })
        expect((yield* b.presence("ns", "lobby")).map((m) => m.memberId)).toEqual(["bob"])
        expect(yield* b.presence("ns", "nobody-here")).toEqual([])
      })
    )

    it.scopedLive("an entry not refreshed expires, with its leave event; a refreshed one stays", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const watcher = collector()
        yield* b.subscribe("ns", "p", watcher.listener)
        const soon = Date.now() + 300
        yield* a.join("ns", "p", { connection: "crashed", memberId: "gone", subject: "s", joinedAt: 1, meta: undefined }, soon)
        const alive = { connection: "alive", memberId: "here", subject: "s", joinedAt: 2, meta: undefined }
        yield* a.join("ns", "p", alive, soon)
        yield* a.refresh("ns", [{ topic: "p", entry: alive }], Date.now() + 60_000)
        yield* Effect.sleep("400 millis")
        expect((yield* b.presence("ns", "p")).map((m) => m.memberId)).toEqual(["here"])
        yield* waitFor(() => watcher.got.length === 3)
        const last = frameOf(watcher.got[2]!)
        expect([last["event"], (last["member"] as { member_id: string }).member_id]).toEqual(["leave", "gone"])
      })
    )

    it.scopedLive("a refresh enters again a live connection whose entry expired meanwhile, with its join event", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const watcher = collector()
        yield* b.subscribe("ns", "stall", watcher.listener)
        const entry = { connection: "c", memberId: "stalled", subject: "s", joinedAt: 1, meta: undefined }
        yield* a.join("ns", "stall", entry, Date.now() + 200)
        yield* Effect.sleep("300 millis")
        expect(yield* b.presence("ns", "stall")).toEqual([])
        yield* a.refresh("ns", [{ topic: "stall", entry }], Date.now() + 60_000)
        expect((yield* b.presence("ns", "stall")).map((m) => m.memberId)).toEqual(["stalled"])
        yield* waitFor(() => watcher.got.length === 3)
        expect(watcher.got.map((d) => frameOf(d)["event"])).toEqual(["join", "leave", "join"])
      })
    )

    it.scopedLive("a namespace's deletion drops its history and presence, and no other namespace's", () =>
      Effect.gen(function* () {
        const [a, b] = yield* engines(harness)
        const kept = yield* a.publish("keep", "t", message(1), 1)
        const gone = yield* a.publish("drop", "t", message(1), 1)
        yield* a.join("drop", "t", { connection: "c", memberId: "m", subject: "s", joinedAt: 1, meta: undefined }, Date.now() + 60_000)
        yield* b.dropNamespace("drop")
        expect((yield* a.history("keep", "t", { epoch: kept.epoch, offset: 0 })).complete).toBe(true)
        expect((yield* a.history("drop", "t", { epoch: gone.epoch, offset: 0 })).complete).toBe(false)
        expect(yield* a.presence("drop", "t")).toEqual([])
        yield* a.ping
        yield* b.ping
      })
    )
  })
}
