import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import { NODE_ID_HEADER } from "../../domain/NodeStamp.js"
import { NodeEnrolment, type StampedCall } from "../../layers/nodes/NodeEnrolment.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

/** The request as its stamp covers it: method, path, query, the stamp's node id and the body's text. */
const stampedCall: Effect.Effect<StampedCall, never, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) =>
    Effect.map(Effect.orElseSucceed(request.text, () => ""), (body) => {
      const at = request.url.indexOf("?")
      return {
        request: {
          method: request.method,
          path: at === -1 ? request.url : request.url.slice(0, at),
          query: at === -1 ? "" : request.url.slice(at + 1),
          nodeId: request.headers[NODE_ID_HEADER] ?? "",
          body
        },
        headers: request.headers,
        remote: Option.getOrUndefined(request.remoteAddress)
      }
    })
)

/** A node's own calls through the gateway on its machine (docs/cluster.md, "The node routes"). */
export const NodeStampHandlers = HttpApiBuilder.group(PorticoApi, "nodeStamp", (handlers) =>
  Effect.gen(function* () {
    const enrolment = yield* NodeEnrolment
    return handlers
      .handle("enrolKey", ({ payload }) =>
        stampedCall.pipe(
          Effect.flatMap((call) => enrolment.enrolKey(call, payload.public_key)),
          Effect.map((e) => ({ node: e.node, public_key: e.publicKey, enrolled: e.enrolled })),
          Effect.mapError(refusedOrDown)
        )
      )
      .handle("register", ({ payload }) =>
        stampedCall.pipe(
          Effect.flatMap((call) => enrolment.register(call, payload.internal_url, payload.version, payload.public_url)),
          Effect.map((b) => ({ node: b.node, status: "active" as const, draining: b.draining })),
          Effect.mapError(refusedOrDown)
        )
      )
      .handle("heartbeat", () =>
        stampedCall.pipe(
          Effect.flatMap((call) => enrolment.heartbeat(call)),
          Effect.map((b) => ({ node: b.node, status: "active" as const, draining: b.draining })),
          Effect.mapError(refusedOrDown)
        )
      )
  })
)
