import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CurrentSession } from "../../domain/Principal.js"
import { PorticoConfig } from "../../layers/config/PorticoConfig.js"
import { makeAnonRequests } from "../../layers/proxy/AnonRequests.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown, socketOnly } from "./Refusals.js"

export const ProxyHandlers = HttpApiBuilder.group(PorticoApi, "proxy", (handlers) =>
  Effect.gen(function* () {
    const anon = makeAnonRequests((yield* PorticoConfig).proxy)
    return handlers
      .handle("anon", ({ payload }) => Effect.flatMap(CurrentSession, (s) => Effect.mapError(anon.send(s, payload), refusedOrDown)))
      .handle("tunnel", () => socketOnly("/v1/proxy/tunnel"))
      .handle("relay", () => socketOnly("/v1/proxy/relay"))
  })
)
