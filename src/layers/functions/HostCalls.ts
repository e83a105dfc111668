/**
 * The host calls the gateway answers for a running function (docs/functions.md, "Host calls"),
 * each against an existing service and always in the invocation's namespace, as the function's
 * own principal: nothing a guest passes names a namespace or raises what it may do.
 *
 * Failures are the call's 0 (or, for the calls with an envelope, an envelope with `error`), and
 * are logged to the function's log with the call's name, as the original system does.
 */
import { Effect, Option } from "effect"
import { parseExactJson } from "../../domain/ExactJson.js"
import type { HostCallName } from "../../domain/FunctionHostCalls.js"
import type { Principal } from "../../domain/Principal.js"
import { isReserved } from "../../domain/PubSubRules.js"
import type { CacheStoreService } from "../cache/CacheStore.js"
import { PLATFORM_PREFIX } from "../../domain/Names.js"
import type { GuardedFetchService } from "../egress/GuardedFetch.js"
import type { PubSubService } from "../pubsub/PubSub.js"
import type { PushSenderService } from "../push/PushSender.js"
import type { SealerService } from "../secrets/Sealer.js"
import type { ClusterSqlService } from "../sql/ClusterSql.js"
import type { StorageService } from "../storage/Storage.js"
import type { FunctionStoreService } from "./FunctionStore.js"
import type { SocketDirectoryService } from "./SocketDirectory.js"
import type { HostAnswer, HostArg } from "./runner/Protocol.js"
import type { RoomsService } from "../webrtc/Rooms.js"
import type { WebRtcService } from "../webrtc/WebRtc.js"
import { ROOM_NAME } from "../../domain/SfuTicket.js"

/** The function's map in the namespace's cache: under `_portico/`, which no HTTP grant reaches. */
export const FUNCTION_CACHE_MAP = `${PLATFORM_PREFIX}functions`
const TEN_YEARS_S = 10 * 365 * 24 * 3600
/** An admission lasts 1 s to 7 days. */
const ADMISSION_MAX_S = 7 * 86_400
const PUBLISHES_PER_INVOCATION = 1000

export interface HostServices {
  readonly sql: ClusterSqlService
  readonly cache: CacheStoreService
  readonly pubsub: PubSubService
  readonly push: PushSenderService
  readonly fetch: GuardedFetchService
  readonly storage: StorageService
  readonly store: FunctionStoreService
  readonly sealer: SealerService
  readonly sockets: SocketDirectoryService
  readonly webrtc: WebRtcService
  readonly rooms: RoomsService
  readonly maxAnswerBytes: number
  /** A socket frame's cap, both ways. */
  readonly maxFrameBytes: number
}

export interface InvocationContext {
  readonly namespace: string
  readonly functionName: string
  /** The function acting: its own principal (grants of the runtime profile, db:write). */
  readonly principal: Principal
  readonly log: (level: "info" | "error", message: string) => void
  /** Another function of the namespace, run as a nested call of this one. */
  readonly invoke: (name: string, input: Uint8Array) => Promise<Uint8Array | undefined>
  /** How many topic triggers deep this invocation runs (0: invoked over HTTP or on a schedule). */
  readonly depth: number
  /** The socket a persistent instance serves: `ws_send` and `ws_disconnect` with an empty id mean it. */
  readonly socket?: string | undefined
  /** Time left before the invocation's deadline, ms. */
  readonly remainingMs: () => number
}

const decoder = new TextDecoder()
const encoder = new TextEncoder()
const text = (arg: HostArg | undefined): string => (arg instanceof Uint8Array ? decoder.decode(arg) : "")
const ok = (value: Uint8Array | number | bigint | null): HostAnswer => ({ ok: true, value })
const fail: HostAnswer = { ok: false }
const json = (value: unknown): HostAnswer => ok(encoder.encode(JSON.stringify(value)))

/** SQL arguments: a JSON array of scalars, integers past 2^53 exact (ExactJson, as the SQL routes read them). */
const sqlArgs = (raw: string): ReadonlyArray<string | number | bigint | boolean | null> | undefined => {
  if (raw.trim() === "") return []
  try {
    const parsed = parseExactJson(raw)
    if (!Array.isArray(parsed) || parsed.some((v) => v !== null && typeof v === "object")) return undefined
    return parsed as Array<string | number | bigint | boolean | null>
  } catch {
    return undefined
  }
}

/** A refusal of the SQL guard is the call's 0 even for the enveloped calls (the original system's rule). */
const guardRefused = (code: string): boolean => code === "SQL_NOT_ALLOWED"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect as Effect.Effect<A, never>)

export const makeHostCalls = (services: HostServices) => (context: InvocationContext) => {
  let publishes = 0
  const { namespace } = context
  const refused = (call: string, reason: string): HostAnswer => {
    context.log("error", `${call}: ${reason}`)
    return fail
  }
  const capped = (bytes: Uint8Array, call: string): HostAnswer =>
    bytes.length > services.maxAnswerBytes ? refused(call, `answer over ${services.maxAnswerBytes} bytes`) : ok(bytes)

  const sqlRead = async (call: string, args: ReadonlyArray<HostArg>, envelope: boolean): Promise<HostAnswer> => {
    const bound = sqlArgs(text(args[1]))
    if (bound === undefined) return refused(call, "args must be a JSON array")
    const answer = await run(Effect.either(services.sql.query(context.principal, text(args[0]), bound, "objects")))
    if (answer._tag === "Left") {
      return envelope && !guardRefused(answer.left.code)
        ? json({ rows: [], error: answer.left.reason, code: answer.left.code })
        : refused(call, answer.left.reason)
    }
    return capped(encoder.encode(envelope ? `{"rows":${answer.right}}` : answer.right), call)
  }
  const sqlWrite = async (call: string, args: ReadonlyArray<HostArg>, envelope: boolean): Promise<HostAnswer> => {
    const bound = sqlArgs(text(args[1]))
    if (bound === undefined) return refused(call, "args must be a JSON array")
    const answer = await run(Effect.either(services.sql.exec(context.principal, text(args[0]), bound)))
    if (answer._tag === "Left") {
      return envelope && !guardRefused(answer.left.code)
        ? json({ rows_affected: 0, last_insert_id: 0, error: answer.left.reason, code: answer.left.code })
        : refused(call, answer.left.reason)
    }
    if (envelope) return ok(encoder.encode(answer.right))
    const affected = Number((JSON.parse(answer.right) as { rows_affected: number }).rows_affected)
    return ok(affected | 0)
  }

  const cacheKey = (key: string) => (key.length === 0 || key.length > 200 ? undefined : key)

  /**
   * A kick or mute of `user` in `room` on every node's media server: a kick also revokes the
   * user's admission, so they do not join again on it. The envelope names how many peers it reached.
   */
  const control = async (call: string, action: "kick" | "mute" | "unmute", room: string, user: string): Promise<HostAnswer> => {
    if (!ROOM_NAME.test(room) || user === "" || user.length > 256) return refused(call, "a room (1-64 of A-Z a-z 0-9 _ . -) and a user are needed")
    const status = await run(Effect.either(services.webrtc.status(namespace)))
    if (status._tag === "Left") return refused(call, status.left.reason)
    if (!status.right.enabled) return refused(call, "real-time media is not enabled for this namespace")
    const revoked = action === "kick" ? await run(Effect.either(services.webrtc.revoke(namespace, room, user))) : undefined
    if (revoked?._tag === "Left") return refused(call, revoked.left.reason)
    const reached = await run(services.rooms.control({ ns: namespace, room, user, peer: "", action }))
    return json({ affected: reached.affected, ...(revoked === undefined ? {} : { revoked: revoked.right }), unreachable: reached.unreachable })
  }

  const calls: Partial<Record<HostCallName, (args: ReadonlyArray<HostArg>) => Promise<HostAnswer>>> = {
    get_secret: async ([key]) => {
      const sealed = await run(Effect.either(services.store.secret(namespace, context.functionName, text(key))))
      if (sealed._tag === "Left" || sealed.right === undefined) return fail
      const opened = await run(Effect.either(services.sealer.open("function-secret", `${namespace}/${context.functionName}/${text(key)}`, sealed.right)))
      return opened._tag === "Left" ? fail : ok(opened.right)
    },
    db_query: (args) => sqlRead("db_query", args, false),
    db_query_v2: (args) => sqlRead("db_query_v2", args, true),
    db_execute: (args) => sqlWrite("db_execute", args, false),
    db_execute_v2: (args) => sqlWrite("db_execute_v2", args, true),
    cache_get: async ([key]) => {
      const k = cacheKey(text(key))
      if (k === undefined) return fail
      const got = await run(Effect.either(services.cache.get(namespace, FUNCTION_CACHE_MAP, k)))
      if (got._tag === "Left") return refused("cache_get", "the cache did not answer")
      return Option.isSome(got.right) ? ok(encoder.encode(got.right.value)) : fail
    },
    cache_set: async ([key, value, ttl]) => {
      const k = cacheKey(text(key))
      const seconds = Number(ttl ?? 0)
      if (k === undefined) return refused("cache_set", "keys are 1-200 characters")
      if (seconds < 0 || seconds > TEN_YEARS_S) return refused("cache_set", "ttl_seconds is 0 (no expiry) to ten years")
      const body = text(value)
      if (!services.cache.fits(FUNCTION_CACHE_MAP, k, body)) return refused("cache_set", "the value is larger than the namespace's cache")
      const put = await run(
        Effect.either(services.cache.put(namespace, FUNCTION_CACHE_MAP, k, { json: body, expiresAt: seconds === 0 ? undefined : Date.now() + seconds * 1000 }))
      )
      return put._tag === "Left" ? refused("cache_set", "the cache did not answer") : ok(null)
    },
    cache_delete: async ([key]) => {
      const k = cacheKey(text(key))
      if (k === undefined) return fail
      const gone = await run(Effect.either(services.cache.delete(namespace, FUNCTION_CACHE_MAP, k)))
      return gone._tag === "Left" ? refused("cache_delete", "the cache did not answer") : ok(1)
    },
    cache_incr: (args) => calls.cache_incr_by!([args[0]!, 1n]),
    cache_incr_by: async ([key, delta]) => {
      const k = cacheKey(text(key))
      if (k === undefined) return fail
      const next = await run(Effect.either(services.cache.incrBy(namespace, FUNCTION_CACHE_MAP, k, Number(delta ?? 0))))
      if (next._tag === "Left") return refused("cache_incr_by", "the cache did not answer")
      return Option.isSome(next.right) ? ok(BigInt(next.right.value)) : refused("cache_incr_by", "the entry is not an integer")
    },
    storage_get: async ([cid]) => {
      const opened = await run(Effect.either(services.storage.open(namespace, text(cid))))
      if (opened._tag === "Left") return refused("storage_get", opened.left.reason)
      if (opened.right.size > services.maxAnswerBytes) return refused("storage_get", `the content is over ${services.maxAnswerBytes} bytes`)
      const chunks: Array<Uint8Array> = []
      for await (const chunk of services.storage.read(opened.right.cid, 0, opened.right.size)) chunks.push(chunk)
      return ok(new Uint8Array(Buffer.concat(chunks)))
    },
    http_fetch: async ([method, url, headers, body]) => {
      let headerMap: Record<string, string> = {}
      const headerText = text(headers)
      if (headerText.trim() !== "") {
        try {
          const parsed = JSON.parse(headerText) as unknown
          if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== "string")) throw new Error()
          headerMap = parsed as Record<string, string>
        } catch {
          return json({ status: 0, error: "headers must be a JSON object of strings" })
        }
      }
      const bodyBytes = body instanceof Uint8Array && body.length > 0 ? body : undefined
      const answer = await run(
        Effect.either(
          services.fetch.request({
            url: text(url),
            method: text(method) || "GET",
            headers: headerMap,
            ...(bodyBytes === undefined ? {} : { body: bodyBytes }),
            timeoutMs: Math.max(1, Math.min(30_000, context.remainingMs()))
          })
        )
      )
      if (answer._tag === "Left") return json({ status: 0, error: answer.left.message })
      if (answer.right.body.length > services.maxAnswerBytes) return json({ status: 0, error: `the answer is over ${services.maxAnswerBytes} bytes` })
      const flat = Object.fromEntries(
        Object.entries(answer.right.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, Array.isArray(v) ? v.join(", ") : String(v)]]))
      )
      return json({ status: answer.right.status, headers: flat, body: decoder.decode(answer.right.body) })
    },
    pubsub_publish: async ([topic, data]) => {
      const name = text(topic)
      if (isReserved(name)) return refused("pubsub_publish", "topics under _portico/ are the platform's")
      if (++publishes > PUBLISHES_PER_INVOCATION) return refused("pubsub_publish", `at most ${PUBLISHES_PER_INVOCATION} publishes per invocation`)
      const bytes = data instanceof Uint8Array ? data : new Uint8Array()
      // each message counts against the namespace's budget, as a route's does
      const charged = await run(Effect.either(services.pubsub.charge(namespace, 1)))
      if (charged._tag === "Left") return refused("pubsub_publish", charged.left.reason)
      const message = { topic: name, data_base64: Buffer.from(bytes).toString("base64"), depth: context.depth + 1 }
      const published = await run(Effect.either(services.pubsub.publish(context.principal, message)))
      return published._tag === "Left" ? refused("pubsub_publish", published.left.reason) : ok(1)
    },
    // PushSender's host entries check the message (JSON, 16 KiB, the routes' schema) and answer none for 0
    push_send: async ([user, message]) => {
      const sent = await run(services.push.pushSendV2(namespace, text(user), text(message)))
      return ok(Option.isSome(sent) ? 1 : 0)
    },
    push_send_v2: async ([user, message]) => {
      const sent = await run(services.push.pushSendV2(namespace, text(user), text(message)))
      return Option.isSome(sent) ? json(sent.value) : fail
    },
    push_send_topic: async ([topic, message]) => {
      const sent = await run(services.push.pushSendTopic(namespace, text(topic), text(message)))
      return Option.isSome(sent) ? json(sent.value) : fail
    },
    ws_send: async ([id, data]) => {
      const target = text(id) || context.socket
      if (target === undefined) return refused("ws_send", "no socket named, and this instance serves none")
      const bytes = data instanceof Uint8Array ? data : new Uint8Array()
      if (bytes.length > services.maxFrameBytes) return refused("ws_send", `a frame is at most ${services.maxFrameBytes} bytes`)
      return ok((await run(services.sockets.send(namespace, target, bytes))) ? 1 : 0)
    },
    ws_disconnect: async ([id]) => {
      const target = text(id) || context.socket
      if (target === undefined) return refused("ws_disconnect", "no socket named, and this instance serves none")
      return ok((await run(services.sockets.close(namespace, target))) ? 1 : 0)
    },
    ws_list_clients: async () => capped(encoder.encode(JSON.stringify(await run(services.sockets.list(namespace, context.functionName)))), "ws_list_clients"),
    webrtc_admit: async ([room, user, ttl]) => {
      const seconds = Number(ttl)
      if (!ROOM_NAME.test(text(room)) || text(user) === "" || text(user).length > 256) return refused("webrtc_admit", "a room (1-64 of A-Z a-z 0-9 _ . -) and a user are needed")
      if (!Number.isInteger(seconds) || seconds < 1 || seconds > ADMISSION_MAX_S) return refused("webrtc_admit", `the admission's seconds are 1 to ${ADMISSION_MAX_S}`)
      const admitted = await run(Effect.either(services.webrtc.admit(namespace, text(room), text(user), seconds, false)))
      return admitted._tag === "Left" ? refused("webrtc_admit", admitted.left.reason) : ok(1)
    },
    webrtc_kick: ([room, user]) => control("webrtc_kick", "kick", text(room), text(user)),
    webrtc_mute: ([room, user]) => control("webrtc_mute", "mute", text(room), text(user)),
    webrtc_unmute: ([room, user]) => control("webrtc_unmute", "unmute", text(room), text(user)),
    webrtc_turn_credentials: async () => {
      const credentials = await run(Effect.either(services.webrtc.turnCredentials(namespace)))
      if (credentials._tag === "Left") return refused("webrtc_turn_credentials", credentials.left.reason)
      const c = credentials.right
      return json({ username: c.username, password: c.password, ttl: c.ttl, expires_at: c.expiresAt, uris: c.uris })
    },
    function_invoke: async ([name, payload]) => {
      const answer = await context.invoke(text(name), payload instanceof Uint8Array ? payload : new Uint8Array())
      return answer === undefined ? fail : capped(answer, "function_invoke")
    }
  }

  return (name: string, args: ReadonlyArray<HostArg>): Promise<HostAnswer> => {
    const call = calls[name as HostCallName] as ((args: ReadonlyArray<HostArg>) => Promise<HostAnswer>) | undefined
    if (call === undefined) return Promise.resolve(fail)
    return call(args).catch((e: unknown) => refused(name, e instanceof Error ? e.message : "failed"))
  }
}
