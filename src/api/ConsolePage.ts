/**
 * `/console`: the web console (docs/console.md), a browser app that speaks only the public API
 * through the typed client. Its files are built by scripts/build.mjs into `dist/console/`: the
 * script and the stylesheet named by their content hash, and `manifest.json` naming them. The
 * gateway answers the page itself (the HTML, written here around the manifest's names) and the
 * hashed files; like the docs page (DocsPage.ts) these are router routes beside the API, not API
 * endpoints, so they are not in the OpenAPI document.
 *
 * The script and the stylesheet are answered compressed (brotli, else gzip) when the request's
 * Accept-Encoding allows it, from files the build compressed beside them.
 *
 * Headers: a strict Content-Security-Policy (scripts and styles from this origin only, never
 * inline; connections to this origin only, its WebSockets included), no framing
 * (`frame-ancestors 'none'` and `X-Frame-Options: DENY`); the HTML `no-cache`, so a rebuilt
 * console is picked up at once, and the hashed files `immutable` for a year, since a change gives
 * them a new name.
 *
 * Every other path under `/console/` answers the HTML too: the app routes on the path in the
 * browser (`/console/keys`), so a reloaded or bookmarked page opens where it was, and the app
 * itself says when it knows no such page. A missing file under `/console/assets/` is 404.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import { existsSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Code, envelopeText } from "../domain/Errors.js"

/** Where the built console sits: `dist/console/` of the checkout this module runs from (src/ or dist/bundle/). */
const consoleDir = (): string | undefined => {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const candidate = path.join(dir, "dist", "console")
    if (existsSync(path.join(candidate, "manifest.json"))) return candidate
    const parent = path.dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/** A hashed file: its bytes, its content type, and the same bytes compressed when the build made them. */
interface Asset {
  readonly bytes: Uint8Array
  readonly type: string
  readonly br: Uint8Array | undefined
  readonly gzip: Uint8Array | undefined
}

interface Built {
  readonly html: string
  /** The hashed files by name. */
  readonly assets: ReadonlyMap<string, Asset>
}

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8"
}

const escapeAttribute = (text: string) => text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;")

const page = (script: string, style: string) => `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Portico console</title>
    <link rel="stylesheet" href="/console/assets/${escapeAttribute(style)}" />
    <script type="module" src="/console/assets/${escapeAttribute(script)}"></script>
  </head>
  <body>
    <div id="app"><p class="loading">Loading the console…</p></div>
    <noscript>The Portico console needs JavaScript.</noscript>
  </body>
</html>
`

const read = async (): Promise<Built | undefined> => {
  const dir = consoleDir()
  if (dir === undefined) return undefined
  const manifest = JSON.parse(await fs.readFile(path.join(dir, "manifest.json"), "utf8")) as {
    readonly script: string
    readonly style: string
    readonly files: ReadonlyArray<string>
  }
  const optional = (file: string) => fs.readFile(path.join(dir, file)).catch(() => undefined)
  const assets = new Map<string, Asset>()
  for (const name of manifest.files) {
    assets.set(name, {
      bytes: await fs.readFile(path.join(dir, name)),
      type: TYPES[path.extname(name)] ?? "application/octet-stream",
      br: await optional(`${name}.br`),
      gzip: await optional(`${name}.gz`)
    })
  }
  return { html: page(manifest.script, manifest.style), assets }
}

/**
 * The console's files, read once on the first request and kept: a few hundred KiB. Not found or
 * not readable whole, they are looked for again on the next request (a build may be writing them).
 */
let built: Promise<Built | undefined> | undefined
const load = async (): Promise<Built | undefined> => {
  built ??= read().catch(() => undefined)
  const console = await built
  if (console === undefined) built = undefined
  return console
}

/** The headers every console answer carries. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer"
}

const notBuilt = HttpServerResponse.text(
  envelopeText({
    error: "the console has not been built",
    code: Code.UNAVAILABLE,
    hint: "run `npm run build` (npm start builds it) and restart the gateway"
  }),
  { status: 503, contentType: "application/json", headers: SECURITY_HEADERS }
)

const htmlAnswer = Effect.map(
  Effect.promise(load),
  (console) =>
    console === undefined
      ? notBuilt
      : HttpServerResponse.text(console.html, {
          contentType: "text/html; charset=utf-8",
          headers: { ...SECURITY_HEADERS, "cache-control": "no-cache" }
        })
)

/**
 * The encodings an Accept-Encoding allows (RFC 9110 §12.5.3: a coding listed with q=0 is refused,
 * `*` stands for any not listed); brotli first, as it is the smaller.
 */
export const acceptedEncoding = (header: string | undefined, offered: { readonly br: boolean; readonly gzip: boolean }): "br" | "gzip" | undefined => {
  if (header === undefined) return undefined
  const weights = new Map<string, number>()
  for (const part of header.split(",")) {
    const [coding = "", ...params] = part.trim().toLowerCase().split(";")
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    const weight = q === undefined ? 1 : Number(q.slice(2))
    weights.set(coding.trim(), Number.isFinite(weight) ? weight : 0)
  }
  const allows = (coding: string) => (weights.get(coding) ?? weights.get("*") ?? 0) > 0
  if (offered.br && allows("br")) return "br"
  if (offered.gzip && allows("gzip")) return "gzip"
  return undefined
}

const assetAnswer = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
  Effect.map(Effect.promise(load), (console) => {
    if (console === undefined) return notBuilt
    // the files' names are plain (letters, digits, '-', '.'): an escaped name is no file's
    const name = new URL(request.url, "http://console").pathname.slice("/console/assets/".length)
    const asset = console.assets.get(name)
    if (asset === undefined) {
      return HttpServerResponse.text(envelopeText({ error: "no such console file", code: Code.NOT_FOUND }), {
        status: 404,
        contentType: "application/json",
        headers: SECURITY_HEADERS
      })
    }
    const headers = { ...SECURITY_HEADERS, "cache-control": "public, max-age=31536000, immutable", vary: "accept-encoding" }
    const encoding = acceptedEncoding(request.headers["accept-encoding"], { br: asset.br !== undefined, gzip: asset.gzip !== undefined })
    const bytes = encoding === "br" ? asset.br : encoding === "gzip" ? asset.gzip : undefined
    return bytes === undefined
      ? HttpServerResponse.uint8Array(asset.bytes, { contentType: asset.type, headers })
      : HttpServerResponse.uint8Array(bytes, { contentType: asset.type, headers: { ...headers, "content-encoding": encoding! } })
  })
)

/** Registers the console: its page at `/console` and every path under it, its hashed files under `/console/assets/`. */
export const consoleRoute = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    yield* router.get("/console", htmlAnswer)
    yield* router.get("/console/assets/*", assetAnswer)
    yield* router.get("/console/*", htmlAnswer)
  })
)
