/**
 * The services' test doubles (src/layers/TestLayer.ts, a `Test` beside each service): each builds
 * on its own with no process and nothing on the network; built together they share one registry;
 * and makeTestLayer's stand-ins fail loudly on what they were not given.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { Audit } from "../../src/layers/audit/Audit.js"
import { AuthenticatorTest, SessionLivenessTest } from "../../src/layers/sessions/AuthenticatorTest.js"
import { Cache } from "../../src/layers/cache/Cache.js"
import { MemoryCacheStore } from "../../src/layers/cache/MemoryCacheStore.js"
import { PorticoConfig } from "../../src/layers/config/PorticoConfig.js"
import { Coordination } from "../../src/layers/coordination/Coordination.js"
import { Devices } from "../../src/layers/devices/Devices.js"
import { Health } from "../../src/layers/health/Health.js"
import { ApiKeys } from "../../src/layers/keys/ApiKeys.js"
import { CorsOrigins } from "../../src/layers/namespaces/CorsOrigins.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"
import { NamespaceBackups } from "../../src/layers/namespaces/backup/NamespaceBackups.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { SessionPolicy } from "../../src/layers/sessions/SessionPolicy.js"
import { Sessions } from "../../src/layers/sessions/Sessions.js"
import { ClusterSql } from "../../src/layers/sql/ClusterSql.js"
import { ClusterSqlStore } from "../../src/layers/sql/ClusterSqlStore.js"
import { DatabaseBackups } from "../../src/layers/sql/DatabaseBackups.js"
import { LocalDatabases } from "../../src/layers/sql/LocalDatabases.js"
import { SqliteWorkers } from "../../src/layers/sql/SqliteWorkers.js"
import { ContentIndex } from "../../src/layers/storage/ContentIndex.js"
import { EmbeddedContentEngine } from "../../src/layers/storage/EmbeddedContentEngine.js"
import { Evictor } from "../../src/layers/storage/Evictor.js"
import { FetchCaps } from "../../src/layers/storage/FetchCaps.js"
import { Storage } from "../../src/layers/storage/Storage.js"
import { makeTestLayer } from "../../src/layers/TestLayer.js"
import { KeyRing } from "../../src/layers/tokens/KeyRing.js"
import { TransferSlot } from "../../src/layers/transfer/TransferSlot.js"

/** Every capability Tag's double (RateLimiter's is its own helper's; the API layer has none). */
const doubles: ReadonlyArray<readonly [string, Layer.Layer<any, unknown>]> = [
  ["PorticoConfig", PorticoConfig.Test],
  ["Sealer", Sealer.Test],
  ["RegistryStore", SqliteRegistryStore.Test],
  ["Audit", Audit.Test],
  ["ApiKeys", ApiKeys.Test],
  ["KeyRing", KeyRing.Test],
  ["Health", Health.Test],
  ["Coordination", Coordination.Test],
  ["CorsOrigins", CorsOrigins.Test],
  ["Namespaces", Namespaces.Test],
  ["Sessions", Sessions.Test],
  ["SessionLiveness", SessionLivenessTest],
  ["SessionPolicy", SessionPolicy.Test],
  ["Devices", Devices.Test],
  ["Authenticator", AuthenticatorTest],
  ["CacheStore", MemoryCacheStore.Test],
  ["Cache", Cache.Test],
  ["ContentEngine", EmbeddedContentEngine.Test],
  ["ContentIndex", ContentIndex.Test],
  ["Evictor", Evictor.Test],
  ["Storage", Storage.Test],
  ["FetchCaps", FetchCaps.Test],
  ["SqliteWorkers", SqliteWorkers.Test],
  ["ClusterSqlStore", ClusterSqlStore.Test],
  ["TransferSlot", TransferSlot.Test],
  ["LocalDatabases", LocalDatabases.Test],
  ["ClusterSql", ClusterSql.Test],
  ["DatabaseBackups", DatabaseBackups.Test],
  ["NamespaceBackups", NamespaceBackups.Test]
]

describe("test doubles", () => {
  it.scoped("each builds on its own", () =>
    Effect.forEach(doubles, ([name, layer]) =>
      Effect.map(Effect.exit(Effect.scoped(Layer.build(layer))), (exit) => expect([name, Exit.isSuccess(exit) ? "built" : Cause.pretty(exit.cause)]).toEqual([name, "built"]))
    )
  )

  it.layer(Layer.mergeAll(Namespaces.Test, ApiKeys.Test, Audit.Test, SqliteRegistryStore.Test))("built together", (it) => {
    it.effect("share one registry: a namespace made through one is seen by the others", () =>
      Effect.gen(function* () {
        const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("shared", undefined, "test"))
        const keys = yield* Effect.flatMap(ApiKeys, (k) => k.list("shared", { limit: 10, after: undefined }))
        expect(keys.items.map((k) => k.id)).toEqual([created.ownerKey.record.id])
        const audited = yield* Effect.flatMap(Audit, (a) =>
          a.list("shared", { action: undefined, principal: undefined, since: undefined }, { limit: 10, after: undefined })
        )
        expect(audited.items.map((e) => e.action)).toContain("namespace.create")
        const rows = yield* Effect.flatMap(RegistryStore, (s) => s.query({ sql: "SELECT name FROM namespaces", params: [] }))
        expect(rows).toEqual([{ name: "shared" }])
      })
    )
  })

  describe("makeTestLayer", () => {
    const index = makeTestLayer(ContentIndex)({ holds: (_namespace, cid) => Effect.succeed(cid === "yes") })

    it.effect("answers with the members given", () =>
      Effect.gen(function* () {
        const given = yield* ContentIndex
        expect(yield* given.holds("ns", "yes")).toBe(true)
        expect(yield* given.holds("ns", "no")).toBe(false)
      }).pipe(Effect.provide(index))
    )

    it.effect("fails a call of any other member, naming it", () =>
      Effect.gen(function* () {
        const given = yield* ContentIndex
        const exit = yield* Effect.exit(Effect.suspend(() => given.pinName("ns", "cid")))
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause) ? String(Option.getOrUndefined(Cause.dieOption(exit.cause))) : exit).toBe(
          "Error: portico/ContentIndex.pinName is not part of this test double; give it to makeTestLayer"
        )
        // not a thenable, so a promise or an await does not mistake it for one
        expect((given as unknown as { then?: unknown }).then).toBeUndefined()
      }).pipe(Effect.provide(index))
    )
  })
})
