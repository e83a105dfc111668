/**
 * The gateway assembled: services on their engines, the HttpApi with its handlers, the docs,
 * the error envelope, the access log, and a node:http listener. `serveGateway` is what
 * `portico serve` and the end-to-end tests run.
 */
import { noteClient } from "./node/ClientAddress.js"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { Context, Effect, Layer, Option, Scope } from "effect"
import * as http from "node:http"
import type { Duplex } from "node:stream"
import type { AddressInfo } from "node:net"
import { Code, envelopeText, NotFound } from "../domain/Errors.js"
import { Sealer } from "../layers/secrets/Sealer.js"
import { refusalOf } from "./ErrorResponses.js"
import type { PorticoSettings } from "../layers/config/PorticoConfig.js"
import { gatewayServicesLayer } from "../layers/Services.js"
import { RELAY_MESSAGE_MAX_BYTES } from "../layers/push/RelayCall.js"
import { NETWORK_BODY_MAX_BYTES } from "../layers/network/Network.js"
import { PorticoApi } from "./Api.js"
import { GateLive } from "./gate/Gate.js"
import { GatesLive } from "./gate/GatesLive.js"
import { routeIndex } from "./gate/RouteIndex.js"
import { type BodyCapName, FORWARDED_ROOM_BYTES } from "./RouteFacts.js"
import { renderFailure } from "./ErrorResponses.js"
import { MAX_PATH_PARAM_LENGTH } from "./Wire.js"
import { AuditHandlers } from "./handlers/AuditHandlers.js"
import { AuthHandlers } from "./handlers/AuthHandlers.js"
import { CacheHandlers } from "./handlers/CacheHandlers.js"
import { CorsHandlers } from "./handlers/CorsHandlers.js"
import { corsMiddleware } from "./Cors.js"
import { DatabaseHandlers } from "./handlers/DatabaseHandlers.js"
import { DeploymentsHandlers } from "./handlers/DeploymentsHandlers.js"
import { DeploymentDomainsHandlers } from "./handlers/DeploymentDomainsHandlers.js"
import { DeploymentRuntimeHandlers } from "./handlers/DeploymentRuntimeHandlers.js"
import { DeviceHandlers } from "./handlers/DeviceHandlers.js"
import { SqlHandlers } from "./handlers/SqlHandlers.js"
import { InternalHandlers } from "./handlers/InternalHandlers.js"
import { PushHandlers } from "./handlers/PushHandlers.js"
import { ProxyHandlers } from "./handlers/ProxyHandlers.js"
import { PubSubHandlers } from "./handlers/PubSubHandlers.js"
import { VaultHandlers } from "./handlers/VaultHandlers.js"
import { WebRtcEventsHandlers, WebRtcHandlers, WebRtcNamespaceHandlers } from "./handlers/WebRtcHandlers.js"
import { webRtcSocketHandlers } from "./handlers/WebRtcSocketHandlers.js"
import { peerChannelHandlers } from "./handlers/PeerChannelHandlers.js"
import { makeChannelServer } from "../layers/coordination/PeerChannel.js"
import { makeSignalSockets } from "../layers/webrtc/SignalSockets.js"
import { MediaServer } from "../layers/webrtc/MediaServer.js"
import { RoomEvents } from "../layers/webrtc/RoomEvents.js"
import { Rooms } from "../layers/webrtc/Rooms.js"
import { WebRtc } from "../layers/webrtc/WebRtc.js"
import { Coordination, ENVELOPE_HEADER } from "../layers/coordination/Coordination.js"
import { FunctionsHandlers, InvokeHandlers } from "./handlers/FunctionsHandlers.js"
import { pubSubSocketHandlers } from "./handlers/PubSubSocketHandlers.js"
import { makePubSubSockets } from "../layers/pubsub/PubSubSockets.js"
import { makeFunctionSockets } from "../layers/functions/FunctionSockets.js"
import { Invocations } from "../layers/functions/Invocations.js"
import { SocketDirectory } from "../layers/functions/SocketDirectory.js"
import { NodeHeartbeat } from "../layers/cluster/NodeHeartbeat.js"
import { functionSocketHandlers } from "./handlers/FunctionSocketHandlers.js"
import { PubSub } from "../layers/pubsub/PubSub.js"
import { largestFrameBytes } from "../layers/config/PubSubSettings.js"
import { credentialStanding, makeSocketRevocation } from "../layers/auth/SocketRevocation.js"
import { WorkloadLiveness } from "../layers/auth/Authenticator.js"
import { ApiKeys } from "../layers/keys/ApiKeys.js"
import { proxySocketHandlers } from "./handlers/ProxySocketHandlers.js"
import { makeProxySockets } from "../layers/proxy/ProxySockets.js"
import { PushRegistrationHandlers } from "./handlers/PushRegistrationHandlers.js"
import { PushRelayHandlers } from "./handlers/PushRelayHandlers.js"
import { PushSendHandlers } from "./handlers/PushSendHandlers.js"
import { StorageHandlers } from "./handlers/StorageHandlers.js"
import { NamespaceHandlers } from "./handlers/NamespaceHandlers.js"
import { NamespaceBackupHandlers } from "./handlers/NamespaceBackupHandlers.js"
import { NamespaceDeleteHandlers } from "./handlers/NamespaceDeleteHandlers.js"
import { NamespaceCreateHandlers } from "./handlers/NamespaceCreateHandlers.js"
import { OperatorHandlers } from "./handlers/OperatorHandlers.js"
import { NetworkHandlers } from "./handlers/NetworkHandlers.js"
import { JoinHandlers } from "./handlers/JoinHandlers.js"
import { NodeStampHandlers } from "./handlers/NodeStampHandlers.js"
import { EdgeHandlers } from "./handlers/EdgeHandlers.js"
import { NodeHandlers } from "./handlers/NodeHandlers.js"
import { SystemHandlers } from "./handlers/SystemHandlers.js"
import { logParserRefusal, logRequest } from "./AccessLog.js"
import { fastRuntimeLayer, makeRequestListener } from "./NodeAdapter.js"
import { makeFastLane } from "./FastLane.js"
import { makeAdmission } from "./BodyGuard.js"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { OperatorHealth } from "../layers/operators/OperatorHealth.js"
import { RequestStats } from "../layers/operators/RequestStats.js"
import { openApiRoute } from "./OpenApiRoute.js"
import { docsRoute } from "./DocsPage.js"
import { consoleRoute } from "./ConsolePage.js"
// the module itself, not the package index, which loads the cluster, RPC and worker modules too
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { AppHosts } from "../layers/deployments/serving/AppHosts.js"
import { AppRuntime } from "../layers/deployments/runtime/AppRuntime.js"
import { DEFAULT_ARCHIVE_LIMITS } from "../layers/deployments/Archive.js"
import { sealedSize } from "../layers/namespaces/backup/SealedStream.js"
import { makeHostRouting, oneHostUpgrade, peerAddressOf, refuseConnect } from "../layers/deployments/serving/HostRouting.js"
import { Membership } from "../layers/cluster/Membership.js"
import { Storage } from "../layers/storage/Storage.js"
import { SessionLiveness } from "../layers/auth/Authenticator.js"
import { Gate } from "./gate/Gate.js"
import { makeUpgrades } from "./Upgrades.js"
import { Namespaces } from "../layers/namespaces/Namespaces.js"

const HandlersLive = Layer.mergeAll(
  SystemHandlers,
  AuthHandlers,
  NamespaceHandlers,
  NamespaceBackupHandlers,
  NamespaceDeleteHandlers,
  NamespaceCreateHandlers,
  OperatorHandlers,
  NetworkHandlers,
  NodeHandlers,
  JoinHandlers,
  NodeStampHandlers,
  EdgeHandlers,
  CorsHandlers,
  AuditHandlers,
  DeviceHandlers,
  CacheHandlers,
  DatabaseHandlers,
  SqlHandlers,
  StorageHandlers,
  PushHandlers,
  PushRegistrationHandlers,
  PushRelayHandlers,
  PushSendHandlers,
  ProxyHandlers,
  PubSubHandlers,
  VaultHandlers,
  WebRtcNamespaceHandlers,
  WebRtcHandlers,
  WebRtcEventsHandlers,
  FunctionsHandlers,
  InvokeHandlers,
  DeploymentsHandlers,
  DeploymentDomainsHandlers,
  DeploymentRuntimeHandlers,
  InternalHandlers
)

const ApiLive = HttpApiBuilder.api(PorticoApi).pipe(Layer.provide(HandlersLive), Layer.provide(GatesLive))

const DocsLive = Layer.mergeAll(
  openApiRoute("/v1/openapi.json"),
  docsRoute("/v1/docs"),
  consoleRoute
).pipe(Layer.provide(ApiLive))

// One middleware, so the order is certain: failures become the envelope first, then every
// answer (refusals too) gets its CORS headers, and preflights are answered (src/api/Cors.ts).
const ErrorsLive = HttpApiBuilder.middleware(
  Effect.map(corsMiddleware, (cors) => (app) => cors(Effect.catchAllCause(app, renderFailure)))
)

/** Everything the HttpApp needs, routes registered. */
export const routesLayer = Layer.mergeAll(ApiLive, DocsLive, ErrorsLive).pipe(
  Layer.provideMerge(HttpApiBuilder.Router.Live),
  Layer.provideMerge(HttpApiBuilder.Middleware.layer),
  Layer.provideMerge(GateLive)
)

/** A route's own body cap, from the setting its annotation names (RouteFacts.ts). */
const bodyCapOf = (settings: PorticoSettings, name: BodyCapName): number => {
  switch (name) {
    case "sqlImport":
      return settings.sql.importMaxBytes
    // the file plus room for the multipart framing and a name; the exact cap on the file's bytes
    // is the storage service's
    case "upload":
      return settings.storage.maxUploadBytes + 64 * 1024
    // a forwarded request is the client's body (within the cap at the front gateway) plus the
    // caller it was authorized as: room for that, so what passed there is not 413 here
    case "forwarded":
      return settings.maxBodyBytes + FORWARDED_ROOM_BYTES
    case "relayMessage":
      return RELAY_MESSAGE_MAX_BYTES
    // the archive (its exact cap is the unpacker's, 413 too) plus the form's framing and fields,
    // an env of up to 224 KiB among them
    case "deployUpload":
      return DEFAULT_ARCHIVE_LIMITS.maxCompressedBytes + 512 * 1024
    // a namespace backup at its cap, sealed
    case "namespaceRestore":
      return sealedSize(settings.backup.maxBytes)
    // one message at its cap in base64, inside its JSON (the cap on the decoded bytes is the service's, 413 too)
    case "pubsubPublish":
      return largestFrameBytes(settings.pubsub.maxMessageBytes)
    case "pubsubBatch":
      return settings.pubsub.batchMaxBytes
    // the module at its cap plus the form's fields and framing (the module's exact cap is the service's, 413 too)
    case "functionDeploy":
      return settings.functions.maxModuleBytes + 512 * 1024
    // an invocation's input, exactly: 413 past it, never truncated
    case "functionInvoke":
      return settings.functions.maxInputBytes
    case "socketFrame":
      return Math.ceil(settings.functions.maxInputBytes / 3) * 4 + 4096
    case "networkConnect":
      return NETWORK_BODY_MAX_BYTES
    // the envelope at its cap in base64 (its exact cap is the service's, 413 too) and the push's hex fields
    case "vaultPush":
      return Math.ceil(settings.vault.maxEnvelopeBytes / 3) * 4 + 4096
    case "vaultPull":
    case "webrtcEvent":
      return 4096
  }
}

export interface Listening {
  readonly port: number
  readonly host: string
}

/**
 * The gateway's node:http request listener, its services built in the current scope. Split from
 * `serveGateway` so the in-process benchmark (bench/floor/inproc.ts) drives the very same listener.
 */
export const gatewayListener = (settings: PorticoSettings) =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    // The runtime settings must sit below the layers so the captured runtime carries them.
    const context = yield* Layer.buildWithScope(
      routesLayer.pipe(
        Layer.provideMerge(gatewayServicesLayer(settings)),
        Layer.provideMerge(NodeHttpServer.layerContext),
        Layer.provide(fastRuntimeLayer)
      ),
      scope
    )
    // The request fibers' runtime holds only the platform services an HttpApp may read at request
    // time. Handlers and middleware captured their own services when their layers were built, and
    // every provide per request (route context, request, principal) copies the whole Context map:
    // with the ~40 gateway services in it, whoami ran 9-13% slower (docs/performance.md).
    const platform = yield* Layer.build(NodeHttpServer.layerContext)
    const runtime = yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>().pipe(Effect.provide(platform), Effect.provide(fastRuntimeLayer))
    // find-my-way's default refuses path parameters over 100 characters as "no such route"; a
    // sha2-512 CID is 110, and an over-long CID or id must reach its route's own check (400)
    const app = yield* HttpApiBuilder.httpApp.pipe(
      Effect.provide(context),
      HttpRouter.withRouterConfig({ maxParamLength: MAX_PATH_PARAM_LENGTH })
    )
    const fastLane = settings.fastLane ? yield* makeFastLane.pipe(Effect.provide(context)) : undefined
    const logged = settings.logRequests ? logRequest : undefined
    // every answer of the API is counted for the operator's telemetry (RequestStats.ts) and, when
    // asked, logged; deployed apps' requests (their hosts) are only logged
    const stats = Context.get(context, RequestStats)
    const onAnswered = logged === undefined
      ? (_req: http.IncomingMessage, status: number, ms: number) => stats.record(status, ms)
      : (req: http.IncomingMessage, status: number, ms: number) => {
          stats.record(status, ms)
          logged(req, status, ms)
        }
    // both request paths go through it: the client network's rate limit is charged here, at the
    // headers, and the routes' own gates then charge the namespace only
    const { admit } = makeAdmission(
      settings.bodies,
      Context.get(context, RateLimiter),
      onAnswered
    )
    const index = routeIndex()
    const api = makeRequestListener(app, runtime, {
      maxBodyBytes: settings.maxBodyBytes,
      fastLane,
      onAnswered,
      admission: admit,
      routeBody: (method, path) => {
        const route = index.bodyRoute(method, path)
        if (route === undefined) return undefined
        return {
          cap: route.bodyCap === undefined ? settings.maxBodyBytes : bodyCapOf(settings, route.bodyCap),
          streamed: route.streamed !== undefined
        }
      }
    })
    // deployed apps' hosts are answered before the API (docs/deployments.md, "Serving")
    let ownPort: number | undefined
    const routing = makeHostRouting({
      hosts: Context.get(context, AppHosts),
      storage: Context.get(context, Storage),
      nodeId: settings.nodeId,
      ownPort: () => ownPort,
      onAnswered: logged,
      proxies: settings.trustedProxies,
      peerAddress: peerAddressOf(Context.get(context, Membership))
    })
    yield* Scope.addFinalizer(scope, Effect.sync(routing.close))
    // every long-lived socket's credential, read again every few seconds (SocketRevocation.ts)
    const revocation = makeSocketRevocation({
      stands: credentialStanding({
        sessions: Context.get(context, SessionLiveness),
        keys: Context.get(context, ApiKeys),
        workloads: Context.get(context, WorkloadLiveness)
      }),
      intervalMs: Math.min(settings.proxy.revocationCheckMs, settings.pubsub.revocationCheckMs)
    })
    yield* Scope.addFinalizer(scope, Effect.sync(revocation.stop))
    // the anonymity proxy's WebSockets (docs/proxy.md, "Tunnels")
    const proxySockets = makeProxySockets({
      settings: settings.proxy,
      revocation,
      namespaceExists: (name) => Effect.map(Context.get(context, Namespaces).get(name), Option.isSome),
      baseDomain: settings.baseDomain
    })
    yield* Scope.addFinalizer(scope, Effect.sync(proxySockets.close))
    // publish/subscribe's sockets (docs/pubsub.md, "Sockets")
    const pubSubSockets = makePubSubSockets({ pubsub: Context.get(context, PubSub), revocation })
    yield* Scope.addFinalizer(scope, Effect.sync(pubSubSockets.close))
    // functions' sockets (docs/functions.md, "Sockets")
    const functionSockets = makeFunctionSockets({
      invocations: Context.get(context, Invocations),
      directory: Context.get(context, SocketDirectory),
      revocation,
      settings: settings.functions
    })
    yield* Scope.addFinalizer(scope, Effect.sync(functionSockets.close))
    // real-time media's signalling, relayed to the room's media server (docs/webrtc.md, "Signalling")
    const coordination = Context.get(context, Coordination)
    const signalSockets = makeSignalSockets({
      self: settings.nodeId,
      webrtc: Context.get(context, WebRtc),
      rooms: Context.get(context, Rooms),
      media: Context.get(context, MediaServer),
      coordination,
      membership: Context.get(context, Membership),
      revocation,
      joinsPerMinute: settings.webrtc.joinsPerMinute,
      events: Context.get(context, RoomEvents)
    })
    yield* Scope.addFinalizer(scope, Effect.sync(signalSockets.close))
    // peers' kept channels of forwarded calls, answered by the fast lane (docs/cluster.md, "Peer channels")
    const channelServer = makeChannelServer({
      keyOf: coordination.channelKey,
      generation: () => Context.get(context, Sealer).generation(),
      serve: fastLane?.peerCall,
      maxCallBytes: settings.maxBodyBytes + FORWARDED_ROOM_BYTES,
      notServed: (path) => refusalOf(new NotFound({ error: `${path} is not taken on a peer channel`, hint: "call it over HTTP" }))
    })
    yield* Scope.addFinalizer(scope, Effect.sync(channelServer.close))
    // the API's WebSocket routes on the API's hosts, each through its endpoint's gate and query schema
    const upgrades = makeUpgrades({
      index,
      gate: Context.get(context, Gate),
      handlers: [
        ...proxySocketHandlers(proxySockets),
        ...pubSubSocketHandlers(pubSubSockets),
        ...functionSocketHandlers(functionSockets),
        ...webRtcSocketHandlers(signalSockets),
        ...peerChannelHandlers(channelServer)
      ],
      isApiHost: (host) => Context.get(context, AppHosts).route(host).kind === "api",
      onAnswered,
      peerRefusal: (req, path) => {
        const envelope = req.headers[ENVELOPE_HEADER]
        if (typeof envelope !== "string") return Promise.resolve("the call's envelope is missing")
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v[0] : v]))
        return Effect.runPromise(coordination.verify("GET", path, envelope, headers, req.socket.remoteAddress, false))
      }
    })
    // behind a trusted proxy (the edge) the client is who it names (config/TrustedProxies.ts)
    const proxies = settings.trustedProxies
    const serve = routing.listener(api)
    const upgrade = oneHostUpgrade(upgrades.inFront(routing.upgrade(api)))
    const entry: typeof serve = proxies.any
      ? (req, res) => {
          noteClient(proxies, req)
          serve(req, res)
        }
      : serve
    return Object.assign(entry, {
      /** The server's `upgrade` listener: apps' WebSockets, and the API's hosts answered as requests. */
      upgrade: proxies.any
        ? (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
            noteClient(proxies, req)
            upgrade(req, socket, head)
          }
        : upgrade,
      /** Dynamic apps' connections are taken before node's server parses them (AppConnections.ts). */
      takeConnections: routing.takeConnections,
      closeIdleAppConnections: routing.closeIdleConnections,
      closeAllAppConnections: routing.closeAllConnections,
      /** Peers' channels end as the server closes: the peers' calls go over HTTP to whichever node answers. */
      closePeerChannels: channelServer.close,
      /**
       * Tells the proxy the port the server listens on, so it never proxies to it, the app
       * runtime, which then knows the gateway's address for the apps and resumes this node's apps,
       * the operator health report, which lists it among the node's ports, and the node's
       * heartbeat, which writes the internal URL other nodes reach it at.
       */
      listeningOn: (port: number) => {
        ownPort = port
        Effect.runSync(Context.get(context, OperatorHealth).listening(port))
        Effect.runFork(Context.get(context, NodeHeartbeat).listening(port))
        Effect.runFork(Context.get(context, AppRuntime).listening(port))
        // this node's media server reports its participants to this gateway
        const host = settings.host === "0.0.0.0" || settings.host === "::" ? "127.0.0.1" : settings.host.includes(":") ? `[${settings.host}]` : settings.host
        Context.get(context, MediaServer).start(`http://${host}:${port}`)
      }
    })
  })

/**
 * Starts the gateway in the current scope; closing the scope stops accepting, lets in-flight
 * requests finish (bounded), then closes the stores.
 */
export const serveGateway = (settings: PorticoSettings) =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const listener = yield* gatewayListener(settings)
    // Bodies are bounded by the listener's rate rule and JSON deadline (src/api/BodyGuard.ts);
    // node's whole-request timeout is only a backstop, long enough for a large upload at a fair
    // rate. Headers are node's to bound, checked every 2 s rather than node's default 30 s.
    const server = http.createServer(
      { keepAliveTimeout: 65_000, requestTimeout: 3_600_000, headersTimeout: 20_000, connectionsCheckingInterval: 2_000 },
      listener
    )
    // `Expect: 100-continue`: the listener refuses an announced oversize body at once; only a body
    // it will read gets the go-ahead, so a client is never invited to send what will be refused.
    server.on("checkContinue", (req, res) => {
      listener(req, res)
      if (!res.headersSent) res.writeContinue()
    })
    server.on("upgrade", listener.upgrade)
    // CONNECT, which node would drop unanswered when nobody listens: 405 on every host
    server.on("connect", refuseConnect)
    listener.takeConnections(server)
    // What node's parser refuses before any route sees it still answers with the envelope.
    server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
      // HPE_INVALID_EOF_STATE: the client closed its side mid-request (often one already answered,
      // a 413 whose body it stopped sending); nobody is left to read an answer, nor is it a request
      if (error.code === "ECONNRESET" || error.code === "HPE_INVALID_EOF_STATE" || !socket.writable) {
        socket.destroy()
        return
      }
      const [status, reason, text] =
        error.code === "HPE_HEADER_OVERFLOW"
          ? [431, "Request Header Fields Too Large", "request headers too large"]
          : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
            ? [408, "Request Timeout", "the request took too long to arrive"]
            : [400, "Bad Request", "malformed HTTP request"]
      const body = envelopeText({ error: text, code: status === 400 ? Code.BAD_REQUEST : status === 431 ? Code.HEADERS_TOO_LARGE : Code.REQUEST_TIMEOUT })
      if (settings.logRequests) logParserRefusal(status)
      socket.end(
        `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
      )
    })
    yield* Effect.async<void, Error>((resume) => {
      const onError = (e: Error) => resume(Effect.fail(e))
      server.once("error", onError)
      server.listen(settings.port, settings.host, () => {
        server.off("error", onError)
        resume(Effect.void)
      })
    })
    yield* Scope.addFinalizer(
      scope,
      Effect.async<void>((resume) => {
        const timer = setTimeout(() => {
          server.closeAllConnections()
          listener.closeAllAppConnections()
        }, 10_000)
        listener.closePeerChannels()
        server.close(() => {
          clearTimeout(timer)
          resume(Effect.void)
        })
        server.closeIdleConnections()
        listener.closeIdleAppConnections()
      })
    )
    const address = server.address() as AddressInfo
    listener.listeningOn(address.port)
    return { port: address.port, host: settings.host }
  })

