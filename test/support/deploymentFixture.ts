/**
 * What the deployment serving suites share: a registry on either engine, the deployment store
 * over it from the test process (records seeded as the routes would write them), a gateway on
 * that data directory, and the apps it cannot resume at start set active again.
 *
 * The suites run their own app servers on the records' ports, so the gateway finds no instance
 * of them, logs "not resumed" and records them `failed`; its host table reads that within 5 s.
 * `startSeededGateway` waits for that write (it follows the log line) and sets them `active`
 * again, so no test depends on finishing before the table's next read.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type PorticoSettings, testSettings } from "../../src/layers/config/PorticoConfig.js"
import type { DeploymentRecord } from "../../src/layers/deployments/DeploymentRecord.js"
import { type DeploymentStoreService, makeDeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { type Gateway, startGateway, testTmp } from "./gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "./rqlited.js"
import { waitFor } from "./wait.js"

export interface DeploymentFixture {
  readonly dataDir: string
  readonly settings: PorticoSettings
  /** Runs `use` over the deployment store of the fixture's registry, from the test process. */
  readonly inRegistry: <A>(use: (deployments: DeploymentStoreService) => Effect.Effect<A, unknown>) => Promise<A>
  readonly stop: () => Promise<void>
}

/** A data directory and registry (`rqlite`: a real rqlited of its own); app ports from a random part of the range. */
export const deploymentFixture = async (engine: "sqlite" | "rqlite", options: { readonly baseDomain: string; readonly nodeId: string }): Promise<DeploymentFixture> => {
  let rqlited: RqlitedServer | undefined
  if (engine === "rqlite") {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    rqlited = await Effect.runPromise(startRqlited())
  }
  const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-deployments-"))
  const registry: PorticoSettings["registry"] =
    rqlited === undefined ? { engine: "sqlite", file: path.join(dataDir, "registry.db") } : { engine: "rqlite", url: rqlited.url, user: undefined, password: undefined }
  const settings = testSettings(dataDir, { baseDomain: options.baseDomain, nodeId: options.nodeId, registry })
  // a random part of the app range, so parallel runs rarely meet on a port
  const first = 10200 + Math.floor(Math.random() * 9000)
  const inRegistry = <A>(use: (deployments: DeploymentStoreService) => Effect.Effect<A, unknown>) =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          return yield* use(makeDeploymentStore(yield* RegistryStore, yield* Sealer, { ports: { first, last: first + 50 } }))
        }).pipe(Effect.provide(servicesLayer(settings, { sqliteWorkers: "in-process" })))
      )
    )
  return {
    dataDir,
    settings,
    inRegistry,
    stop: async () => {
      if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
    }
  }
}

/** A gateway on the fixture's data directory; `unresumed` (dynamic apps seeded active) are active again when it answers. */
export const startSeededGateway = async (
  fixture: DeploymentFixture,
  unresumed: ReadonlyArray<DeploymentRecord>,
  env: Readonly<Record<string, string>> = {}
): Promise<Gateway> => {
  const registry = fixture.settings.registry
  const gw = await startGateway({
    dataDir: fixture.dataDir,
    env: {
      PORTICO_BASE_DOMAIN: fixture.settings.baseDomain,
      PORTICO_NODE_ID: fixture.settings.nodeId,
      ...(registry.engine === "rqlite" ? { PORTICO_RQLITE_URL: registry.url } : {}),
      ...env
    }
  })
  for (const record of unresumed) {
    await waitFor(`the gateway's resume of ${record.name}`, async () => {
      const found = await fixture.inRegistry((deployments) => deployments.byId(record.namespace, record.id))
      return found._tag === "Some" && found.value.status === "failed"
    }, 20_000)
    await fixture.inRegistry((deployments) => deployments.setStatus(record.namespace, record.id, "active"))
  }
  return gw
}

/** A deployment upload's multipart form: its fields, then the archive (when given) as `fileName`. */
export const deployForm = (fields: Record<string, string>, archive?: Buffer, fileName = "app.tar.gz"): FormData => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  if (archive !== undefined) form.append("archive", new Blob([archive]), fileName)
  return form
}
