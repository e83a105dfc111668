/**
 * Replica rows (migration 25; docs/deployments.md, "Replicas") on the SQLite registry: a replica's
 * port comes from one set with the homes' ports of its node, a failed setup gives its port back,
 * a delete owes a teardown by each replica node, the orphan sweep stops only what the registry
 * gives this node no more, and the host routing's rules for where an app answers.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { makeDeploymentStore } from "../../../src/layers/deployments/DeploymentStore.js"
import { makeReplicaRows } from "../../../src/layers/deployments/replicas/ReplicaRows.js"
import { makeOrphanSweep } from "../../../src/layers/deployments/replicas/OrphanSweep.js"
import type { AppRuntimeService } from "../../../src/layers/deployments/runtime/AppRuntime.js"
import type { AppTarget } from "../../../src/layers/deployments/serving/AppHosts.js"
import { localPort, runningElsewhere } from "../../../src/layers/deployments/serving/HostRouting.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"

const fixture = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-replica-rows-"))),
    (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
  )
  const store = Context.get(yield* Layer.build(SqliteRegistryStore.layer({ filename: registryDbPath(dir) })), RegistryStore)
  const ports = { first: 10200, last: 10202 }
  const deployments = makeDeploymentStore(store, makeSealer(new Uint8Array(32).fill(5)), { ports })
  return { store, deployments, rows: makeReplicaRows(store), ports }
})

const app = (name: string, homeNode: string) => ({
  namespace: "shop",
  name,
  type: "nodejs" as const,
  domain: `${name}-abc123.portico.test`,
  homeNode,
  artifact: "versions/1"
})

describe("replica rows", () => {
  it.scoped("take ports from one set with the homes of their node, and give a failed setup's back", () =>
    Effect.gen(function* () {
      const { deployments, rows, ports } = yield* fixture
      const homed = yield* deployments.create(app("here", "node-b"))
      expect(homed.port).toBe(10200)
      const elsewhere = yield* deployments.create(app("there", "node-a"))
      // node-b's 10200 is its own app's: the replica of node-a's app takes the next
      expect(yield* rows.claimPort(elsewhere.id, "node-b", ports)).toBe(10201)
      // claimed again, the same port
      expect(yield* rows.claimPort(elsewhere.id, "node-b", ports)).toBe(10201)
      // and a home's create on node-b skips it
      expect((yield* deployments.create(app("third", "node-b"))).port).toBe(10202)
      // the range is full now
      const fourth = yield* deployments.create(app("fourth", "node-a"))
      expect(yield* rows.claimPort(fourth.id, "node-b", ports)).toBeUndefined()
      // not routed to until active
      expect((yield* rows.of(elsewhere.id))[0]).toMatchObject({ status: "failed", reason: "setting up", port: 10201 })
      yield* rows.markActive(elsewhere.id, "node-b", 1, 7n)
      expect((yield* rows.of(elsewhere.id))[0]).toMatchObject({ status: "active", version: 1, envVersion: 7n, reason: undefined })
      // a failed setup has no port (spec §2.7), which the next claim can take
      yield* rows.markFailed(elsewhere.id, "node-b", "the app did not start", true)
      expect((yield* rows.of(elsewhere.id))[0]).toMatchObject({ status: "failed", port: undefined })
      expect(yield* rows.claimPort(fourth.id, "node-b", ports)).toBe(10201)
    })
  )

  it.scoped("owe a teardown by every replica node when the record goes, and clear it with the row", () =>
    Effect.gen(function* () {
      const { store, deployments, rows, ports } = yield* fixture
      const record = yield* deployments.create(app("api", "node-a"))
      yield* rows.claimPort(record.id, "node-b", ports)
      yield* rows.noteUnreached(record.id, "node-c", "setup: unreachable")
      expect((yield* rows.of(record.id)).map((r) => [r.node, r.status])).toEqual([["node-b", "failed"], ["node-c", "failed"]])
      yield* deployments.remove("shop", record.id)
      expect(yield* rows.of(record.id)).toEqual([])
      const owed = yield* store.query({ sql: "SELECT home_node FROM deployment_teardowns WHERE deployment_id = ? ORDER BY home_node", params: [record.id] })
      expect(owed.map((r) => r["home_node"])).toEqual(["node-b", "node-c"])
      yield* rows.remove(record.id, "node-b")
      const left = yield* store.query({ sql: "SELECT home_node FROM deployment_teardowns WHERE deployment_id = ?", params: [record.id] })
      expect(left.map((r) => r["home_node"])).toEqual(["node-c"])
      // a node the home could not reach gets no row once the record is gone
      yield* rows.noteUnreached(record.id, "node-d", "setup: unreachable")
      expect(yield* rows.of(record.id)).toEqual([])
    })
  )
})

describe("the orphan sweep", () => {
  it.scoped("stops a process the registry gives this node no more, once seen so on two sweeps and at least 10 minutes old, at most 2 a sweep", () =>
    Effect.gen(function* () {
      const { deployments, rows, ports } = yield* fixture
      const homed = yield* deployments.create(app("homed", "node-b"))
      const replicated = yield* deployments.create(app("replicated", "node-a"))
      yield* rows.claimPort(replicated.id, "node-b", ports)
      const old = Date.now() - 11 * 60_000
      const running = [
        { id: homed.id, since: old },
        { id: replicated.id, since: old },
        { id: "dgone1", since: old },
        { id: "dgone2", since: old },
        { id: "dgone3", since: old },
        { id: "dyoung", since: Date.now() }
      ]
      const stopped: Array<string> = []
      const runtime = {
        running: Effect.sync(() => running.filter((u) => !stopped.includes(u.id))),
        stop: (id: string) => Effect.sync(() => void stopped.push(id))
      } as unknown as AppRuntimeService
      const sweep = makeOrphanSweep({ nodeId: "node-b", store: deployments, rows, runtime })
      yield* sweep
      // seen unmatched once: nothing stopped yet
      expect(stopped).toEqual([])
      yield* sweep
      expect(stopped).toEqual(["dgone1", "dgone2"])
      yield* sweep
      expect(stopped).toEqual(["dgone1", "dgone2", "dgone3"])
    })
  )
})

describe("where an app answers", () => {
  const target = (patch: Partial<AppTarget>): AppTarget => ({
    id: "d1",
    namespace: "shop",
    name: "api",
    type: "nodejs",
    status: "active",
    homeNode: "node-a",
    port: 10200,
    artifact: "versions/1",
    replicas: [{ node: "node-b", port: 10301 }],
    ...patch
  })

  it("serves from this node's own instance: the home's port, or the replica's", () => {
    expect(localPort(target({}), "node-a")).toBe(10200)
    expect(localPort(target({}), "node-b")).toBe(10301)
    expect(localPort(target({}), "node-c")).toBeUndefined()
    // a home whose record is not active serves nothing
    expect(localPort(target({ status: "failed" }), "node-a")).toBeUndefined()
  })

  it("relays to the home node first, then the replicas, never to itself", () => {
    expect(runningElsewhere(target({}), "node-c")).toEqual(["node-a", "node-b"])
    expect(runningElsewhere(target({}), "node-b")).toEqual(["node-a"])
    expect(runningElsewhere(target({ status: "stopped" }), "node-c")).toEqual([])
  })
})
