/**
 * The instance-collision rule on real directories: a claim makes and marks `<namespace>-<name>`;
 * another deployment whose instance name is the same (`a-b`/`c` and `a`/`b-c`) is
 * INSTANCE_COLLISION and the directory stays the first one's; an unmarked directory is adopted
 * only by the one deployment of this node it is named after (read from the registry, both engines).
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer, TestServices } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { makeDeploymentStore, type NewDeployment } from "../../../src/layers/deployments/DeploymentStore.js"
import { instanceName, makeInstanceDirs, OWNER_MARKER } from "../../../src/layers/deployments/InstanceDirs.js"
import { RegistryStore, type StoreError } from "../../../src/layers/registry/RegistryStore.js"
import { RqliteRegistryStore } from "../../../src/layers/registry/RqliteRegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

type Provision = Effect.Effect<Layer.Layer<RegistryStore, StoreError>, unknown, Scope.Scope>

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(tmpdir(), "portico-instances-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const sqlite: Provision = Effect.map(tempDir, (dir) => SqliteRegistryStore.layer({ filename: registryDbPath(dir) }))
const rqlite: Provision = Effect.map(rqlited(), (server) => RqliteRegistryStore.layer({ url: server.url, timeout: Duration.seconds(5) }))

const NODE = "node-a"

const fixture = (provision: Provision) =>
  Effect.gen(function* () {
    const layer = yield* TestServices.provideLive(provision)
    const registry = Context.get(yield* TestServices.provideLive(Layer.build(layer)), RegistryStore)
    const deployments = makeDeploymentStore(registry, makeSealer(new Uint8Array(32).fill(1)))
    const root = path.join(yield* tempDir, "deployments")
    const dirs = makeInstanceDirs(root, (instance) =>
      Effect.map(deployments.onNode(NODE), (records) => records.filter((r) => instanceName(r.namespace, r.name) === instance).map((r) => r.id))
    )
    const create = (namespace: string, name: string, patch: Partial<NewDeployment> = {}) =>
      deployments.create({ namespace, name, type: "static", domain: `${namespace}.${name}.test`, homeNode: NODE, artifact: "bafy", ...patch })
    return { root, dirs, deployments, create }
  })

const codeOf = <A>(result: Either.Either<A, { readonly _tag: string }>) =>
  Either.isLeft(result) ? ((result.left as unknown as { code?: string }).code ?? result.left._tag) : "ok"

const suite = (engine: string, provision: Provision) =>
  describe(`InstanceDirs with the registry on ${engine}`, () => {
    it.scoped("claim makes and marks the directory; the owner claims it again; another deployment of the same instance name is refused and never gets it", () =>
      Effect.gen(function* () {
        const { root, dirs, create } = yield* fixture(provision)
        const first = yield* create("a-b", "c")
        const claimed = yield* dirs.claim(first)
        expect(claimed).toEqual({ dir: path.join(root, "a-b-c"), how: "created" })
        const marker = JSON.parse(fs.readFileSync(path.join(root, "a-b-c", OWNER_MARKER), "utf8"))
        expect(marker).toEqual({ deployment_id: first.id, namespace: "a-b", name: "c" })
        expect(fs.statSync(path.join(root, "a-b-c", OWNER_MARKER)).mode & 0o777).toBe(0o600)
        expect((yield* dirs.claim(first)).how).toBe("owned")

        // another namespace and name, same `<namespace>-<name>`: a collision, nothing changed
        const second = yield* create("a", "b-c")
        fs.writeFileSync(path.join(root, "a-b-c", "index.html"), "first's")
        expect(codeOf(yield* Effect.either(dirs.claim(second)))).toBe("INSTANCE_COLLISION")
        expect(dirs.ownerOf("a-b-c")).toBe(first.id)
        // its release does not remove the other's directory
        expect(yield* dirs.release(second)).toBe(false)
        expect(fs.readFileSync(path.join(root, "a-b-c", "index.html"), "utf8")).toBe("first's")

        // the owner's release removes it; then the other may claim a fresh one
        expect(yield* dirs.release(first)).toBe(true)
        expect(fs.existsSync(path.join(root, "a-b-c"))).toBe(false)
        expect((yield* dirs.claim(second)).how).toBe("created")
        expect(dirs.ownerOf("a-b-c")).toBe(second.id)
      })
    )

    it.scoped("an unmarked directory is adopted only by the one deployment of this node named after it", () =>
      Effect.gen(function* () {
        const { root, dirs, deployments, create } = yield* fixture(provision)
        const blog = yield* create("shop", "blog")
        fs.mkdirSync(path.join(root, "shop-blog"), { recursive: true })
        expect(yield* dirs.claim(blog)).toEqual({ dir: path.join(root, "shop-blog"), how: "adopted" })
        expect(dirs.ownerOf("shop-blog")).toBe(blog.id)

        // two deployments of this node are named `x-y-z`: neither adopts the unmarked directory
        const one = yield* create("x-y", "z")
        const two = yield* create("x", "y-z")
        fs.mkdirSync(path.join(root, "x-y-z"))
        expect(codeOf(yield* Effect.either(dirs.claim(one)))).toBe("INSTANCE_COLLISION")
        expect(codeOf(yield* Effect.either(dirs.claim(two)))).toBe("INSTANCE_COLLISION")
        expect(fs.existsSync(path.join(root, "x-y-z", OWNER_MARKER))).toBe(false)

        // a deployment whose home is another node is not this node's to adopt for
        const away = yield* create("far", "app", { homeNode: "node-b" })
        fs.mkdirSync(path.join(root, "far-app"))
        expect(codeOf(yield* Effect.either(dirs.claim(away)))).toBe("INSTANCE_COLLISION")

        // an owner marker that does not read is nobody's: refused, left in place
        const odd = yield* create("odd", "one")
        fs.mkdirSync(path.join(root, "odd-one"))
        fs.writeFileSync(path.join(root, "odd-one", OWNER_MARKER), "not json")
        expect(codeOf(yield* Effect.either(dirs.claim(odd)))).toBe("INSTANCE_COLLISION")
        expect(fs.readFileSync(path.join(root, "odd-one", OWNER_MARKER), "utf8")).toBe("not json")

        // a file in the directory's place is refused too
        const file = yield* create("plain", "file")
        fs.writeFileSync(path.join(root, "plain-file"), "")
        expect(codeOf(yield* Effect.either(dirs.claim(file)))).toBe("INSTANCE_COLLISION")
        expect(yield* deployments.remove("shop", blog.id)).toBe(true)
      })
    )

    it.scoped("concurrent claims of one instance name by two deployments: exactly one wins", () =>
      Effect.gen(function* () {
        const { dirs, create } = yield* fixture(provision)
        const one = yield* create("p-q", "r")
        const two = yield* create("p", "q-r")
        const results = yield* Effect.forEach([one, two, one, two], (owner) => Effect.either(dirs.claim(owner)), { concurrency: "unbounded" })
        const winner = dirs.ownerOf("p-q-r")
        expect([one.id, two.id]).toContain(winner)
        results.forEach((result, i) => {
          const claimant = [one, two, one, two][i]!
          expect(codeOf(result)).toBe(claimant.id === winner ? "ok" : "INSTANCE_COLLISION")
        })
      })
    )
  })

suite("sqlite", sqlite)

if (hasRqlited()) suite("rqlite", rqlite)
else
  describe("InstanceDirs with the registry on rqlite", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
