import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { unavailable } from "../../domain/Errors.js"
import { Health, type HealthService } from "../../layers/health/Health.js"
import { NodeHeartbeat } from "../../layers/cluster/NodeHeartbeat.js"
import { KeyRing } from "../../layers/tokens/KeyRing.js"
import { RegistryStore } from "../../layers/registry/RegistryStore.js"
import { migrations } from "../../layers/registry/migrations.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"
import type { PublicJwk } from "../groups/SystemGroup.js"

/** What this gateway serves, by route family (docs/api.md): clients may use it to detect features. */
const CAPABILITIES = [
  "namespaces",
  "members",
  "keys",
  "audit",
  "rate-limit",
  "sign-in",
  "devices",
  "cache",
  "sqlite",
  "rqlite",
  "storage",
  "fetch-caps",
  "push",
  "deployments",
  "proxy",
  "pubsub",
  "functions",
  "vault",
  "webrtc"
] as const

/** Whether an Accept header asks for HTML: a `text/html` range (any case) with a q above zero. */
export const wantsHtml = (accept: string): boolean =>
  accept.split(",").some((range) => {
    const [type = "", ...params] = range.split(";").map((p) => p.trim().toLowerCase())
    if (type !== "text/html") return false
    const q = params.find((p) => p.startsWith("q="))
    return q === undefined || Number(q.slice(2)) > 0
  })

const statusOf = (health: HealthService) =>
  Effect.map(health.cached, (report) => {
    const now = Date.now()
    return {
      status: report.status,
      service: "portico" as const,
      version: health.version,
      api: "v1" as const,
      started_at: toUnixSeconds(health.startedAt),
      uptime_seconds: Math.max(0, Math.floor((now - health.startedAt) / 1000)),
      capabilities: [...CAPABILITIES]
    }
  })

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

export const SystemHandlers = HttpApiBuilder.group(PorticoApi, "system", (handlers) =>
  Effect.gen(function* () {
    const health = yield* Health
    const heartbeat = yield* NodeHeartbeat
    // a draining node answers its health with 503, so a load balancer stops sending it clients
    const nodeHealth = Effect.gen(function* () {
      const report = yield* health.check
      return (yield* heartbeat.draining) ? HttpServerResponse.unsafeJson({ ...report, status: "draining" }, { status: 503 }) : report
    })
    const ring = yield* KeyRing
    const store = yield* RegistryStore
    const jwks = Effect.map(ring.jwks, (set) => ({ keys: set.keys as ReadonlyArray<typeof PublicJwk.Type> }))
    return handlers
      .handle("health", () => nodeHealth)
      .handle("healthV1", () => nodeHealth)
      .handle("status", () => statusOf(health))
      .handle("statusPage", () =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const status = yield* statusOf(health)
          // A browser asks for HTML; every other client gets the JSON of /v1/status. The answer
          // depends on Accept, so a shared cache must key on it.
          const vary = { vary: "Accept" }
          if (!wantsHtml(request.headers["accept"] ?? "")) return HttpServerResponse.unsafeJson(status, { headers: vary })
          const rows = Object.entries(status)
            .map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(Array.isArray(v) ? v.join(", ") : String(v))}</td></tr>`)
            .join("")
          return HttpServerResponse.html(
            `<!doctype html><html><head><meta charset="utf-8"><title>Portico status</title></head>` +
              `<body><h1>Portico: ${escapeHtml(status.status)}</h1><table>${rows}</table></body></html>`
          ).pipe(HttpServerResponse.setHeaders(vary))
        })
      )
      .handle("version", () => Effect.succeed({ version: health.version, api: "v1" as const }))
      .handle("schemaStatus", () =>
        Effect.gen(function* () {
          const applied = yield* Effect.mapError(store.migrations, () => unavailable("registry unavailable"))
          const latest = migrations[migrations.length - 1]?.name ?? ""
          return {
            engine: store.engine,
            status: applied.includes(latest) ? ("current" as const) : ("behind" as const),
            applied: [...applied],
            latest
          }
        })
      )
      .handle("jwks", () => jwks)
      .handle("wellKnownJwks", () => jwks)
  })
)
