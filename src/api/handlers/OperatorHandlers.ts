import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Stream } from "effect"
import type { SettingName } from "../../domain/OperatorSettings.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { OperatorAudit } from "../../layers/operators/OperatorAudit.js"
import { OperatorHealth, type AppPort, type OperatorHealthDetail } from "../../layers/operators/OperatorHealth.js"
import { TELEMETRY_INTERVAL_DEFAULT, telemetryEvents } from "../../layers/operators/Telemetry.js"
import { INVITE_MAX_SECONDS, Operators } from "../../layers/operators/Operators.js"
import { SecretRotation } from "../../layers/nodes/SecretRotation.js"
import { PorticoApi } from "../Api.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"

/** The health detail on the wire: what could not be read is null. */
const appView = (a: AppPort) => ({ port: a.port, namespace: a.namespace, deployment: a.deployment, deployment_id: a.deploymentId, status: a.status })

const healthView = ({ hosted, ports, nodes, ...report }: OperatorHealthDetail) => ({
  ...report,
  namespaces: report.namespaces ?? null,
  hosted_namespaces: hosted?.items.map((n) => ({ name: n.name, owner: n.owner ?? null, created_at: toUnixSeconds(n.createdAt) })) ?? null,
  next_cursor: hosted === undefined ? null : nextCursorOf(hosted),
  ports: { gateway: ports.gateway ?? null, app_range: ports.appRange, apps: ports.apps?.map(appView) ?? null },
  nodes:
    nodes?.map((n) => ({ node: n.node, status: n.status, internal_url: n.internalUrl, self: n.self, namespaces: n.namespaces, apps: n.apps.map(appView) })) ?? null
})

export const OperatorHandlers = HttpApiBuilder.group(PorticoApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const ops = yield* Operators
    const audit = yield* OperatorAudit
    const health = yield* OperatorHealth
    const rotation = yield* SecretRotation
    const actor = Effect.map(CurrentPrincipal, (p) => p.subject)
    const read = (name: SettingName) => Effect.map(Effect.mapError(ops.setting(name), refusedOrDown), (value) => ({ name, value }))
    // `value` is the route's decoded value: the text the registry stores
    const write = (name: SettingName, value: string) =>
      Effect.flatMap(actor, (by) => Effect.as(Effect.mapError(ops.set(name, value, by), refusedOrDown), { name, value }))
    return handlers
      .handle("makeInvite", ({ payload }) =>
        Effect.flatMap(actor, (by) =>
          Effect.map(Effect.mapError(ops.invite(by, payload.expiry_seconds ?? INVITE_MAX_SECONDS), refusedOrDown), (i) => ({
            invite: i.token,
            expires_at: toUnixSeconds(i.expiresAt)
          }))
        )
      )
      .handle("redeemInvite", ({ payload }) =>
        Effect.flatMap(actor, (by) => Effect.as(Effect.mapError(ops.redeem(payload.invite, by), refusedOrDown), { wallet: by, operator: true as const }))
      )
      .handle("listOperators", () =>
        Effect.map(Effect.mapError(ops.list, refusedOrDown), (list) => ({
          operators: list.map((o) => ({ wallet: o.wallet, added_at: toUnixSeconds(o.addedAt), added_by: o.addedBy, source: o.source }))
        }))
      )
      .handle("removeOperator", ({ path }) =>
        Effect.flatMap(actor, (by) => Effect.map(Effect.mapError(ops.remove(path.wallet, by), refusedOrDown), (changed) => ({ wallet: path.wallet, changed })))
      )
      .handle("listCreators", () =>
        Effect.map(Effect.mapError(ops.creators, refusedOrDown), (list) => ({
          creators: list.map((c) => ({ wallet: c.wallet, added_at: toUnixSeconds(c.addedAt), added_by: c.addedBy }))
        }))
      )
      .handle("addCreator", ({ payload }) =>
        Effect.flatMap(actor, (by) => Effect.map(Effect.mapError(ops.allowCreator(payload.wallet, by), refusedOrDown), (changed) => ({ wallet: payload.wallet, changed })))
      )
      .handle("removeCreator", ({ path }) =>
        Effect.flatMap(actor, (by) => Effect.map(Effect.mapError(ops.removeCreator(path.wallet, by), refusedOrDown), (changed) => ({ wallet: path.wallet, changed })))
      )
      .handle("getSettings", () => Effect.map(Effect.mapError(ops.settings, refusedOrDown), (settings) => ({ settings })))
      .handle("getNamespaceCreation", () => read("namespace-creation"))
      .handle("putNamespaceCreation", ({ payload }) => write("namespace-creation", payload.value))
      .handle("getMaxNamespacesPerWallet", () => read("max-namespaces-per-wallet"))
      .handle("putMaxNamespacesPerWallet", ({ payload }) => write("max-namespaces-per-wallet", payload.value))
      .handle("getAutoUpdate", () => read("auto-update"))
      .handle("putAutoUpdate", ({ payload }) => write("auto-update", payload.value))
      .handle("getUpdateChannel", () => read("update-channel"))
      .handle("putUpdateChannel", ({ payload }) => write("update-channel", payload.value))
      .handle("getUpdateWindow", () => read("update-window"))
      .handle("putUpdateWindow", ({ payload }) => write("update-window", payload.value))
      .handle("getReleaseRepo", () => read("release-repo"))
      .handle("putReleaseRepo", ({ payload }) => write("release-repo", payload.value))
      .handle("rotateSecrets", () => Effect.flatMap(actor, (by) => Effect.mapError(rotation.rotate(by), refusedOrDown)))
      .handle("operatorHealth", ({ urlParams }) => Effect.map(health.detail(pageRequest(urlParams)), healthView))
      .handle("telemetryStream", ({ urlParams }) =>
        Effect.succeed(
          HttpServerResponse.stream(
            telemetryEvents(health.snapshot, urlParams.interval ?? TELEMETRY_INTERVAL_DEFAULT).pipe(Stream.encodeText),
            { contentType: "text/event-stream", headers: { "cache-control": "no-store", "x-accel-buffering": "no" } }
          )
        )
      )
      .handle("operatorAudit", ({ urlParams }) =>
        Effect.map(
          Effect.mapError(audit.list({ limit: urlParams.limit ?? 50, after: urlParams.after === undefined ? undefined : [urlParams.after] }), refusedOrDown),
          (page) => ({
            entries: page.items.map((e) => ({ ...e })),
            next: page.next === undefined ? null : Number(page.next[0])
          })
        )
      )
  })
)
