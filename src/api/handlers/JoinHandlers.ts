import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import { Membership } from "../../layers/cluster/Membership.js"
import { NodeInvites } from "../../layers/nodes/NodeInvites.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

/** A node joins with an invite (docs/cluster.md, "Joining"). */
export const JoinHandlers = HttpApiBuilder.group(PorticoApi, "join", (handlers) =>
  Effect.gen(function* () {
    const invites = yield* NodeInvites
    const { self } = yield* Membership
    return handlers.handle("join", ({ payload }) =>
      HttpServerRequest.HttpServerRequest.pipe(
        Effect.flatMap((request) => invites.join(payload, Option.getOrUndefined(request.remoteAddress))),
        Effect.map((sealed) => ({ node: self.id, ...sealed })),
        Effect.mapError(refusedOrDown)
      )
    )
  })
)
