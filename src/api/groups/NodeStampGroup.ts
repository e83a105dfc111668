/**
 * A node speaks for itself (spec §4.10 `/v1/internal/node/enrol-key`, `register`, `heartbeat`;
 * docs/cluster.md, "The node routes"): loopback only, each request stamped with the node's key
 * (src/domain/NodeStamp.ts). Internal: no client reaches them, so they take no credential; the
 * stamp stands for one, checked by the service (NodeEnrolment.ts).
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
import { NoMembers, strict } from "../Wire.js"

const stampNote =
  "From the node's own machine only (a loopback source), stamped with its key: X-Portico-Node-Id, X-Portico-Node-Stamp (v1=<Ed25519 signature, base64url>), X-Portico-Node-Time (Unix seconds, within 60 s), X-Portico-Node-Nonce (spent once). A refused stamp or source is 403 COORDINATION_REFUSED."

export const EnrolKey = strict(
  Schema.Struct({
    public_key: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{43}$/)).annotations({
      description: "the node's Ed25519 public key, raw, base64url; the request is stamped by this key"
    })
  })
).annotations({ identifier: "EnrolKey" })

export const KeyEnrolled = Schema.Struct({
  node: Schema.String,
  public_key: Schema.String,
  enrolled: Schema.Boolean.annotations({ description: "true when this call bound the key; false when it was bound already" })
}).annotations({ identifier: "KeyEnrolled" })

export const RegisterNode = strict(
  Schema.Struct({
    internal_url: Schema.String.pipe(Schema.maxLength(2048), Schema.pattern(/^(https?:\/\/[^\s/?#]+)?$/)).annotations({
      description: "where other nodes reach this one (scheme, host and port); empty when only its seed URL reaches it"
    }),
    version: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64), Schema.pattern(/^[\x21-\x7e]+$/)).annotations({
      description: "the release the node runs"
    }),
    public_url: Schema.optional(
      Schema.String.pipe(Schema.maxLength(2048), Schema.pattern(/^(https?:\/\/[^\s/?#]+)?$/)).annotations({
        description: "where the node's clients reach it; kept as it was when absent"
      })
    )
  })
).annotations({ identifier: "RegisterNode" })

export const NodeBeatAnswer = Schema.Struct({
  node: Schema.String,
  status: Schema.Literal("active"),
  draining: Schema.Boolean.annotations({ description: "an operator asked this node to drain (POST /v1/node/command)" })
}).annotations({ identifier: "NodeBeat" })

export class NodeStampGroup extends HttpApiGroup.make("nodeStamp")
  .add(
    HttpApiEndpoint.post("enrolKey", "/v1/internal/node/enrol-key")
      .setPayload(EnrolKey)
      .addSuccess(KeyEnrolled)
      .addError(wiresOf(NodeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(
        OpenApi.Description,
        `Binds the node id of the stamp to the key in the body. ${stampNote} An id derived from a key (node-<32 hex>) takes that key only (409 otherwise); a named id the first key enrolled.`
      )
  )
  .add(
    HttpApiEndpoint.post("register", "/v1/internal/node/register")
      .setPayload(RegisterNode)
      .addSuccess(NodeBeatAnswer)
      .addError(wiresOf(NodeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(OpenApi.Description, `Writes the node's internal URL, version and (when given) public URL, and a heartbeat. ${stampNote} 404 when the node has no enrolled key.`)
  )
  .add(
    HttpApiEndpoint.post("heartbeat", "/v1/internal/node/heartbeat")
      .setPayload(NoMembers)
      .addSuccess(NodeBeatAnswer)
      .addError(wiresOf(NodeRefusals))
      .middleware(OpenGate)
      .annotate(RoutePolicy, open)
      .annotate(OpenApi.Description, `The node is alive: its last_seen is now, by the registry's clock. ${stampNote} 404 when the node has no enrolled key.`)
  )
  .annotateEndpoints(OpenApi.Override, internalOnly) {}
