/**
 * The typed client is for applications, so what it imports must not pull the server: its whole
 * import closure (type-only imports included, a TypeScript user compiles them) is `effect`,
 * `@effect/platform` and modules under src/domain and src/api that are the API's definition,
 * never src/layers, the handlers, the node adapter or a node: builtin. The domain's own checks
 * use two pure-JavaScript libraries that also run in a browser: @noble (a wallet's EIP-55
 * checksum) and multiformats (a CID's form); any other package is a decision to make here.
 * The gateway's own closure is held to one rule too: @effect/platform by module, never its index.
 */
import { existsSync, readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const src = path.resolve(import.meta.dirname, "../../src")

const specifiers = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*["']([^"']+)["']|(?:^|\n)\s*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g)) {
    found.push(match[1] ?? match[2] ?? match[3] ?? "")
  }
  return found
}

/** Every module reached from `entry`: relative ones as paths under src/, bare ones as written. */
const closure = (entry: string) => {
  const local = new Set<string>()
  const bare = new Set<string>()
  const visit = (file: string) => {
    const rel = path.relative(src, file)
    if (local.has(rel)) return
    local.add(rel)
    for (const spec of specifiers(file)) {
      if (!spec.startsWith(".")) {
        bare.add(spec)
        continue
      }
      const target = path.resolve(path.dirname(file), spec).replace(/\.js$/, ".ts")
      if (!existsSync(target)) throw new Error(`${rel} imports ${spec}, which is not a file`)
      visit(target)
    }
  }
  visit(entry)
  return { local: [...local].sort(), bare: [...bare].sort() }
}

describe("src/client.ts imports", () => {
  const { local, bare } = closure(path.join(src, "client.ts"))

  it("finds the API definition in its closure (the walk works)", () => {
    expect(local).toEqual(expect.arrayContaining(["client.ts", "api/Api.ts", "api/groups/StorageGroup.ts", "domain/Names.ts"]))
  })

  it("reaches no server module", () => {
    const server = local.filter(
      (file) => !/^(client\.ts|domain\/|api\/)/.test(file) || /^api\/(handlers|node)\//.test(file) || /^api\/(Gateway|NodeAdapter|FastLane|Authentication)\.ts$/.test(file)
    )
    expect(server).toEqual([])
  })

  it("needs no package but effect, @effect/platform and the domain's pure libraries, and no node: builtin", () => {
    const allowed = /^(effect|@effect\/platform|@noble\/curves|@noble\/hashes|multiformats)(\/|$)/
    expect(bare.filter((spec) => !allowed.test(spec))).toEqual([])
  })
})

describe("the gateway's imports", () => {
  // The @effect/platform index evaluates every module it re-exports, HttpApiSwagger's 2 MB bundle
  // among them, in every gateway; /v1/docs imports Scalar's bundle itself, on first request.
  const { local, bare } = closure(path.join(src, "main.ts"))

  it("reach the whole server (the walk works)", () => {
    expect(local).toEqual(expect.arrayContaining(["main.ts", "api/Gateway.ts", "api/DocsPage.ts"]))
  })

  it("name @effect/platform's modules, never its index or a docs bundle", () => {
    expect(bare.filter((spec) => spec === "@effect/platform" || /HttpApi(Swagger|Scalar)$/.test(spec))).toEqual([])
  })
})
