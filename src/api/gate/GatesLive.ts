/**
 * The live gates of Gates.ts. Each reads its route's policy from the route index, asks the one
 * gate (Gate.ts) for a decision, and provides the caller. A request the fast lane already gated
 * carries that decision, which is taken as it is.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Clock, Effect, Layer, Option } from "effect"
import { CoordinationRefused, internal } from "../../domain/Errors.js"
import { asSession, type Principal, type Session } from "../../domain/Principal.js"
import { Coordination, coordinationHeadersRefusal } from "../../layers/coordination/Coordination.js"
import { isRelayCallPath, relayedHeadersOf, relaySignedBody } from "../../layers/push/RelayCall.js"
import { Authentication, OpenGate, PeerGate, SessionAuthentication } from "../Gates.js"
import { open } from "../Policy.js"
import { RequestMeta } from "../RequestMeta.js"
import { Gate, type GateRefusal, type GateRequest } from "./Gate.js"
import { routeIndex } from "./RouteIndex.js"

const gateRequest = (request: HttpServerRequest.HttpServerRequest): GateRequest => ({
  authorization: request.headers["authorization"],
  remoteAddress: Option.getOrUndefined(request.remoteAddress),
  clientCharged: RequestMeta.clientCharged(request),
  noteNamespace: (namespace) => RequestMeta.setNamespace(request, namespace)
})

/** The gate's decision on the matched route's policy. */
const decide = Effect.gen(function* () {
  const gate = yield* Gate
  const index = routeIndex()
  return Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const decided = RequestMeta.gated(request)
    if (decided !== undefined) {
      if (decided._tag === "Admitted") return decided.principal
      if (decided._tag === "Refused") return yield* Effect.fail(decided.error)
    }
    const { route } = yield* HttpRouter.RouteContext
    const entry = index.byRoute(route.method, route.path)
    if (entry === undefined) return yield* Effect.fail<GateRefusal>(internal())
    return yield* gate.run(entry.policy, gateRequest(request))
  })
})

const needCaller = <P extends Principal>(principal: P | undefined): Effect.Effect<P, GateRefusal> =>
  principal === undefined ? Effect.fail(internal()) : Effect.succeed(principal)

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(decide, (decided) => Authentication.of({ bearer: () => Effect.flatMap(decided, needCaller) }))
)

export const SessionAuthenticationLive = Layer.effect(
  SessionAuthentication,
  Effect.map(decide, (decided) =>
    SessionAuthentication.of({
      // the `session` policy admitted only a session; anything else here is a wiring defect
      session: () => Effect.flatMap(decided, (p) => needCaller<Session>(p === undefined ? undefined : asSession(p)))
    })
  )
)

/** Open routes: the client network's rate limit, which the listener has usually charged at the headers already. */
export const OpenGateLive = Layer.effect(
  OpenGate,
  Effect.map(Gate, (gate) =>
    OpenGate.of(
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        RequestMeta.clientCharged(request)
          ? Effect.void
          : Effect.asVoid(gate.run(open, gateRequest(request))).pipe(
              // an open route's gate refuses with the rate limit only
              Effect.catchIf((e) => e._tag !== "RateLimited", () => Effect.fail(internal()))
            )
      )
    )
  )
)

/**
 * The path and body a route's MAC covers, with the headers to check it against. A platform relay
 * call signs its own path (the topic is a parameter) and, as its body, the text with the three
 * headers it relays (RelayCall.ts); every other internal route its fixed path and its JSON body.
 */
const signed = (routePath: string, request: HttpServerRequest.HttpServerRequest, body: string) =>
  isRelayCallPath(routePath)
    ? ([request.url, relaySignedBody(body, relayedHeadersOf(request.headers)), request.headers] as const)
    : ([routePath, body, request.headers] as const)

/**
 * A node-to-node call comes from a peer gateway's address on behalf of its clients, who were
 * charged at that front gateway: charging it here too would put every client reaching this node
 * through that peer in one bucket. A source off the private overlay is refused before its body is
 * even decoded; so are coordination headers that are missing, malformed or stale, and a MAC that
 * does not hold over what the route signs (`signed`: the listener has the body whole, as
 * node-to-node bodies are read within a cap). The route verifies the MAC again over its decoded
 * input and spends its nonce.
 */
export const PeerGateLive = Layer.effect(
  PeerGate,
  Effect.map(Coordination, (coordination) =>
    PeerGate.of({
      coordinationMac: () =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const { route } = yield* HttpRouter.RouteContext
          const refused =
            coordinationHeadersRefusal(request.headers, Option.getOrUndefined(request.remoteAddress), yield* Clock.currentTimeMillis) ??
            (yield* Effect.orElseSucceed(request.text, () => undefined).pipe(
              Effect.map((body) => (body !== undefined && coordination.macHolds(route.method, ...signed(route.path, request, body)) ? undefined : "coordination MAC invalid"))
            ))
          if (refused !== undefined) return yield* Effect.fail(new CoordinationRefused({ error: refused }))
        })
    })
  )
)

/** Every gate, over the one Gate. */
export const GatesLive = Layer.mergeAll(AuthenticationLive, SessionAuthenticationLive, OpenGateLive, PeerGateLive)
