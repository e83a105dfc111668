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
import { bytesSigned, Coordination, coordinationHeadersRefusal, ENVELOPE_HEADER } from "../../layers/coordination/Coordination.js"
import { internalPath } from "../../layers/coordination/InternalClient.js"
import { isRelayCallPath, relayedHeadersOf, relaySignedBody } from "../../layers/push/RelayCall.js"
import { wholeBody } from "../node/LeanServerRequest.js"
import { Authentication, OpenGate, OptionalAuthentication, PeerGate, SessionAuthentication } from "../Gates.js"
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

/** A credential when one is sent: the gate admitted none, or one that its policy accepts. */
export const OptionalAuthenticationLive = Layer.effect(
  OptionalAuthentication,
  Effect.map(decide, (decided) => OptionalAuthentication.of(Effect.map(decided, Option.fromNullable)))
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

/** The streamed route: its MAC covers its envelope header, as the body is still arriving. */
const UPDATE_PATH = internalPath("deploymentUpdate")
/** A vault share's put: its body is bytes, and its MAC covers its envelope header and their SHA-256. */
const SHARE_PUT_PATH = internalPath("vaultSharePut")
/** Eviction is idempotent: the one route that still takes a v1 MAC, from a node not yet upgraded (spec §9.4). */
const EVICT_PATH = internalPath("evict")

/**
 * The path and text a route's MAC covers. A platform relay call signs its own path (the topic is
 * a parameter) and, as its body, the text with the three headers it relays (RelayCall.ts); a
 * forwarded deployment update its envelope header; a vault share's put its envelope header and
 * the SHA-256 of its bytes (`bytesSigned`); every other internal route its fixed path and its
 * JSON body, read whole within the route's cap.
 */
const signed = (routePath: string, request: HttpServerRequest.HttpServerRequest): Effect.Effect<readonly [string, string] | undefined> => {
  if (routePath === UPDATE_PATH) return Effect.succeed([routePath, request.headers[ENVELOPE_HEADER] ?? ""] as const)
  if (routePath === SHARE_PUT_PATH) {
    return Effect.map(Effect.orElseSucceed(wholeBody(request), () => undefined), (bytes) =>
      bytes === undefined ? undefined : ([routePath, bytesSigned(request.headers[ENVELOPE_HEADER] ?? "", bytes)] as const)
    )
  }
  const body = Effect.orElseSucceed(request.text, () => undefined)
  return isRelayCallPath(routePath)
    ? Effect.map(body, (text) => (text === undefined ? undefined : ([request.url, relaySignedBody(text, relayedHeadersOf(request.headers))] as const)))
    : Effect.map(body, (text) => (text === undefined ? undefined : ([routePath, text] as const)))
}

/**
 * A node-to-node call comes from a peer gateway's address on behalf of its clients, who were
 * charged at that front gateway: charging it here too would put every client reaching this node
 * through that peer in one bucket. The call is verified here, once, before its body is decoded: a
 * source off the private overlay, coordination headers missing, malformed or stale, a MAC that
 * does not hold over what the route signs (`signed`), or a nonce already spent refuse it. The
 * routes behind this gate check nothing more of the caller. A call the fast lane verified
 * (FastLane.ts, `internal` routes) carries its admission and is not verified again: its nonce is
 * spent already.
 */
export const PeerGateLive = Layer.effect(
  PeerGate,
  Effect.map(Coordination, (coordination) =>
    PeerGate.of({
      coordinationMac: () =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          // the fast lane verified the call and spent its nonce, then left it to the app
          if (RequestMeta.gated(request)?._tag === "Admitted") return
          const { route } = yield* HttpRouter.RouteContext
          const remote = Option.getOrUndefined(request.remoteAddress)
          // what needs no body first: a call from off the overlay, or without fresh headers, is not read
          const early = coordinationHeadersRefusal(request.headers, remote, yield* Clock.currentTimeMillis)
          const covered = early === undefined ? yield* signed(route.path, request) : undefined
          const refused =
            early ??
            (covered === undefined
              ? "coordination MAC invalid"
              : yield* coordination.verify(route.method, covered[0], covered[1], request.headers, remote, route.path === EVICT_PATH))
          if (refused !== undefined) return yield* Effect.fail(new CoordinationRefused({ error: refused }))
        })
    })
  )
)

/** Every gate, over the one Gate. */
export const GatesLive = Layer.mergeAll(AuthenticationLive, SessionAuthenticationLive, OptionalAuthenticationLive, OpenGateLive, PeerGateLive)
