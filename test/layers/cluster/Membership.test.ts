/**
 * Membership's liveness (docs/cluster.md, "Membership"): a node is stale when its heartbeat is
 * more than the TTL behind the freshest one, not behind the registry's clock, so a registry that
 * took no heartbeat for a while (electing a leader) does not make every other node read inactive;
 * and what `nodes` read is what `addressNow` answers from then on.
 */
import { Effect, Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Membership, REGISTRY_NOW } from "../../../src/layers/cluster/Membership.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"

const dir = () => mkdtempSync(path.join(tmpdir(), "portico-membership-"))
const layer = () => {
  const data = dir()
  const store = SqliteRegistryStore.layer({ filename: path.join(data, "registry.db") })
  return Membership.Live.pipe(Layer.provideMerge(Layer.merge(store, PorticoConfig.layer(testSettings(data, { nodeId: "node-a" })))))
}

/** Rows for `ages` (node id → how long ago its last heartbeat was, in ms, by the registry's clock). */
const seen = (ages: Record<string, number>) =>
  Effect.gen(function* () {
    const store = yield* RegistryStore
    for (const [id, ago] of Object.entries(ages)) {
      yield* store.exec({
        sql: `INSERT INTO cluster_nodes (id, public_key, internal_url, public_url, version, joined_at, last_seen)
              VALUES (?, ?, ?, '', 'test', ${REGISTRY_NOW} - ?, ${REGISTRY_NOW} - ?)`,
        params: [id, `key-${id}`, `http://127.0.0.1:1/${id}`, ago, ago]
      })
    }
  })

const statuses = Effect.map(
  Effect.flatMap(Membership, (m) => m.nodes),
  (nodes) => Object.fromEntries(nodes.map((n) => [n.id, n.status]))
)

describe("membership liveness", () => {
  it("keeps every node active when no heartbeat landed for longer than the TTL (a registry electing), and marks the one behind the others", async () => {
    const program = Effect.gen(function* () {
      const ttl = (yield* PorticoConfig).membership.nodeTtlMs
      // every heartbeat, this node's own too, stopped 2 TTLs ago; node-c's 4 TTLs ago
      yield* seen({ "node-a": 2 * ttl, "node-b": 2 * ttl + 150, "node-c": 4 * ttl })
      expect(yield* statuses).toEqual({ "node-a": "active", "node-b": "active", "node-c": "inactive" })
      const node = (yield* Membership.pipe(Effect.flatMap((m) => m.nodes))).find((n) => n.id === "node-b")!
      // age_ms stays the age by the registry's clock
      expect(node.ageMs).toBeGreaterThanOrEqual(2 * ttl)
    })
    await Effect.runPromise(Effect.scoped(Effect.provide(program, layer())))
  })

  it("answers addressNow from the read `nodes` made: a node found active there is not called down", async () => {
    const program = Effect.gen(function* () {
      const ttl = (yield* PorticoConfig).membership.nodeTtlMs
      const membership = yield* Membership
      yield* seen({ "node-a": 0, "node-b": 3 * ttl })
      // the address cache is filled while node-b is stale
      yield* membership.urlOf("node-b")
      expect(membership.addressNow("node-b")?.down).toBe("inactive")
      // node-b's heartbeat lands; a fresh read of the nodes sees it, and so does the address
      yield* Effect.flatMap(RegistryStore, (store) => store.exec({ sql: `UPDATE cluster_nodes SET last_seen = ${REGISTRY_NOW} WHERE id = 'node-b'` }))
      expect((yield* statuses)["node-b"]).toBe("active")
      expect(membership.addressNow("node-b")).toEqual({ url: "http://127.0.0.1:1/node-b", down: undefined })
    })
    await Effect.runPromise(Effect.scoped(Effect.provide(program, layer())))
  })
})
