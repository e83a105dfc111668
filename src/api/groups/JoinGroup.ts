/**
 * A node joins the cluster (spec §4.10 `/v1/internal/join`; docs/cluster.md, "Joining"). An
 * internal route the joiner calls before it holds the root secret, so it carries no coordination
 * MAC: the invite's proof (an HMAC keyed by the invite's token) stands for it, with the node key's
 * signature, and the source must be on the private network, as for every internal route. The
 * answer's settings are sealed to the X25519 key in the request (src/domain/NodeJoin.ts).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { NodeRefusals, wiresOf } from "../../domain/Errors.js"
import { OpenGate } from "../Gates.js"
import { internalOnly } from "../OpenApiFacts.js"
import { open } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict } from "../Wire.js"
import { NodeId } from "./NodeGroup.js"

const B64Url = (bytes: number) => Schema.String.pipe(Schema.pattern(new RegExp(`^[A-Za-z0-9_-]{${Math.ceil((bytes * 4) / 3)}}$`)))

export const JoinRequest = strict(
  Schema.Struct({
    invite_id: B64Url(32).annotations({ description: "SHA-256 of the invite's token, base64url" }),
    node_id: NodeId,
    public_key: B64Url(32).annotations({ description: "the joiner's Ed25519 node key, raw, base64url" }),
    seal_key: B64Url(32).annotations({ description: "an ephemeral X25519 public key the answer is sealed to" }),
    iat: Schema.Int.annotations({ description: "Unix seconds; within 60 s of the admitting node's clock" }),
    proof: B64Url(32).annotations({ description: "HMAC-SHA-256 of the claim keyed by the invite's token" }),
    signature: B64Url(64).annotations({ description: "the node key's Ed25519 signature over the claim" })
  })
).annotations({ identifier: "JoinRequest" })

export const JoinAnswer = Schema.Struct({
  node: Schema.String.annotations({ description: "the node that admitted the joiner" }),
  seal_from: Schema.String.annotations({ description: "the admitting node's ephemeral X25519 public key, base64url" }),
  sealed: Schema.String.annotations({ description: "the cluster's settings for the joiner, sealed (ChaCha20-Poly1305), base64url" })
}).annotations({ identifier: "JoinAnswer" })

export class JoinGroup extends HttpApiGroup.make("join")
  .add(
    HttpApiEndpoint.post("join", "/v1/internal/join")
      .setPayload(JoinRequest)
      .addSuccess(JoinAnswer)
      .addError(wiresOf(NodeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
  )
  .annotateEndpoints(OpenApi.Override, internalOnly) {}
