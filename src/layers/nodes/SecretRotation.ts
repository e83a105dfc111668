/**
 * Root-secret rotation (docs/cluster.md, "Root-secret rotation"): an operator's rotate-secrets
 * makes generation n + 1 on a node at generation n, writes it to the registry sealed under n
 * (`cluster_secrets`, once: two operators racing rotate once), adopts it, and pushes it to every
 * live peer (`/v1/internal/secrets/reencrypt`). A node takes a pushed generation past its own by
 * the registry's chain (or the pushed root when it is the next one), refuses an older one (409),
 * and reads the chain every heartbeat (and as its sealer is built), so a node that was down
 * catches up when it returns. Values sealed before stay readable; the cluster worker re-seals them (secrets/Reseal.ts).
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import { Membership } from "../cluster/Membership.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { catchUp, newestInRegistry, rootOwner } from "../secrets/RootChain.js"
import { Sealer } from "../secrets/Sealer.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

const PUSH_TIMEOUT = Duration.seconds(10)

export interface Rotated {
  readonly generation: number
  /** The live peers that took it now; the others catch up from the registry. */
  readonly reached: ReadonlyArray<string>
  readonly unreached: ReadonlyArray<string>
}

export interface SecretRotationService {
  /** Makes, records, adopts and pushes the next generation; 409 when this node is behind the registry's newest. */
  readonly rotate: (actor: string) => Effect.Effect<Rotated, Refused<"CONFLICT" | "UNAVAILABLE"> | StoreError>
  /** A generation pushed by a peer: taken when newer, a no-op when held, 409 when older than this node's. */
  readonly receive: (generation: number, sealedRoot: string) => Effect.Effect<number, Refused<"CONFLICT" | "UNAVAILABLE"> | StoreError>
}

export class SecretRotation extends Context.Tag("portico/SecretRotation")<SecretRotation, SecretRotationService>() {
  static readonly Live = Layer.scoped(
    SecretRotation,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const sealer = yield* Sealer
      const membership = yield* Membership
      const audit = yield* OperatorAudit
      const client = internalClient(yield* Coordination)

      /** The registry's chain adopted; a root that does not open or cannot be kept is 503. */
      const caughtUp = Effect.catchTag(catchUp(store, sealer), "SealError", (e) =>
        Effect.zipRight(
          Effect.logError(`a root generation from the registry could not be taken: ${e.detail}`),
          Effect.fail(refuse("UNAVAILABLE", "this node could not take the cluster's newest root secret", "see this node's log"))
        )
      )

      const push = (generation: number, sealedRoot: string) =>
        Effect.flatMap(membership.peers, (peers) =>
          Effect.forEach(
            peers,
            (peer) =>
              client.call(peer.id, "secretsReencrypt", { generation, sealed_root: sealedRoot }, PUSH_TIMEOUT).pipe(
                Effect.map((answer) => (answer.status === 200 ? undefined : `answered ${answer.status}`)),
                Effect.catchAll((e) => Effect.succeed(e.detail)),
                Effect.tap((why) => (why === undefined ? Effect.void : Effect.logWarning(`node ${peer.id} did not take root generation ${generation} now (${why}); it catches up from the registry`))),
                Effect.map((why) => [peer.id, why === undefined] as const)
              ),
            { concurrency: 8 }
          )
        )

      const rotate = (actor: string) =>
        Effect.gen(function* () {
          const held = yield* caughtUp
          if ((yield* newestInRegistry(store)) > held) {
            return yield* refuse("CONFLICT", "this node is not on the cluster's newest root generation yet", "retry in a few seconds")
          }
          const generation = held + 1
          const root = randomBytes(32)
          // sealed under generation `held`, the newest this node seals with
          const sealedRoot = sealer.seal("root-secret", rootOwner(generation), root)
          // the row and its audit entry in one batch: a generation made by another rotation leaves neither
          const audited = yield* audit.statement({ actor, action: "secrets.rotate", target: String(generation), detail: { generation } }, { sql: "changes() > 0", params: [] })
          const [written] = yield* store.batch([
            {
              sql: "INSERT INTO cluster_secrets (generation, sealed_root, created_at, created_by) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
              params: [generation, sealedRoot, Date.now(), actor]
            },
            audited
          ])
          if (written?.rowsAffected !== 1) return yield* refuse("CONFLICT", `root generation ${generation} was made by another rotation`, "check the operator audit; rotate again only if you mean to")
          yield* Effect.catchTag(sealer.adopt(generation, root), "SealError", (e) =>
            Effect.zipRight(
              Effect.logError(`root generation ${generation} is in the registry but this node could not keep it: ${e.detail}`),
              Effect.fail(refuse("UNAVAILABLE", "the new root secret could not be kept on this node", "see this node's log; it takes the generation from the registry at its next heartbeat"))
            )
          )
          const pushed = yield* push(generation, sealedRoot)
          return { generation, reached: pushed.filter(([, ok]) => ok).map(([id]) => id), unreached: pushed.filter(([, ok]) => !ok).map(([id]) => id) }
        })

      const receive = (generation: number, sealedRoot: string) =>
        Effect.gen(function* () {
          const before = sealer.generation()
          if (generation < before) return yield* refuse("CONFLICT", `root generation ${generation} is older than this node's (${before})`)
          if (generation === before) return before
          const held = yield* caughtUp
          if (held >= generation) return held
          if (generation !== held + 1) return yield* refuse("CONFLICT", `root generation ${generation} does not follow this node's (${held}) and the registry does not hold the ones between`)
          const root = yield* Effect.mapError(sealer.open("root-secret", rootOwner(generation), sealedRoot), () =>
            refuse("CONFLICT", `root generation ${generation} does not open under this node's generation ${held}`)
          )
          yield* Effect.mapError(sealer.adopt(generation, root), () => refuse("UNAVAILABLE", "the root secret could not be kept on this node", "retry shortly"))
          yield* Effect.logInfo(`adopted root secret generation ${generation}, pushed by a peer`)
          return generation
        })

      // every heartbeat: the generations this node missed a push of (those made while it was away
      // were read as its sealer was built, secrets/RootChain.ts `sealerCaughtUp`)
      const round = Effect.catchAll(catchUp(store, sealer), (e) => Effect.logWarning(`root generations not read from the registry: ${e.detail}`))
      yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(Duration.millis(config.membership.heartbeatMs))))
      return SecretRotation.of({ rotate, receive })
    })
  )

  /** Over its collaborators' test doubles. */
  static readonly Test = Layer.suspend(() =>
    SecretRotation.Live.pipe(
      Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test, Sealer.Test, Membership.Test, OperatorAudit.Test, Coordination.Test))
    )
  )
}
