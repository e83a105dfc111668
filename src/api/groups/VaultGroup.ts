/**
 * The secret vault (spec §4.9 "secret vault, Ed25519-signed per request"; docs/vault.md). Any
 * credential of the namespace may call it (an app's runtime key is enough for a user who lost
 * their device); a push or pull also carries the identity key's signature, which is what decides
 * whose envelope it is. Identities are the namespace's own: another namespace's do not exist here.
 * Push and pull are answered in the fast lane when it can (src/api/lane/VaultLane.ts).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { VaultRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { authenticated } from "../Policy.js"
import { BodyCap, FastLaneRoute, RoutePolicy } from "../RouteFacts.js"
import { Pulled, PullRequest, Pushed, PushRequest, VaultHealth, VaultStatus } from "./VaultWire.js"

export class VaultGroup extends HttpApiGroup.make("vault")
  .add(HttpApiEndpoint.post("push", "/v1/vault/push").setPayload(PushRequest).addSuccess(Pushed).annotate(BodyCap, "vaultPush").annotate(FastLaneRoute, "vault.push"))
  .add(HttpApiEndpoint.post("pull", "/v1/vault/pull").setPayload(PullRequest).addSuccess(Pulled).annotate(BodyCap, "vaultPull").annotate(FastLaneRoute, "vault.pull"))
  .add(HttpApiEndpoint.get("health", "/v1/vault/health").addSuccess(VaultHealth))
  .add(HttpApiEndpoint.get("status", "/v1/vault/status").addSuccess(VaultStatus))
  .addError(wiresOf(VaultRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, authenticated) {}
