/**
 * The instance-collision rule (spec §4.8): a deployment lives on its node in the directory
 * `<deployments root>/<namespace>-<name>`, claimed by an owner marker file naming its deployment
 * id. The name is ambiguous on purpose of the spec (`a-b` + `c` and `a` + `b-c` are both
 * `a-b-c`), so the directory, not the registry's (namespace, name) index, decides:
 *
 * - no directory: made and marked; this deployment owns it;
 * - marked for this deployment: its own, used again;
 * - marked for another deployment, or a marker that does not read: INSTANCE_COLLISION (409),
 *   never reused, never removed by this deployment;
 * - a directory without a marker (left by a crash between making and marking it): adopted only by
 *   the deployment it is named after, known on this node from the registry: the one deployment
 *   whose home is this node and whose `<namespace>-<name>` is the directory's name. When none or
 *   more than one such deployment exists, INSTANCE_COLLISION.
 *
 * Claims and releases run one at a time in this process (a node runs one gateway over its data
 * dir), so a directory is never seen between being made and being marked.
 */
import { Context, Data, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { refuse } from "../Refused.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"
import { DeploymentStore } from "./DeploymentStore.js"

/** The marker file's name inside an instance directory. */
export const OWNER_MARKER = ".portico-owner"

export interface InstanceOwner {
  readonly id: string
  readonly namespace: string
  readonly name: string
}

/**
 * `<namespace>-<name>`, the spec's instance name. The deployment rules (src/domain, slice D2)
 * name it too; this is the same rule, kept here so the claim does not wait on that module.
 */
export const instanceName = (namespace: string, name: string): string => `${namespace}-${name}`

export class InstanceDirError extends Data.TaggedError("InstanceDirError")<{ readonly detail: string }> {}

export interface InstanceClaim {
  readonly dir: string
  /** How the claim was won: a new directory, this deployment's own, or an unmarked one adopted. */
  readonly how: "created" | "owned" | "adopted"
}

export interface InstanceDirsService {
  readonly root: string
  /** Claims `<namespace>-<name>` for the deployment, by the rules above. */
  readonly claim: (owner: InstanceOwner) => Effect.Effect<InstanceClaim, DeploymentRefused | InstanceDirError | StoreError>
  /**
   * Removes the directory when its marker names this deployment (delete, or a create that failed
   * after its claim); answers whether it did. Another deployment's directory is left as it is.
   */
  readonly release: (owner: InstanceOwner) => Effect.Effect<boolean, InstanceDirError>
  /** The deployment id a directory's marker names; undefined without a readable marker. */
  readonly ownerOf: (instance: string) => string | undefined
}

const fsError = (what: string) => (e: unknown) => new InstanceDirError({ detail: `${what}: ${e instanceof Error ? e.message : String(e)}` })

const codeOf = (e: unknown): string | undefined => (e instanceof Error && "code" in e ? String(e.code) : undefined)

/**
 * The instance directories under `root`. `namedAfter(instance)`: the ids of the deployments on
 * this node whose instance name is `instance` (the adoption rule's registry read).
 */
export const makeInstanceDirs = (
  root: string,
  namedAfter: (instance: string) => Effect.Effect<ReadonlyArray<string>, StoreError>
): InstanceDirsService => {
  const turn = Effect.unsafeMakeSemaphore(1)

  const ownerOf = (instance: string): string | undefined => {
    try {
      const marker = JSON.parse(fs.readFileSync(path.join(root, instance, OWNER_MARKER), "utf8")) as unknown
      const id = typeof marker === "object" && marker !== null ? (marker as Record<string, unknown>)["deployment_id"] : undefined
      return typeof id === "string" && id.length > 0 ? id : undefined
    } catch {
      return undefined
    }
  }

  /** Marker present at all (readable or not): an unreadable one is nobody's to adopt. */
  const hasMarker = (dir: string) => fs.existsSync(path.join(dir, OWNER_MARKER))

  /** Writes the marker whole: a temporary file renamed into place. */
  const mark = (dir: string, owner: InstanceOwner) =>
    Effect.try({
      try: () => {
        const marker = path.join(dir, OWNER_MARKER)
        const partial = `${marker}.${process.pid}.tmp`
        fs.writeFileSync(partial, JSON.stringify({ deployment_id: owner.id, namespace: owner.namespace, name: owner.name }) + "\n", { mode: 0o600 })
        fs.renameSync(partial, marker)
      },
      catch: fsError(`marking ${dir}`)
    })

  const collision = (instance: string, owner: InstanceOwner, why: string) =>
    refuse(
      "INSTANCE_COLLISION",
      `instance ${instance} on this node ${why}`,
      `${owner.namespace}-${owner.name} is another deployment's directory here; choose another name`
    )

  const claimNow = (owner: InstanceOwner) =>
    Effect.gen(function* () {
      const instance = instanceName(owner.namespace, owner.name)
      const dir = path.join(root, instance)
      yield* Effect.try({ try: () => fs.mkdirSync(root, { recursive: true, mode: 0o711 }), catch: fsError(`making ${root}`) })
      const made = yield* Effect.try({
        try: () => {
          try {
            fs.mkdirSync(dir, { mode: 0o750 })
            return true
          } catch (e) {
            if (codeOf(e) === "EEXIST") return false
            throw e
          }
        },
        catch: fsError(`making ${dir}`)
      })
      if (made) {
        yield* mark(dir, owner)
        return { dir, how: "created" as const }
      }
      if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
        return yield* collision(instance, owner, "is taken by a file that is not a directory")
      }
      if (hasMarker(dir)) {
        const marked = ownerOf(instance)
        if (marked === owner.id) return { dir, how: "owned" as const }
        return yield* collision(instance, owner, marked === undefined ? "has an owner marker that does not read" : "belongs to another deployment")
      }
      const named = yield* namedAfter(instance)
      if (named.length !== 1 || named[0] !== owner.id) {
        return yield* collision(instance, owner, "has no owner marker and is not this deployment's to adopt")
      }
      yield* mark(dir, owner)
      return { dir, how: "adopted" as const }
    })

  const releaseNow = (owner: InstanceOwner) =>
    Effect.gen(function* () {
      const instance = instanceName(owner.namespace, owner.name)
      if (ownerOf(instance) !== owner.id) return false
      yield* Effect.try({ try: () => fs.rmSync(path.join(root, instance), { recursive: true, force: true }), catch: fsError(`removing ${instance}`) })
      return true
    })

  return {
    root,
    claim: (owner) => turn.withPermits(1)(claimNow(owner)),
    release: (owner) => turn.withPermits(1)(releaseNow(owner)),
    ownerOf
  }
}

export class InstanceDirs extends Context.Tag("portico/InstanceDirs")<InstanceDirs, InstanceDirsService>() {
  /** `<dataDir>/deployments`, adoption decided by this node's deployments in the registry. */
  static readonly Live = Layer.effect(
    InstanceDirs,
    Effect.gen(function* () {
      const settings = yield* PorticoConfig
      const store = yield* DeploymentStore
      return makeInstanceDirs(path.join(settings.dataDir, "deployments"), (instance) =>
        Effect.map(store.onNode(settings.nodeId), (records) =>
          records.filter((record) => instanceName(record.namespace, record.name) === instance).map((record) => record.id)
        )
      )
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => InstanceDirs.Live.pipe(Layer.provide(Layer.mergeAll(DeploymentStore.Test, PorticoConfig.Test))))
}
