/**
 * A static site's manifest (docs/deployments.md "Serving", "Static sites"): the paths a tenant's
 * archive holds are keys of a Map, never members of an object's prototype; a site whose manifest
 * serving could not read is refused before any of its files is stored.
 */
import { Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { ContentIndex } from "../../../src/layers/storage/ContentIndex.js"
import { parseManifest, readManifest, storeSiteDirectory } from "../../../src/layers/deployments/serving/SiteManifest.js"
import { pickFile } from "../../../src/layers/deployments/serving/StaticSite.js"
import { Storage } from "../../../src/layers/storage/Storage.js"

const file = (cid: string, size = 1) => ({ cid, size })

describe("site manifests", () => {
  it("reads every path as a key, __proto__ and constructor included", () => {
    const text = JSON.stringify({ portico_site: 1, files: Object.fromEntries([["__proto__", file("bafyproto")], ["index.html", file("bafyindex")]]) })
    const manifest = Either.getOrThrow(parseManifest(text))
    expect([...manifest.files.keys()]).toEqual(["__proto__", "index.html"])
    expect(pickFile(manifest, "/__proto__")).toEqual({ path: "__proto__", file: file("bafyproto") })
    for (const member of ["/constructor", "/toString", "/valueOf", "/hasOwnProperty"]) {
      expect(pickFile(manifest, member)).toEqual({ path: "index.html", file: file("bafyindex") })
    }
  })

  it("refuses a document that is not a manifest", () => {
    for (const text of ["nope", "[]", '{"portico_site":2,"files":{}}', '{"portico_site":1,"files":[]}', '{"portico_site":1,"files":{"a":{"cid":"x","size":-1}}}', '{"portico_site":1,"files":{"a":{"cid":1,"size":1}}}']) {
      expect(Either.isLeft(parseManifest(text))).toBe(true)
    }
  })

  it("stores a site and reads its manifest back, a file named __proto__ included", async () => {
    const site = fs.mkdtempSync(path.join(os.tmpdir(), "portico-site-"))
    fs.writeFileSync(path.join(site, "index.html"), "<h1>home</h1>")
    fs.writeFileSync(path.join(site, "__proto__"), "proto")
    const manifest = await Effect.runPromise(
      Effect.gen(function* () {
        const storage = yield* Storage
        const stored = yield* storeSiteDirectory(storage, "shop", "blog", site)
        expect(stored.files).toBe(2)
        return yield* readManifest(storage, "shop", stored.cid)
      }).pipe(Effect.provide(Storage.Test))
    )
    expect([...manifest.files.keys()].sort()).toEqual(["__proto__", "index.html"])
    expect(manifest.files.get("__proto__")?.size).toBe(5)
    fs.rmSync(site, { recursive: true, force: true })
  })

  it("refuses a site whose manifest would pass 8 MiB before storing any file", async () => {
    const site = fs.mkdtempSync(path.join(os.tmpdir(), "portico-site-"))
    // 40,000 files with 100-character names: about 9.6 MiB of manifest
    const dir = path.join(site, "d")
    fs.mkdirSync(dir)
    for (let i = 0; i < 40_000; i++) fs.writeFileSync(path.join(dir, `${String(i).padStart(6, "0")}${"x".repeat(94)}`), "")
    const small = fs.mkdtempSync(path.join(os.tmpdir(), "portico-site-"))
    fs.writeFileSync(path.join(small, "index.html"), "<h1>home</h1>")
    const outcome = await Effect.runPromise(
      Effect.gen(function* () {
        const storage = yield* Storage
        const index = yield* ContentIndex
        // what the namespace holds before: one small site, so the usage read is shown to see stores
        yield* storeSiteDirectory(storage, "shop", "small", small)
        const before = yield* index.usage("shop")
        const refused = yield* Effect.flip(storeSiteDirectory(storage, "shop", "blog", site))
        return { refused, before, after: yield* index.usage("shop") }
      }).pipe(Effect.provide(Layer.merge(Storage.Test, ContentIndex.Test)))
    )
    expect(outcome.refused.code).toBe("PAYLOAD_TOO_LARGE")
    expect(outcome.refused.reason).toContain("40000 files")
    expect(outcome.before).toBeGreaterThan(0)
    expect(outcome.after).toBe(outcome.before)
    fs.rmSync(small, { recursive: true, force: true })
    fs.rmSync(site, { recursive: true, force: true })
  }, 60_000)
})
