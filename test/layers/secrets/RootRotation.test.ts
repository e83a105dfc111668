/**
 * Root-secret rotation without processes (docs/cluster.md, "Root-secret rotation"): two nodes'
 * sealers over one registry, the chain read by the one behind, the coordination MAC across a
 * generation, and the re-seal of the registry's sealed columns.
 */
import { Effect, Exit, Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Membership } from "../../../src/layers/cluster/Membership.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { Coordination } from "../../../src/layers/coordination/Coordination.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { resealAll } from "../../../src/layers/secrets/Reseal.js"
import { catchUp, rootOwner } from "../../../src/layers/secrets/RootChain.js"
import { makeSealer, Sealer } from "../../../src/layers/secrets/Sealer.js"

const root0 = new Uint8Array(32).fill(5)
const root1 = new Uint8Array(32).fill(6)
const QUERY = "/v1/internal/sqlite/query"

/** Node `nodeId`'s coordination over `sealer` and the shared `store`. */
const coordinationOf = (nodeId: string, sealer: ReturnType<typeof makeSealer>, store: Layer.Layer<RegistryStore>) =>
  Coordination.Live.pipe(
    Layer.provide(Membership.Live),
    Layer.provide(Layer.mergeAll(Layer.succeed(Sealer, sealer), store, PorticoConfig.layer(testSettings(mkdtempSync(path.join(tmpdir(), "portico-rot-")), { nodeId }))))
  )

/** Generation 1 made on `sealer` and written to the registry as rotate-secrets does. */
const rotate = (sealer: ReturnType<typeof makeSealer>) =>
  Effect.gen(function* () {
    const store = yield* RegistryStore
    const sealed = sealer.seal("root-secret", rootOwner(1), root1)
    yield* store.exec({ sql: "INSERT INTO cluster_secrets (generation, sealed_root, created_at, created_by) VALUES (1, ?, 0, 'test')", params: [sealed] })
    yield* sealer.adopt(1, root1)
  })

describe("root-secret rotation", () => {
  it("a node behind reads the chain, and a MAC under the new generation makes it catch up", async () => {
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const registry = yield* RegistryStore
          const shared = Layer.succeed(RegistryStore, registry)
          const a = makeSealer(root0)
          const b = makeSealer(root0)
          const coordA = yield* Layer.build(coordinationOf("node-a", a, shared)).pipe(Effect.map((ctx) => ctx.unsafeMap.get(Coordination.key) as Coordination["Type"]))
          const coordB = yield* Layer.build(coordinationOf("node-b", b, shared)).pipe(Effect.map((ctx) => ctx.unsafeMap.get(Coordination.key) as Coordination["Type"]))
          yield* rotate(a).pipe(Effect.provide(shared))
          const sealedByA = a.seal("function-secret", "acme/f/K", new TextEncoder().encode("v"))
          expect(Exit.isFailure(yield* Effect.exit(b.open("function-secret", "acme/f/K", sealedByA)))).toBe(true)
          // a's call to b, signed under generation 1: b catches up and accepts it
          const body = JSON.stringify({ query: "SELECT 1" })
          const headers = yield* coordA.sign("node-b", "POST", QUERY, body)
          expect(yield* coordB.verify("POST", QUERY, body, headers, "127.0.0.1", false)).toBeUndefined()
          expect(b.generation()).toBe(1)
          expect(new TextDecoder().decode(yield* b.open("function-secret", "acme/f/K", sealedByA))).toBe("v")
          // a node still signing under generation 0 is accepted by one on generation 1 (the one before)
          const late = makeSealer(root0)
          const coordLate = yield* Layer.build(coordinationOf("node-c", late, shared)).pipe(Effect.map((ctx) => ctx.unsafeMap.get(Coordination.key) as Coordination["Type"]))
          const fromLate = yield* coordLate.sign("node-a", "POST", QUERY, body)
          expect(yield* coordA.verify("POST", QUERY, body, fromLate, "127.0.0.1", false)).toBeUndefined()
          // and the chain alone brings it up to date
          expect(yield* catchUp(registry, late)).toBe(1)
        }).pipe(Effect.provide(SqliteRegistryStore.Test))
      )
    )
  })

  it("re-seals every value under an older generation by compare-and-swap, and leaves one that does not open", async () => {
    await Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* RegistryStore
        const sealer = makeSealer(root0)
        const credential = sealer.seal("push-credentials", "acme/push_config", new TextEncoder().encode("{}"))
        const invite = sealer.seal("node-invite", "inv1", new TextEncoder().encode("token"))
        yield* store.exec({ sql: "INSERT INTO push_credentials (namespace, provider, sealed, updated_at, updated_by) VALUES ('acme', 'push_config', ?, 0, 'x')", params: [credential] })
        yield* store.exec({ sql: "INSERT INTO push_credentials (namespace, provider, sealed, updated_at, updated_by) VALUES ('acme', 'ios_push', 'v1.damaged', 0, 'x')", params: [] })
        yield* store.exec({
          sql: "INSERT INTO node_invites (id, token_sealed, node_id, created_by, created_at, expires_at) VALUES ('inv1', ?, NULL, 'x', 0, 0)",
          params: [invite]
        })
        expect(yield* resealAll(store, sealer)).toEqual({ resealed: 0, skipped: 0 })
        yield* sealer.adopt(1, root1)
        expect(yield* resealAll(store, sealer, 1)).toEqual({ resealed: 2, skipped: 1 })
        const [row] = yield* store.query({ sql: "SELECT sealed FROM push_credentials WHERE provider = 'push_config'", params: [] })
        expect(String(row?.sealed)).toMatch(/^v2\.1\./)
        expect(new TextDecoder().decode(yield* sealer.open("push-credentials", "acme/push_config", String(row?.sealed)))).toBe("{}")
        const [token] = yield* store.query({ sql: "SELECT token_sealed FROM node_invites", params: [] })
        expect(new TextDecoder().decode(yield* sealer.open("node-invite", "inv1", String(token?.token_sealed)))).toBe("token")
        const [damaged] = yield* store.query({ sql: "SELECT sealed FROM push_credentials WHERE provider = 'ios_push'", params: [] })
        expect(damaged?.sealed).toBe("v1.damaged")
        // a second pass has nothing left but the damaged one
        expect(yield* resealAll(store, sealer)).toEqual({ resealed: 0, skipped: 1 })
      }).pipe(Effect.provide(SqliteRegistryStore.Test))
    )
  })
})
