/**
 * The fast lane: the hottest routes answered inside the node:http listener, without the HttpApi
 * app, when the gate and the payload can be decided on the spot. Which routes: those whose
 * endpoint carries a `FastLaneRoute` annotation (RouteFacts.ts): whoami, the cache's put, get,
 * delete and mget on the embedded engine, the cluster SQL store's query and exec (answered when the
 * store has: its statements leave in batches, RqliteSqlEngine.ts), the node-local database query
 * (answered when its SQLite worker has: WorkerPool.ts), that query as another gateway forwards
 * it to the database's home node (`/v1/internal/sqlite/query`, PeerGate's checks made here), so a
 * forwarded read pays for one app path, not two, TURN credentials (a keyed hash over settings
 * read in the last seconds; WebRtc.ts), and the vault's push and pull with the guardians' share
 * routes they call on the other nodes (lane/VaultLane.ts).
 *
 * Why: through the HttpApi app these routes cost ~50 µs of CPU each in fibers, context copies and
 * schema plumbing around a few microseconds of work (docs/performance.md), and they are what an
 * app calls on every page view. What stays the same: the gate (Gate.ts, the very same decision in
 * the same order), the endpoint's payload schema, the body reader (JsonBody.ts), the refusal
 * encoder (ErrorResponses.ts `refusalOf`), the services' rules (their `now` facets share their
 * code with the effectful ones) and the access log. test/e2e/fastlane.test.ts sends the same
 * requests to a gateway with the lane and one without and compares every header and the body.
 *
 * The lane leaves a request to the app whenever it cannot finish it: a route or query string it
 * does not take, a gate that must read a store first, a refusal of the gate, a browser origin not
 * known yet, a body that does not decode. Once the gate has decided, the decision goes with the
 * request (RequestMeta `setGated`), so the app's gate takes it as it is: nothing is charged twice,
 * and the app writes the refusal or the decode error as it always does.
 */
import { clientAddressOf } from "./node/ClientAddress.js"
import { Cause, Effect, Either, Exit, Option, Runtime } from "effect"
import type * as http from "node:http"
import { CoordinationRefused, type DomainRefusal, ValidationFailed, type ErrorCode, fromRefusal } from "../domain/Errors.js"
import { oncePerObject } from "../domain/Memo.js"
import { type Principal, toPrincipal } from "../domain/Principal.js"
import { memberSource } from "../domain/StrictJson.js"
import { Cache, type CacheNow } from "../layers/cache/Cache.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { bytesSigned, Coordination, ENVELOPE_HEADER, MAC_UNHELD } from "../layers/coordination/Coordination.js"
import { RegistryStore } from "../layers/registry/RegistryStore.js"
import type { Refused } from "../layers/Refused.js"
import { ClusterSql, type ClusterSqlService } from "../layers/sql/ClusterSql.js"
import { LocalDatabases, type LocalDatabasesService } from "../layers/sql/LocalDatabases.js"
import { Vault } from "../layers/vault/Vault.js"
import { WebRtc, type WebRtcService } from "../layers/webrtc/WebRtc.js"
import { laneCors } from "./Cors.js"
import { type Decision, Gate } from "./gate/Gate.js"
import { routeIndex } from "./gate/RouteIndex.js"
import { whoamiOf } from "./groups/AuthGroup.js"
import { changedText, KeyRequest, MgetRequest, PutRequest, valuesText, valueText } from "./groups/CacheGroup.js"
import { QueryRequest } from "./groups/DatabaseGroup.js"
import { ForwardedQuery } from "./groups/InternalGroup.js"
import { StatementRequest } from "./groups/SqlGroup.js"
import { turnCredentialsWire } from "./groups/WebRtcGroup.js"
import { bind } from "./handlers/DatabaseHandlers.js"
import { utf8Text } from "./JsonBody.js"
import { type Answer, internalError, jsonPayload, ok, type Pending, type PeerRoute, refused, type Route, type Work } from "./lane/LaneAnswer.js"
import { vaultPeerRoutes, vaultRoutes } from "./lane/VaultLane.js"
import { NoMembers } from "./Wire.js"
import type { Policy } from "./Policy.js"
import { RequestMeta } from "./RequestMeta.js"
import { FORWARDED_ROOM_BYTES, type LaneName } from "./RouteFacts.js"

/**
 * Told the status of an answer written later. An object rather than a callback, so the listener
 * passes the request's own record and allocates nothing per request (RequestListener.ts).
 */
export interface LaneAnswered {
  readonly laneAnswered: (status: number) => void
}

/**
 * Answers a request and says with which status, or declines with undefined having written
 * nothing. `body` is the whole request body when it has one. A route that waits for a store says
 * "later" instead of a status, and tells `answered` the status once it has answered.
 */
export interface FastLane {
  (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer | undefined, answered?: LaneAnswered): number | "later" | undefined
  /** Whether the request's route is one the lane answers (it may still decline the request). */
  readonly takes: (req: http.IncomingMessage) => boolean
  /**
   * Answers a turn's requests: `answerAll` calls the lane for each, and one check of the
   * registry for commits stands for all of their credential reads instead of one check each.
   *
   * Sound because the listener calls it from `setImmediate`, after the event loop's poll phase,
   * for requests read whole during that phase. A revocation acknowledged before a request was
   * sent was committed before the request's bytes could arrive, so before they were read, so
   * before this check. A check made earlier in the phase, while other sockets were still being
   * read, would not be: that is why requests are not answered as they are read.
   */
  readonly turn: <A>(answerAll: () => A) => A
  /**
   * A node-to-node call that came on a peer channel (PeerChannel.ts), whose frame's MAC stands
   * for the coordination MAC: answered as the lane answers the same HTTP call, `done` once. False
   * when the lane has no such route, or the route signs more than its JSON body.
   */
  readonly peerCall: (path: string, body: string, done: (answer: Answer) => void) => boolean
}

const NO_BYTES = new Uint8Array(0)

/** A route of the lane with who may call it. */
interface LaneRoute {
  readonly policy: Policy
  /** Undefined when the body does not decode: the app then says what is wrong. */
  readonly prepare: Route
}

const fromCache = <A, E extends DomainRefusal<ErrorCode>>(result: Either.Either<A, E>, then: (a: A) => string): Answer =>
  Either.isRight(result) ? ok(then(result.right)) : refused(fromRefusal(result.left))

const cacheRoutes = (cache: CacheNow, maxBodyBytes: number): Partial<Record<LaneName, Route>> => {
  const json = jsonPayload(maxBodyBytes)
  const putPayload = json(PutRequest)
  const keyPayload = json(KeyRequest)
  const mgetPayload = json(MgetRequest)
  return {
    "cache.put": (text) => {
      const payload = putPayload(text)
      // the value's exact text, as the app stores it
      const value = payload === undefined ? undefined : memberSource(text, "value")
      if (payload === undefined || value === undefined) return undefined
      return (caller, now) =>
        fromCache(cache.put(caller, { dmap: payload.dmap, key: payload.key, json: value, ttl: payload.ttl }, now), () =>
          changedText(payload.key, payload.dmap)
        )
    },
    "cache.get": (text) => {
      const payload = keyPayload(text)
      if (payload === undefined) return undefined
      return (caller) => fromCache(cache.get(caller, payload.dmap, payload.key), (found) => valueText(payload.key, found, payload.dmap))
    },
    "cache.delete": (text) => {
      const payload = keyPayload(text)
      if (payload === undefined) return undefined
      return (caller) => fromCache(cache.delete(caller, payload.dmap, payload.key), () => changedText(payload.key, payload.dmap))
    },
    "cache.mget": (text) => {
      const payload = mgetPayload(text)
      if (payload === undefined) return undefined
      return (caller) => fromCache(cache.mget(caller, payload.dmap, payload.keys), (found) => valuesText(payload.dmap, payload.keys, found))
    }
  }
}

/** A statement's outcome as the app writes it: its JSON answer, its refusal, or a logged defect as 500. */
const statementAnswer =
  (log: (defect: Cause.Cause<unknown>) => void) =>
  (exit: Exit.Exit<string, Refused>): Answer => {
    if (Exit.isSuccess(exit)) return ok(exit.value)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return refused(fromRefusal(failure.value))
    log(exit.cause)
    return internalError
  }

/**
 * The cluster SQL store's statement routes: the service's own call, its answer or refusal as the
 * app writes it, and a defect as the app's 500, logged. `log` runs in the gateway's runtime.
 */
const sqlRoutes = (sql: ClusterSqlService, maxBodyBytes: number, log: (defect: Cause.Cause<unknown>) => void): Partial<Record<LaneName, Route>> => {
  const statement = jsonPayload(maxBodyBytes)(StatementRequest)
  const answerOf = statementAnswer(log)
  const route =
    (expect: "read" | "write"): Route =>
    (text) => {
      const payload = statement(text)
      if (payload === undefined) return undefined
      return (caller) => (done) => sql.statementNow(caller, payload.sql, payload.args ?? [], expect, (exit) => done(answerOf(exit)))
    }
  return { "sql.query": route("read"), "sql.exec": route("write") }
}

/**
 * The node-local database query route (`LocalDatabases.queryNow`): a database homed here goes
 * straight to its SQLite worker, one homed elsewhere to its home node, a record not read yet
 * through the service's effect; the answer or refusal as the app writes it.
 */
const localSqlRoutes = (local: LocalDatabasesService, maxBodyBytes: number, log: (defect: Cause.Cause<unknown>) => void): Partial<Record<LaneName, Route>> => {
  const query = jsonPayload(maxBodyBytes)(QueryRequest)
  const answerOf = statementAnswer(log)
  return {
    "db.query": (text) => {
      const payload = query(text)
      if (payload === undefined) return undefined
      // booleans bind as 0 and 1, as the app binds them
      const params = bind(payload.params ?? [])
      return (caller) => (done) => local.queryNow(caller, payload.database_name, payload.query, params, (exit) => done(answerOf(exit)))
    }
  }
}

/**
 * A node-local database query forwarded by the gateway a client reached (HomeNode.ts), run here
 * as the internal route's handler runs it (`LocalDatabases.queryHereNow`, never forwarding again).
 */
const peerSqlRoutes = (local: LocalDatabasesService, maxBodyBytes: number, log: (defect: Cause.Cause<unknown>) => void): Partial<Record<LaneName, PeerRoute>> => {
  const query = jsonPayload(maxBodyBytes)(ForwardedQuery)
  const answerOf = statementAnswer(log)
  return {
    "internal.sqlite.query": {
      signs: "body",
      prepare: (text) => {
        const payload = query(text)
        if (payload === undefined) return undefined
        const caller = toPrincipal(payload.principal)
        return () => (done) => local.queryHereNow(caller, payload.database_name, payload.query, bind(payload.params), (exit) => done(answerOf(exit)))
      }
    }
  }
}

/**
 * TURN credentials: on the spot from the namespace's settings read in the last seconds, else
 * through the service's effect (which reads them), answered once it has.
 */
const webRtcRoutes = (webrtc: WebRtcService, maxBodyBytes: number, runCallback: ReturnType<typeof Runtime.runCallback<never>>): Partial<Record<LaneName, Route>> => {
  const nothing = jsonPayload(maxBodyBytes)(NoMembers)
  // a namespace's credentials are the same object for a whole second (their expiry counts
  // seconds) unless its settings change (stealth gives other URIs): the answer's text is made
  // once per credentials object, never reused for the next one of the same second
  const lastText = new Map<string, { readonly credentials: object; readonly text: string }>()
  const textOf = (namespace: string, c: Parameters<typeof turnCredentialsWire>[0]): string => {
    const last = lastText.get(namespace)
    if (last !== undefined && last.credentials === c) return last.text
    const text = JSON.stringify(turnCredentialsWire(c))
    if (lastText.size >= 10_000) lastText.clear()
    lastText.set(namespace, { credentials: c, text })
    return text
  }
  const answerOf = (namespace: string, result: Either.Either<Parameters<typeof turnCredentialsWire>[0], DomainRefusal<ErrorCode>>): Answer =>
    fromCache(result, (c) => textOf(namespace, c))
  return {
    "webrtc.turn": (text) => {
      // the body every client sends ({} or none) needs no parse; anything else goes through the reader
      if (text !== "{}" && text !== "" && nothing(text) === undefined) return undefined
      return (caller, now) => {
        const known = webrtc.turnCredentialsNow(caller.namespace, now)
        if (known !== undefined) return answerOf(caller.namespace, known)
        return (done) =>
          runCallback(Effect.either(webrtc.turnCredentials(caller.namespace)), {
            onExit: (exit) => done(Exit.isSuccess(exit) ? answerOf(caller.namespace, exit.value) : internalError)
          })
      }
    }
  }
}

/** The lane over the gateway's services: whoami always, the cache routes where the engine answers on the spot, SQL statements where the service is. */
export const makeFastLane = Effect.gen(function* () {
  const gate = yield* Gate
  const cache = yield* Cache
  const config = yield* PorticoConfig
  const registry = yield* RegistryStore
  const sql = yield* Effect.serviceOption(ClusterSql)
  const local = yield* Effect.serviceOption(LocalDatabases)
  const coordination = yield* Effect.serviceOption(Coordination)
  const webrtc = yield* Effect.serviceOption(WebRtc)
  const vault = yield* Effect.serviceOption(Vault)
  const corsOf = yield* laneCors
  const runtime = yield* Effect.runtime<never>()
  const runCallback = Runtime.runCallback(runtime)
  const logRequests = config.logRequests
  const logDefect = (defect: Cause.Cause<unknown>) => runCallback(Effect.logError("request failed", Cause.squash(defect)))

  // whoami takes no payload, and a body is not read, as the app does not read one. A key's principal
  // is the same object while its row is unchanged (Authenticator.ts), so its answer is made once.
  const whoamiText = oncePerObject((caller: Principal) => JSON.stringify(whoamiOf(caller)))
  const answerWhoami: Work = (caller) => ok(whoamiText(caller))
  const implementations: Partial<Record<LaneName, Route>> = {
    whoami: () => answerWhoami,
    ...(cache.now === undefined ? {} : cacheRoutes(cache.now, config.maxBodyBytes)),
    ...(Option.isNone(sql) ? {} : sqlRoutes(sql.value, config.maxBodyBytes, logDefect)),
    ...(Option.isNone(local) ? {} : localSqlRoutes(local.value, config.maxBodyBytes, logDefect)),
    ...(Option.isNone(webrtc) ? {} : webRtcRoutes(webrtc.value, config.maxBodyBytes, runCallback)),
    ...(Option.isNone(vault) ? {} : vaultRoutes(vault.value, config.maxBodyBytes, runCallback))
  }
  const peerImplementations: Partial<Record<LaneName, PeerRoute>> = Option.isNone(coordination)
    ? {}
    : {
        // the front gateway's cap plus the caller it adds, as the route's own body cap
        ...(Option.isNone(local) ? {} : peerSqlRoutes(local.value, config.maxBodyBytes + FORWARDED_ROOM_BYTES, logDefect)),
        ...(Option.isNone(vault) ? {} : vaultPeerRoutes(vault.value.guardian, config.maxBodyBytes))
      }
  // the routes the endpoints mark for the lane, by their exact request line (the lane takes fixed paths)
  const routes = new Map<string, LaneRoute>()
  const peerRoutes = new Map<string, PeerRoute>()
  for (const entry of routeIndex().entries) {
    if (entry.lane === undefined || !entry.fixed) continue
    const line = `${entry.method} ${entry.path}`
    const prepare = implementations[entry.lane]
    if (prepare !== undefined && entry.policy.kind !== "internal") routes.set(line, { policy: entry.policy, prepare })
    const peer = peerImplementations[entry.lane]
    if (peer !== undefined && entry.policy.kind === "internal") peerRoutes.set(line, peer)
  }

  const write = (res: http.ServerResponse, answer: Answer): void => {
    const length = typeof answer.body === "string" ? Buffer.byteLength(answer.body) : answer.body.byteLength
    if (answer.headers !== undefined) {
      res.writeHead(answer.status, { ...answer.headers, "content-length": length })
      res.end(answer.body)
      return
    }
    res.writeHead(
      answer.status,
      answer.retryAfter === undefined
        ? { "content-type": "application/json", "content-length": length }
        : { "content-type": "application/json", "content-length": length, "retry-after": String(answer.retryAfter) }
    )
    res.end(answer.body)
  }

  /** Leaves the request to the app with the gate's decision on it. */
  const leave = (req: http.IncomingMessage, decision: Decision): undefined => {
    RequestMeta.setGated(req, decision)
    return undefined
  }

  /** Writes a work's answer now, or once it comes; says with which status, or "later". */
  const respond = (res: http.ServerResponse, answer: Answer | Pending, answered?: LaneAnswered): number | "later" => {
    if (typeof answer !== "function") {
      write(res, answer)
      return answer.status
    }
    // A client gone meanwhile is not waited for, nor is its statement called off: the write may
    // be on its way in a batch already. node drops an answer to a closed socket.
    answer((given) => {
      // a client gone meanwhile is logged as the app logs it, 499
      if (res.destroyed || res.socket?.destroyed === true) return answered?.laneAnswered(499)
      try {
        write(res, given)
      } catch (e) {
        // called from a batch's callback: the answer that could not be written is this request's alone
        runCallback(Effect.logError("request failed", e))
        res.destroy()
        return answered?.laneAnswered(500)
      }
      answered?.laneAnswered(given.status)
    })
    return "later"
  }

  /**
   * A node-to-node call: PeerGate's verification, then the route. Nothing is charged to a client
   * network (PeerGate charges none). A browser's Origin, which no peer sends, is the app's.
   */
  const answerPeer = (
    route: PeerRoute,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer | undefined,
    answered?: LaneAnswered
  ): number | "later" | undefined => {
    if (coordination._tag === "None" || req.headers["origin"] !== undefined) return undefined
    const headers = req.headers as Readonly<Record<string, string | undefined>>
    const bytes = body ?? NO_BYTES
    const text = route.signs === "envelope" ? (headers[ENVELOPE_HEADER] ?? "") : utf8Text(bytes)
    if (text === undefined) return undefined
    // PeerGate's checks (src/api/gate/GatesLive.ts): source, headers, the MAC over the fixed
    // path and what the route signs (no v1 here), then the nonce spent. A MAC that only a root
    // generation not held yet could tell is the app's: PeerGate reads the newer ones first.
    const covered = route.signs === "envelope" ? bytesSigned(text, bytes) : text
    const refusal = coordination.value.verifyNow("POST", req.url ?? "", covered, headers, clientAddressOf(req), false, Date.now())
    if (refusal === MAC_UNHELD) return undefined
    if (refusal !== undefined) {
      const answer = refused(new CoordinationRefused({ error: refusal }))
      write(res, answer)
      return answer.status
    }
    const work = route.prepare(text, bytes)
    // the nonce is spent: the app takes the call as verified and says what is wrong with the body
    if (work === undefined) return leave(req, { _tag: "Admitted", principal: undefined })
    return respond(res, work(), answered)
  }

  const answerNow = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer | undefined,
    answered?: LaneAnswered
  ): number | "later" | undefined => {
    // the exact path only: a query string (refused as unknown members), a trailing slash or an
    // encoded character is the app's to answer
    const line = `${req.method} ${req.url}`
    const route = routes.get(line)
    if (route === undefined) {
      const peer = peerRoutes.get(line)
      return peer === undefined ? undefined : answerPeer(peer, req, res, body, answered)
    }
    const now = Date.now()
    const client = clientAddressOf(req)
    const decision = gate.now(
      route.policy,
      {
        authorization: req.headers["authorization"],
        remoteAddress: client,
        clientCharged: RequestMeta.clientChargedSource(req),
        noteNamespace: logRequests ? (namespace) => RequestMeta.setNamespaceOfSource(req, namespace) : undefined
      },
      now
    )
    // a store must be read first: nothing is charged yet, the app's gate decides afresh
    if (decision._tag === "Later") return undefined
    // from here on the decision goes with the request whenever the app is left to answer
    if (decision._tag === "Refused") {
      // the namespace's rate limit is the lane's to answer, cheaply, under the load it refuses;
      // any other refusal the app writes, as it does every refusal
      const cors = decision.error._tag === "RateLimited" && decision.namespace !== undefined ? corsOf(req, decision.namespace, now) : undefined
      if (cors === undefined) return leave(req, decision)
      for (const name in cors) res.setHeader(name, cors[name]!)
      const limited = refused(decision.error)
      write(res, limited)
      return limited.status
    }
    const caller = decision.principal
    if (caller === undefined) return leave(req, decision)
    // a browser's request: its CORS headers, unless the namespace's origins must be read first
    const cors = corsOf(req, caller.namespace, now)
    if (cors === undefined) return leave(req, decision)
    const text = body === undefined || req.method === "GET" ? "" : utf8Text(body)
    const work = text === undefined ? undefined : route.prepare(text)
    if (work === undefined) return leave(req, decision)

    for (const name in cors) res.setHeader(name, cors[name]!)
    return respond(res, work(caller, now, client), answered)
  }
  const peerCall: FastLane["peerCall"] = (path, body, done) => {
    const route = peerRoutes.get(`POST ${path}`)
    if (route === undefined || route.signs !== "body") return false
    const work = route.prepare(body, NO_BYTES)
    // the peer is a gateway of this cluster encoding with the same schema: a payload that does not
    // decode is a defect between versions, told as the app tells a decode error
    if (work === undefined) {
      done(refused(new ValidationFailed({ error: `the call to ${path} does not decode`, hint: "check the gateways' versions" })))
      return true
    }
    const answer = work()
    if (typeof answer === "function") answer(done)
    else done(answer)
    return true
  }
  const lane: FastLane = Object.assign(answerNow, {
    peerCall,
    takes: (req: http.IncomingMessage) => {
      const line = `${req.method} ${req.url}`
      return routes.has(line) || peerRoutes.has(line)
    },
    turn: registry.holdNow ?? (<A>(answerAll: () => A): A => answerAll())
  })
  return lane
})
