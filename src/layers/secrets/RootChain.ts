/**
 * The chain of root generations in the registry (docs/cluster.md, "Root-secret rotation"): row n
 * of `cluster_secrets` is generation n's root sealed under generation n - 1's. A node opens the
 * rows past its newest generation in order and adopts each (SecretRotation.ts at start and every
 * heartbeat; Coordination.ts when a peer's MAC is under a generation it does not hold yet).
 */
import { Effect } from "effect"
import type { RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import type { SealError, SealerService } from "./Sealer.js"

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
