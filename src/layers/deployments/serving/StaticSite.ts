/**
 * Serves a static site's request from content storage (spec §4.8 "Static sites"): the path's
 * file, a directory's `index.html`, and for any other unknown path the site's `/index.html` (so a
 * single-page app's client-side routes load), with the type its extension says,
 * `Cache-Control: public, max-age=3600`, the file's CID as its ETag, HEAD, one byte range, and
 * 304 for a matching `If-None-Match`.
 *
 * A site's manifest (SiteManifest.ts) is read once and kept by its CID: a CID never changes, so
 * the cache needs no invalidation, only a bound.
 */
import { Effect, Either } from "effect"
import { LRUCache } from "lru-cache"
import type * as http from "node:http"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { resolveRange } from "../../../domain/ByteRange.js"
import { Code } from "../../../domain/Errors.js"
import type { StorageService } from "../../storage/Storage.js"
import { answerRefusal, methodNotAllowed, siteNotActive, type AppRefusal } from "./AppAnswers.js"
import type { AppTarget } from "./AppHosts.js"
import { contentTypeOf } from "./ContentTypes.js"
import { readManifest, type SiteFile, type SiteManifest } from "./SiteManifest.js"

export const SITE_CACHE_CONTROL = "public, max-age=3600"

/** Manifests kept: the sites a node serves most, each a few KB to a few MB. */
const MANIFESTS_KEPT = 256
/**
 * And at most this many bytes of them (as stored; parsed, a manifest takes a few times its text),
 * so tenants with large sites cannot make the cache hold 256 manifests of 8 MiB.
 */
const MANIFEST_CACHE_BYTES = 64 * 1024 * 1024

/** The file a site path names, `index.html` for a directory, else the SPA fallback; undefined when even that is missing. */
export const pickFile = (manifest: SiteManifest, urlPath: string): { readonly path: string; readonly file: SiteFile } | undefined => {
  const files = manifest.files
  const clean = sitePath(urlPath)
  if (clean !== undefined) {
    const candidates = clean === "" ? ["index.html"] : [clean, `${clean}/index.html`]
    for (const candidate of candidates) {
      const file = files.get(candidate)
      if (file !== undefined) return { path: candidate, file }
    }
  }
  const index = files.get("index.html")
  return index === undefined ? undefined : { path: "index.html", file: index }
}

/**
 * The site path of a request path: percent-decoded, without empty segments or `.`; undefined for
 * one that does not decode or climbs with `..` (those get the fallback, never a file outside).
 */
export const sitePath = (urlPath: string): string | undefined => {
  let decoded: string
  try {
    decoded = decodeURIComponent(urlPath)
  } catch {
    return undefined
  }
  if (decoded.includes("\0")) return undefined
  const segments: Array<string> = []
  for (const segment of decoded.split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") return undefined
    segments.push(segment)
  }
  return segments.join("/")
}

const etagMatches = (header: string | undefined, etag: string): boolean =>
  header !== undefined && (header.trim() === "*" || header.split(",").some((t) => t.trim().replace(/^W\//, "") === etag))

const unreadable = (name: string): AppRefusal => ({
  code: Code.UNAVAILABLE,
  error: `the site ${name} could not be read from content storage`,
  hint: "retry shortly",
  retryAfterSeconds: 2
})

export const makeStaticSites = (storage: StorageService) => {
  const manifests = new LRUCache<string, SiteManifest>({
    max: MANIFESTS_KEPT,
    maxSize: MANIFEST_CACHE_BYTES,
    sizeCalculation: (manifest) => Math.max(1, manifest.bytes)
  })
  /** Reads in flight, so concurrent requests for a site not yet cached read its manifest once. */
  const reading = new Map<string, Promise<SiteManifest>>()

  /** The manifest of `app`, read once per CID; a failed read is not kept, so the next request tries again. */
  const manifestOf = (app: AppTarget): Promise<SiteManifest> => {
    const key = `${app.namespace}\n${app.artifact}`
    const cached = manifests.get(key)
    if (cached !== undefined) return Promise.resolve(cached)
    const inFlight = reading.get(key)
    if (inFlight !== undefined) return inFlight
    // the refusal itself is thrown (not Effect's wrapper), so `serve` can read its code
    const read = Effect.runPromise(Effect.either(readManifest(storage, app.namespace, app.artifact))).then((result) => {
      if (Either.isLeft(result)) throw result.left
      manifests.set(key, result.right)
      return result.right
    })
    reading.set(key, read)
    const done = () => void reading.delete(key)
    read.then(done, done)
    return read
  }

  const serve = async (req: http.IncomingMessage, res: http.ServerResponse, app: AppTarget): Promise<void> => {
    const method = req.method ?? "GET"
    if (app.status !== "active") return answerRefusal(res, siteNotActive(app.name), method)
    if (method !== "GET" && method !== "HEAD") return answerRefusal(res, methodNotAllowed, method)
    let manifest: SiteManifest
    try {
      manifest = await manifestOf(app)
    } catch (e) {
      // the manifest is gone (the deployment deleted meanwhile) or the store is down
      const missing = typeof e === "object" && e !== null && "code" in e && e.code === Code.NOT_FOUND
      return answerRefusal(res, missing ? siteNotActive(app.name) : unreadable(app.name), method)
    }
    const url = req.url ?? "/"
    const q = url.indexOf("?")
    const picked = pickFile(manifest, q < 0 ? url : url.slice(0, q))
    if (picked === undefined) {
      return answerRefusal(res, { code: Code.NOT_FOUND, error: "no such file, and the site has no /index.html" }, method)
    }
    const { file } = picked
    const etag = `"${file.cid}"`
    const headers: Record<string, string> = {
      "content-type": contentTypeOf(picked.path),
      "cache-control": SITE_CACHE_CONTROL,
      etag,
      "accept-ranges": "bytes",
      "x-content-type-options": "nosniff"
    }
    if (etagMatches(req.headers["if-none-match"], etag)) {
      res.writeHead(304, headers)
      res.end()
      return
    }
    const ifRange = req.headers["if-range"] as string | undefined
    const range = resolveRange(ifRange === undefined || ifRange.trim() === etag ? req.headers["range"] : undefined, file.size)
    if (range.kind === "unsatisfiable") {
      return answerRefusal(
        res,
        { code: Code.RANGE_NOT_SATISFIABLE, error: "the range is outside the file", hint: `the file is ${file.size} bytes`, headers: { "content-range": `bytes */${file.size}` } },
        method
      )
    }
    const [start, end] = range.kind === "partial" ? [range.start, range.end] : [0, file.size - 1]
    const length = Math.max(0, end - start + 1)
    if (range.kind === "partial") headers["content-range"] = `bytes ${start}-${end}/${file.size}`
    headers["content-length"] = String(length)
    res.writeHead(range.kind === "partial" ? 206 : 200, headers)
    if (method === "HEAD" || length === 0) {
      res.end()
      return
    }
    // back-pressure: the store is read only as fast as the client takes the bytes; a read that
    // fails midway (the blocks evicted) cuts the response, whose length then does not add up
    await pipeline(Readable.from(storage.read(file.cid, start, length), { objectMode: false }), res).catch(() => res.destroy())
  }

  return {
    serve: (req: http.IncomingMessage, res: http.ServerResponse, app: AppTarget): void => {
      serve(req, res, app).catch(() => answerRefusal(res, unreadable(app.name), req.method))
    }
  }
}

export type StaticSites = ReturnType<typeof makeStaticSites>
