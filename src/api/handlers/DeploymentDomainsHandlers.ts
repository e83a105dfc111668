import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { DeploymentDomains, type DomainView } from "../../layers/deployments/DeploymentDomains.js"
import { AppHosts } from "../../layers/deployments/serving/AppHosts.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

const listed = (d: DomainView) => ({ domain: d.domain, verified: d.verifiedAt !== undefined, verified_at: d.verifiedAt ?? null, txt: d.txt })

export const DeploymentDomainsHandlers = HttpApiBuilder.group(PorticoApi, "deploymentDomains", (handlers) =>
  Effect.gen(function* () {
    const domains = yield* DeploymentDomains
    const hosts = yield* AppHosts
    // the write is done: a host table that does not read now catches up at its next periodic read
    const served = hosts.refresh.pipe(Effect.catchAll((e) => Effect.logWarning(`host table not refreshed after a domain change: ${e.detail}`)))
    return handlers
      .handle("add", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(domains.add(p.namespace, payload.name, payload.domain), refusedOrDown), (d) => ({
            domain: d.domain,
            name: payload.name,
            verified: false as const,
            txt: d.txt
          }))
        )
      )
      .handle("verify", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.zipLeft(Effect.mapError(domains.verify(p.namespace, payload.name, payload.domain), refusedOrDown), served), (d) => ({
            domain: d.domain,
            name: payload.name,
            verified: true as const,
            verified_at: d.verifiedAt
          }))
        )
      )
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(domains.list(p.namespace, urlParams.name), refusedOrDown), (all) => ({ name: urlParams.name, domains: all.map(listed) }))
        )
      )
      .handle("remove", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.zipLeft(Effect.mapError(domains.remove(p.namespace, payload.name, payload.domain), refusedOrDown), served), (domain) => ({
            domain,
            removed: true as const
          }))
        )
      )
  })
)
