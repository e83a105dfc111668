/**
 * One template per family (docs/architecture.md "Adding a route family", "Test doubles"): every
 * capability Tag under src/layers has a `Test` layer, and that layer, built on its own with
 * nothing else provided, gives the Tag. The Tags are found by walking the sources, so a new
 * family's Tag without a double fails here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { pathToFileURL } from "node:url"

const root = path.resolve(import.meta.dirname, "../../src/layers")

const sources = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []
  )

interface TagSource {
  readonly name: string
  readonly file: string
  /** Whether the class declares `static readonly Test`. */
  readonly ownTest: boolean
}

/** Every `export class X extends Context.Tag(...)` with whether its body declares a `Test`. */
const tags: ReadonlyArray<TagSource> = sources(root).flatMap((file) => {
  const lines = readFileSync(file, "utf8").split("\n")
  return lines.flatMap((line, at) => {
    const name = /^export class (\w+) extends Context\.Tag\(/.exec(line)?.[1]
    if (name === undefined) return []
    const end = lines.findIndex((l, i) => i > at && l === "}")
    const body = lines.slice(at, end < 0 ? undefined : end + 1)
    return [{ name, file: path.relative(root, file), ownTest: body.some((l) => /^\s+static readonly Test\b/.test(l)) }]
  })
})

/**
 * Tags whose double lives beside another module, each for its stated reason: an engine contract's
 * double is its embedded engine's; the authenticator's and the liveness checks' are in
 * AuthenticatorTest.ts and WorkloadTokens.ts (Sessions imports Authenticator.ts); the relay
 * publisher's is beside its Live layer, as the contract module is the contract alone.
 */
const elsewhere: Readonly<Record<string, readonly [file: string, path: ReadonlyArray<string>]>> = {
  RegistryStore: ["registry/SqliteRegistryStore.ts", ["SqliteRegistryStore", "Test"]],
  CacheStore: ["cache/MemoryCacheStore.ts", ["MemoryCacheStore", "Test"]],
  ContentEngine: ["storage/EmbeddedContentEngine.ts", ["EmbeddedContentEngine", "Test"]],
  Authenticator: ["sessions/AuthenticatorTest.ts", ["AuthenticatorTest"]],
  SessionLiveness: ["sessions/AuthenticatorTest.ts", ["SessionLivenessTest"]],
  WorkloadLiveness: ["workload/WorkloadTokens.ts", ["WorkloadTokens", "LivenessTest"]],
  RelayPublisher: ["push/RelayPublisherLive.ts", ["RelayPublisherTest"]],
  PubSubEngine: ["pubsub/MemoryPubSubEngine.ts", ["MemoryPubSubEngine", "Test"]]
}

const load = async (file: string): Promise<Record<string, unknown>> => import(pathToFileURL(path.join(root, file)).href)

const pick = (from: unknown, at: ReadonlyArray<string>): unknown =>
  at.reduce<unknown>((value, key) => (value === undefined || value === null ? undefined : (value as Record<string, unknown>)[key]), from)

/** The Tag's double: a layer, or (RateLimiter's) a function of options that makes one. */
const doubleOf = async (tag: TagSource): Promise<unknown> => {
  const other = elsewhere[tag.name]
  const found = other === undefined ? pick(await load(tag.file), [tag.name, "Test"]) : pick(await load(other[0]), other[1])
  return typeof found === "function" && !Layer.isLayer(found) ? (found as () => unknown)() : found
}

describe("the template of a family", () => {
  it("finds the capability Tags", () => {
    expect(tags.length).toBeGreaterThanOrEqual(55)
    expect(new Set(tags.map((t) => t.name)).size).toBe(tags.length)
  })

  it("gives every capability Tag a Test layer", () => {
    const missing = tags.filter((t) => !t.ownTest && elsewhere[t.name] === undefined).map((t) => `${t.name} (${t.file})`)
    expect(missing).toEqual([])
    // an exception that no longer has a Tag behind it would hide the next one that does
    expect(Object.keys(elsewhere).filter((name) => !tags.some((t) => t.name === name && !t.ownTest))).toEqual([])
  })

  it.effect(
    "builds each Test layer on its own, nothing else provided, and it gives its Tag",
    () =>
      Effect.gen(function* () {
        const wrong: Array<string> = []
        for (const tag of tags) {
          const module = yield* Effect.promise(() => load(tag.file))
          const key = module[tag.name] as Context.Tag<unknown, unknown>
          const double = yield* Effect.promise(() => doubleOf(tag))
          if (!Layer.isLayer(double)) {
            wrong.push(`${tag.name}: no layer`)
            continue
          }
          const built = yield* Effect.scoped(
            Effect.map(Layer.build(double as Layer.Layer<unknown, unknown, never>), (context) => Context.getOption(context, key))
          ).pipe(Effect.either)
          if (built._tag === "Left") wrong.push(`${tag.name}: failed to build (${String(built.left)})`)
          else if (Option.isNone(built.right)) wrong.push(`${tag.name}: does not give the Tag`)
        }
        expect(wrong).toEqual([])
      }),
    120_000
  )

  it("wires the services in src/layers/Services.ts alone: nothing outside src/layers builds a capability's Live layer", () => {
    const outside = path.resolve(root, "..")
    const files = [...sources(path.join(outside, "api")), ...sources(path.join(outside, "cli")), path.join(outside, "main.ts")]
    const live = new RegExp(`\\b(?:${tags.map((t) => t.name).join("|")})\\.Live\\b`)
    expect(files.filter((file) => live.test(readFileSync(file, "utf8"))).map((f) => path.relative(outside, f))).toEqual([])
  })

  it("reads settings one way: only src/layers/config reads the environment, but for the modules listed here", () => {
    const outside = path.resolve(root, "..")
    /**
     * Modules that still read their own settings where their layer is built, rather than from
     * PorticoConfig. The list may only shrink: moving one into PorticoSettings removes it here.
     */
    const ownReaders: Array<string> = []
    const reads = /\bConfig\.(?:string|integer|number|boolean|option|url|all|nested|withDefault|redacted|duration)\b/
    const readers = sources(outside)
      .filter((file) => !file.startsWith(path.join(root, "config") + path.sep) && reads.test(readFileSync(file, "utf8")))
      .map((file) => path.relative(outside, file))
      .sort()
    expect(readers).toEqual(ownReaders)
  })
})
