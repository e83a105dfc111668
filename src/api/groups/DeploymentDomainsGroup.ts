/**
 * A deployment's custom domains (spec §4.8 `domains/add|verify|list|remove`), exactly as
 * docs/deployments.md's "Routes" table fixes them: the deployment named in the caller's
 * namespace, control plane. A domain serves the deployment once a TXT record
 * `_portico-verify.<domain>` holding the token `add` answered has been checked by `verify`
 * (docs/deployments.md, "Custom domains").
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { DeploymentDomainRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { controlPlane } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"
import { DeploymentName } from "./DeploymentsGroup.js"

const Domain = Schema.String.pipe(Schema.maxLength(300)).annotations({
  description:
    "a host name you hold, such as www.example.com: case and a trailing dot are dropped; ASCII (an internationalised name in punycode); not an IP address, localhost, or the platform's base domain or a name under it"
})

const DomainRequest = strict(Schema.Struct({ name: DeploymentName, domain: Domain })).annotations({ identifier: "DeploymentDomainRequest" })

export const VerificationTxt = Schema.Struct({
  name: Schema.String.annotations({ description: "the TXT record's name: _portico-verify.<domain>" }),
  value: Schema.String.annotations({ description: "the value it must hold (one TXT record with exactly this text)" })
}).annotations({ identifier: "DomainVerificationTxt" })

export const DomainAdded = Schema.Struct({
  domain: Schema.String,
  name: Schema.String,
  verified: Schema.Literal(false),
  txt: VerificationTxt
}).annotations({ identifier: "DeploymentDomainAdded", description: "publish the TXT record, then call domains/verify" })

export const DomainVerified = Schema.Struct({
  domain: Schema.String,
  name: Schema.String,
  verified: Schema.Literal(true),
  verified_at: UnixSeconds
}).annotations({ identifier: "DeploymentDomainVerified", description: "the domain serves the deployment from now on" })

export const DeploymentDomain = Schema.Struct({
  domain: Schema.String,
  verified: Schema.Boolean,
  verified_at: Schema.NullOr(UnixSeconds),
  txt: VerificationTxt
}).annotations({ identifier: "DeploymentDomain" })

export const DeploymentDomainList = Schema.Struct({
  name: Schema.String,
  domains: Schema.Array(DeploymentDomain).annotations({ description: "every custom domain of the deployment, in domain order (at most 20)" })
}).annotations({ identifier: "DeploymentDomainList" })

export const DomainRemoved = Schema.Struct({ domain: Schema.String, removed: Schema.Literal(true) }).annotations({
  identifier: "DeploymentDomainRemoved"
})

export class DeploymentDomainsGroup extends HttpApiGroup.make("deploymentDomains")
  .add(HttpApiEndpoint.post("add", "/v1/deployments/domains/add").setPayload(DomainRequest).addSuccess(DomainAdded))
  .add(HttpApiEndpoint.post("verify", "/v1/deployments/domains/verify").setPayload(DomainRequest).addSuccess(DomainVerified))
  .add(
    HttpApiEndpoint.get("list", "/v1/deployments/domains/list")
      .setUrlParams(strict(Schema.Struct({ name: DeploymentName })))
      .addSuccess(DeploymentDomainList)
  )
  .add(HttpApiEndpoint.post("remove", "/v1/deployments/domains/remove").setPayload(DomainRequest).addSuccess(DomainRemoved))
  .middleware(Authentication)
  .addError(wiresOf(DeploymentDomainRefusals))
  .annotate(RoutePolicy, controlPlane) {}
