/**
 * The chain of root generations in the registry (docs/cluster.md, "Root-secret rotation"): row n
 * of `cluster_secrets` is generation n's root sealed under generation n - 1's. A node opens the
 * rows past its newest generation in order and adopts each: as the sealer is built (`sealerCaughtUp`,
 * before any service opens what it keeps sealed), every heartbeat (nodes/SecretRotation.ts), and
 * when a peer's MAC is under a generation it does not hold yet (Coordination.ts).
 */
import { Effect, Layer } from "effect"
import type { PorticoConfig } from "../config/PorticoConfig.js"
import { RegistryStore, type RegistryStoreService, type StoreError } from "../registry/RegistryStore.js"
import { type SealError, Sealer, type SealerService } from "./Sealer.js"

/** The owner a generation's sealed root is bound to. */
export const rootOwner = (generation: number) => `generation/${generation}`

/**
 * Adopts every generation the registry holds past this node's newest, in order; answers the
 * newest generation held after. A row that does not open under the one before fails.
 */
export const catchUp = (store: RegistryStoreService, sealer: SealerService): Effect.Effect<number, StoreError | SealError> =>
  Effect.gen(function* () {
    const rows = yield* store.query({
      sql: "SELECT generation, sealed_root FROM cluster_secrets WHERE generation > ? ORDER BY generation",
      params: [sealer.generation()]
    })
    for (const row of rows) {
      const generation = Number(row.generation)
      if (generation <= sealer.generation()) continue
      const root = yield* sealer.open("root-secret", rootOwner(generation), String(row.sealed_root))
      yield* sealer.adopt(generation, root)
      yield* Effect.logInfo(`adopted root secret generation ${generation}`)
    }
    return sealer.generation()
  })

/** The newest generation the registry holds (0: never rotated). */
export const newestInRegistry = (store: RegistryStoreService): Effect.Effect<number, StoreError> =>
  Effect.map(store.query({ sql: "SELECT MAX(generation) AS newest FROM cluster_secrets", params: [] }), ([row]) =>
    row === undefined || row.newest === null || row.newest === undefined ? 0 : Number(row.newest)
  )

/**
 * The sealer of `Sealer.Live`, past the registry's newest generation before any service uses it: a
 * node that was down during a rotation opens values re-sealed meanwhile (the signing keys, read at
 * start). A registry that does not answer now leaves it where it was; the heartbeat tries again.
 */
export const sealerCaughtUp: Layer.Layer<Sealer, SealError, RegistryStore | PorticoConfig> = Layer.effect(
  Sealer,
  Effect.gen(function* () {
    const sealer = yield* Sealer
    const store = yield* RegistryStore
    yield* Effect.catchAll(catchUp(store, sealer), (e) => Effect.logWarning(`root generations not read from the registry at start: ${e.detail}`))
    return sealer
  })
).pipe(Layer.provide(Sealer.Live))
