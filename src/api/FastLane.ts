/**
 * The fast lane: the hottest routes answered inside the node:http listener, without the HttpApi
 * app, when the credential check and the payload can be done on the spot. Those are whoami and
 * the cache's put, get, delete and mget on the embedded engine, answered on the spot, and the
 * cluster SQL store's query and exec, answered when the store has (its statements leave in
 * batches: RqliteSqlEngine.ts), and the node-local database query, answered when its SQLite
 * worker has (requests pipelined: WorkerPool.ts), for a credential the registry can check on the spot: an API key,
 * or a token this gateway verified before, on the SQLite registry.
 *
 * Why: through the HttpApi app these routes cost ~50 µs of CPU each in fibers, context copies and
 * schema plumbing around a few microseconds of work (docs/performance.md), and they are what an
 * app calls on every page view. What stays the same: the endpoint's payload schema, the route
 * policy table, the services' rules (their `now` facets share their code with the effectful
 * ones), the rate limits and the access log. The answers are byte for byte the app's
 * (test/e2e/fastlane.test.ts sends the same requests to a gateway with the lane and one without).
 *
 * The lane declines, and the HttpApi app serves the request as if the lane did not exist, whenever
 * it cannot finish: a route or query string it does not take, a credential it cannot check on the
 * spot or that is refused, a policy refusal, a body that does not decode, a namespace limit not
 * read yet. It always declines before it has charged a rate limit or changed anything, so the app
 * then does everything once, as it would have. Refusals the lane gives itself are the two that
 * come after that point: 429 from the rate limits, and the cache service's own refusals.
 */
import { Cause, Effect, Either, Exit, Option, Runtime, Schema } from "effect"
import type * as http from "node:http"
import type { ErrorBody } from "../domain/Errors.js"
import { decoderOf } from "../domain/FastDecode.js"
import { oncePerObject } from "../domain/Memo.js"
import type { Principal } from "../domain/Principal.js"
import { memberSource, strictJson } from "../domain/StrictJson.js"
import { Authenticator } from "../layers/auth/Authenticator.js"
import { Cache, type CacheNow, type CacheRefused } from "../layers/cache/Cache.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { RegistryStore } from "../layers/registry/RegistryStore.js"
import type { Refused } from "../layers/Refused.js"
import { ClusterSql, type ClusterSqlService } from "../layers/sql/ClusterSql.js"
import { LocalDatabases, type LocalDatabasesService } from "../layers/sql/LocalDatabases.js"
import { bearerPattern, policyRefusal, rateLimited } from "./Authentication.js"
import { laneCors } from "./Cors.js"
import { envelopeOf } from "./ErrorResponses.js"
import { internalBody } from "./node/DirectAnswers.js"
import { whoamiOf } from "./groups/AuthGroup.js"
import { changedText, KeyRequest, MgetRequest, PutRequest, valuesText, valueText } from "./groups/CacheGroup.js"
import { StatementRequest } from "./groups/SqlGroup.js"
import { QueryRequest } from "./groups/DatabaseGroup.js"
import { RequestMeta } from "./RequestMeta.js"
import { type Policy, policyKey, routePolicies } from "./RoutePolicy.js"

/**
 * Answers a request and says with which status, or declines with undefined having written
 * nothing. `body` is the whole request body when it has one. A route that waits for a store says
 * "later" instead of a status, and calls `answered` with it once it has answered.
 */
export interface FastLane {
  (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer | undefined, answered?: (status: number) => void): number | "later" | undefined
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
}

interface Answer {
  readonly status: number
  readonly body: string
  /** Seconds, for a 429. */
  readonly retryAfter?: number
}

/** An answer that comes later: `done` gets it once (a refusal is an answer too). */
type Pending = (done: (answer: Answer) => void) => void

/** The route's work for one request, its payload decoded and ready: the caller in, the answer out, or its pending answer. */
type Work = (caller: Principal, now: number) => Answer | Pending

/** A route of the lane, as written: its work for a body text, or undefined when the body does not decode. */
type Route = (text: string) => Work | undefined

/** A route of the lane with who may call it. */
interface LaneRoute {
  readonly policy: Policy
  /** Undefined when the body does not decode: the app then says what is wrong. */
  readonly prepare: Route
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

const ok = (body: string): Answer => ({ status: 200, body })

/** The envelope of spec §7, as the app writes it. */
const envelope = (status: number, body: ErrorBody): Answer => ({ status, body: JSON.stringify(envelopeOf(body)) })

const refused = (e: CacheRefused): Answer => envelope(e.status, { error: e.reason, code: e.code, hint: e.hint })

/** A service's refusal as the app answers it (`refusedHttp`): `Retry-After` on 429 and 503. */
const refusedWide = (e: Refused): Answer => {
  const answer = envelope(e.status, { error: e.reason, code: e.code, hint: e.hint })
  return e.status === 429 || e.status === 503 ? { ...answer, retryAfter: e.retryAfterSeconds ?? 1 } : answer
}

/** The app's answer to a defect. */
const internalError: Answer = { status: 500, body: internalBody }

const fromCache = <A>(result: Either.Either<A, CacheRefused>, then: (a: A) => string): Answer =>
  Either.isRight(result) ? ok(then(result.right)) : refused(result.left)

/** A schema's decoder that says undefined instead of why (the app says why). */
const payloadDecoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = decoderOf(schema)
  return (value: unknown): A | undefined => {
    const decoded = decode(value)
    return Either.isRight(decoded) ? decoded.right : undefined
  }
}

/** Routes by `METHOD /path` with their policy; one the policy table lacks is left to the app. */
const withPolicies = (routes: ReadonlyArray<readonly [string, Route]>): ReadonlyArray<[string, LaneRoute]> =>
  routes.flatMap(([key, prepare]) => {
    const [method = "", path = ""] = key.split(" ")
    const policy = routePolicies[policyKey(method, path)]
    return policy === undefined ? [] : [[key, { policy, prepare }]]
  })

/** The body as the app reads it: strict JSON, an empty body being `{}`, then the schema. */
const jsonPayload = (maxBodyBytes: number) => {
  const limits = { maxChars: maxBodyBytes, maxDepth: 128 }
  return <A, I>(schema: Schema.Schema<A, I>) => {
    const decode = payloadDecoder(schema)
    return (text: string): A | undefined => {
      const value = text === "" ? Either.right({}) : strictJson(text, limits)
      return Either.isRight(value) ? decode(value.right) : undefined
    }
  }
}

const cacheRoutes = (cache: CacheNow, maxBodyBytes: number): ReadonlyArray<readonly [string, Route]> => {
  const json = jsonPayload(maxBodyBytes)
  const putPayload = json(PutRequest)
  const keyPayload = json(KeyRequest)
  const mgetPayload = json(MgetRequest)
  const put: Route = (text) => {
    const payload = putPayload(text)
    // the value's exact text, as the app stores it
    const value = payload === undefined ? undefined : memberSource(text, "value")
    if (payload === undefined || value === undefined) return undefined
    return (caller, now) =>
      fromCache(cache.put(caller, { dmap: payload.dmap, key: payload.key, json: value, ttl: payload.ttl }, now), () =>
        changedText(payload.key, payload.dmap)
      )
  }
  const get: Route = (text) => {
    const payload = keyPayload(text)
    if (payload === undefined) return undefined
    return (caller) => fromCache(cache.get(caller, payload.dmap, payload.key), (found) => valueText(payload.key, found, payload.dmap))
  }
  const del: Route = (text) => {
    const payload = keyPayload(text)
    if (payload === undefined) return undefined
    return (caller) => fromCache(cache.delete(caller, payload.dmap, payload.key), () => changedText(payload.key, payload.dmap))
  }
  const mget: Route = (text) => {
    const payload = mgetPayload(text)
    if (payload === undefined) return undefined
    return (caller) => fromCache(cache.mget(caller, payload.dmap, payload.keys), (found) => valuesText(payload.dmap, payload.keys, found))
  }
  return [
    ["POST /v1/cache/put", put],
    ["POST /v1/cache/get", get],
    ["POST /v1/cache/delete", del],
    ["POST /v1/cache/mget", mget]
  ]
}

/** A statement's outcome as the app writes it: its JSON answer, its refusal, or a logged defect as 500. */
const statementAnswer =
  (log: (defect: Cause.Cause<unknown>) => void) =>
  (exit: Exit.Exit<string, Refused>): Answer => {
    if (Exit.isSuccess(exit)) return ok(exit.value)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return refusedWide(failure.value)
    log(exit.cause)
    return internalError
  }

/**
 * The cluster SQL store's statement routes: the service's own call, its answer or refusal as the
 * app writes it, and a defect as the app's 500, logged. `log` runs in the gateway's runtime.
 */
const sqlRoutes = (sql: ClusterSqlService, maxBodyBytes: number, log: (defect: Cause.Cause<unknown>) => void): ReadonlyArray<readonly [string, Route]> => {
  const statement = jsonPayload(maxBodyBytes)(StatementRequest)
  const answerOf = statementAnswer(log)
  const route =
    (expect: "read" | "write"): Route =>
    (text) => {
      const payload = statement(text)
      if (payload === undefined) return undefined
      return (caller) => (done) => sql.statementNow(caller, payload.sql, payload.args ?? [], expect, (exit) => done(answerOf(exit)))
    }
  return [
    ["POST /v1/rqlite/query", route("read")],
    ["POST /v1/rqlite/exec", route("write")]
  ]
}

/**
 * The node-local database query route (`LocalDatabases.queryNow`): a database homed here goes
 * straight to its SQLite worker, anything else (forwarding, a record not read yet) through the
 * service's effect; the answer or refusal as the app writes it.
 */
const localSqlRoutes = (local: LocalDatabasesService, maxBodyBytes: number, log: (defect: Cause.Cause<unknown>) => void): ReadonlyArray<readonly [string, Route]> => {
  const query = jsonPayload(maxBodyBytes)(QueryRequest)
  const answerOf = statementAnswer(log)
  const route: Route = (text) => {
    const payload = query(text)
    if (payload === undefined) return undefined
    // booleans bind as 0 and 1, as the app binds them
    const params = (payload.params ?? []).map((p) => (typeof p === "boolean" ? (p ? 1 : 0) : p))
    return (caller) => (done) => local.queryNow(caller, payload.database_name, payload.query, params, (exit) => done(answerOf(exit)))
  }
  return [["POST /v1/db/sqlite/query", route]]
}

/** The lane over the gateway's services: whoami always, the cache routes where the engine answers on the spot, SQL statements where the service is. */
export const makeFastLane = Effect.gen(function* () {
  const authenticator = yield* Authenticator
  const limiter = yield* RateLimiter
  const cache = yield* Cache
  const config = yield* PorticoConfig
  const registry = yield* RegistryStore
  const sql = yield* Effect.serviceOption(ClusterSql)
  const local = yield* Effect.serviceOption(LocalDatabases)
  const corsOf = yield* laneCors
  const runtime = yield* Effect.runtime<never>()
  const runCallback = Runtime.runCallback(runtime)
  const operators = config.operators
  const logRequests = config.logRequests

  // whoami takes no payload, and a body is not read, as the app does not read one. A key's principal
  // is the same object while its row is unchanged (Authenticator.ts), so its answer is made once.
  const whoamiText = oncePerObject((caller: Principal) => JSON.stringify(whoamiOf(caller)))
  const answerWhoami: Work = (caller) => ok(whoamiText(caller))
  const whoami: Route = () => answerWhoami
  const routes = new Map<string, LaneRoute>(
    withPolicies([
      ["GET /v1/auth/whoami", whoami],
      ...(cache.now === undefined ? [] : cacheRoutes(cache.now, config.maxBodyBytes)),
      ...(Option.isNone(sql) ? [] : sqlRoutes(sql.value, config.maxBodyBytes, (defect) => runCallback(Effect.logError("request failed", Cause.squash(defect))))),
      ...(Option.isNone(local) ? [] : localSqlRoutes(local.value, config.maxBodyBytes, (defect) => runCallback(Effect.logError("request failed", Cause.squash(defect)))))
    ])
  )

  const write = (res: http.ServerResponse, answer: Answer): void => {
    const length = Buffer.byteLength(answer.body)
    res.writeHead(
      answer.status,
      answer.retryAfter === undefined
        ? { "content-type": "application/json", "content-length": length }
        : { "content-type": "application/json", "content-length": length, "retry-after": String(answer.retryAfter) }
    )
    res.end(answer.body)
  }

  const answerNow = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer | undefined,
    answered?: (status: number) => void
  ): number | "later" | undefined => {
    // the exact path only: a query string (refused as unknown members), a trailing slash or an
    // encoded character is the app's to answer
    const route = routes.get(`${req.method} ${req.url}`)
    if (route === undefined) return undefined
    const header = req.headers["authorization"]
    const bearer = header === undefined ? undefined : bearerPattern.exec(header)?.[1]
    if (bearer === undefined) return undefined
    const now = Date.now()
    const authenticated = authenticator.authenticateNow(bearer, now)
    if (authenticated === undefined || Either.isLeft(authenticated)) return undefined
    const caller = authenticated.right
    if (policyRefusal(route.policy, caller, operators) !== undefined) return undefined
    // a browser's request: its CORS headers, unless the namespace's origins must be read first
    const cors = corsOf(req, caller.namespace, now)
    if (cors === undefined) return undefined

    let text = ""
    if (body !== undefined && req.method !== "GET") {
      try {
        text = utf8.decode(body)
      } catch {
        return undefined
      }
    }
    const work = route.prepare(text)
    if (work === undefined) return undefined

    const admission = limiter.admitNow(caller.namespace, now)
    if (admission === undefined) return undefined
    // past the last decline: headers set now go out with whatever answer this request gets
    for (const name in cors) res.setHeader(name, cors[name]!)
    // for the access log's line, when there is one
    if (logRequests) RequestMeta.setNamespaceOfSource(req, caller.namespace)
    let answer: Answer | Pending
    if (admission.allowed) answer = work(caller, now)
    else {
      const limited = rateLimited(admission.retryAfterSeconds, admission.refusedBy ?? "network")
      answer = { ...envelope(429, limited), retryAfter: limited.retryAfterSeconds }
    }
    if (typeof answer !== "function") {
      write(res, answer)
      return answer.status
    }
    // A client gone meanwhile is not waited for, nor is its statement called off: the write may
    // be on its way in a batch already. node drops an answer to a closed socket.
    answer((given) => {
      // a client gone meanwhile is logged as the app logs it, 499
      if (res.destroyed || res.socket?.destroyed === true) return answered?.(499)
      try {
        write(res, given)
      } catch (e) {
        // called from a batch's callback: the answer that could not be written is this request's alone
        runCallback(Effect.logError("request failed", e))
        res.destroy()
        return answered?.(500)
      }
      answered?.(given.status)
    })
    return "later"
  }
  const lane: FastLane = Object.assign(answerNow, {
    takes: (req: http.IncomingMessage) => routes.has(`${req.method} ${req.url}`),
    turn: registry.holdNow ?? (<A>(answerAll: () => A): A => answerAll())
  })
  return lane
})
