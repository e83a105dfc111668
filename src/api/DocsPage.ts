/**
 * `/v1/docs`: the Scalar API reference over the gateway's own OpenAPI document, rendered with no
 * network (the document and Scalar's browser bundle are inlined, as HttpApiScalar.layer does).
 *
 * Scalar's bundle is a 3 MB string constant; held from start, with the page built around it, it
 * kept about 12 MiB of heap alive in every gateway, and V8 sizes its growth during bursts from the
 * live heap. So the bundle is imported on the first request to the page, and the page is built per
 * request (a few milliseconds; a docs page is not a hot route) rather than kept.
 *
 * The bundle lives in @effect/platform's internal module, which HttpApiScalar imports and the
 * package's exports map does not list; it is loaded by its file next to HttpApiScalar's, and
 * test/e2e/foundation.test.ts proves the page still renders.
 */
import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { gatewayDocument } from "./OpenApiRoute.js"

const require = createRequire(import.meta.url)

/** Scalar's browser bundle, imported once, on first use. */
let bundle: Promise<string> | undefined
const scalarBundle = () =>
  (bundle ??= (async () => {
    const scalar = require.resolve("@effect/platform/HttpApiScalar")
    const internal = path.join(path.dirname(scalar), "internal", "httpApiScalar.js")
    const loaded = (await import(pathToFileURL(internal).href)) as { readonly javascript: string }
    return loaded.javascript
  })())

/** JSON inside a <script>: `<` and the JS line terminators escaped, as @effect/platform does. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))

const escapeText = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const titleOf = (document: Record<string, unknown>) => {
  const info = document.info
  return typeof info === "object" && info !== null && "title" in info && typeof info.title === "string" ? info.title : "API"
}

const page = (document: Record<string, unknown>, javascript: string) => `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escapeText(titleOf(document))}</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" type="application/json">
      ${scriptJson(document)}
    </script>
    <script>
      document.getElementById('api-reference').dataset.configuration = JSON.stringify(${scriptJson({ _integration: "html" })})
    </script>
    <script>${javascript}</script>
  </body>
</html>`

/**
 * Registers the page at `path`, over the same document the OpenAPI route serves, built on the
 * page's first request and kept (as the OpenAPI route does: not a cost of every start).
 */
export const docsRoute = (path: `/${string}`) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function* () {
      const context = yield* Effect.context<HttpApi.Api | RateLimiter>()
      const document = yield* Effect.cached(Effect.provide(gatewayDocument, context))
      yield* router.get(
        path,
        Effect.flatMap(document, (built) =>
          Effect.map(
            Effect.promise(() => scalarBundle()),
            (javascript) => HttpServerResponse.html(page(built, javascript))
          )
        )
      )
    })
  )
