/**
 * `GET /v1/pubsub/ws` past its gate and query schema (src/api/Upgrades.ts; docs/pubsub.md
 * "Sockets"). The handshake is judged whole (topics, grants, resume points, presence, the caps),
 * then every topic is subscribed BEFORE the 101 is sent, so a refusal is an HTTP answer and
 * nothing published after the open is missed. Then:
 *
 * - the client hears `subscribed` (each topic's position), then each topic's feed (TopicFeed.ts):
 *   messages in order, history after a resume point, `gap` frames for what cannot be filled;
 * - a client that does not take what is sent (more than `socketQueueBytes` waiting in the socket)
 *   is closed 1013 `SLOW_CONSUMER`: never skipped silently, and never slowing the topic's others;
 * - its text frames publish (SocketPublishes.ts), judged as the routes judge them;
 * - presence entries are refreshed while it is open and removed when it closes;
 * - its credential is watched for revocation (SocketRevocation.ts), pings find dead peers.
 */
import { Effect, Either } from "effect"
import { randomBytes } from "node:crypto"
import { type WebSocket, WebSocketServer } from "ws"
import type { Principal } from "../../domain/Principal.js"
import { MEMBER_ID_SHAPE, parseMemberMeta, parseResumePoint, type ResumePoint } from "../../domain/PubSubRules.js"
import type { Handshake } from "../deployments/serving/SocketHandshake.js"
import { credentialOf, type SocketRevocation } from "../auth/SocketRevocation.js"
import type { AppRefusal } from "../deployments/serving/AppAnswers.js"
import { largestFrameBytes } from "../config/PubSubSettings.js"
import type { PubSubService } from "./PubSub.js"
import type { Delivery, Subscription } from "./PubSubEngine.js"
import { makeSocketPublisher } from "./SocketPublishes.js"
import { TopicFeed } from "./TopicFeed.js"

/** The ws route's query, as its schema decodes it (src/api/groups/PubSubGroup.ts). */
export interface SocketQuery {
  readonly topic?: string | ReadonlyArray<string> | undefined
  readonly since?: string | ReadonlyArray<string> | undefined
  readonly presence?: "true" | "false" | undefined
  readonly member_id?: string | undefined
  readonly member_meta?: string | undefined
  readonly jwt?: string | undefined
}

export type SocketHandshake = Handshake<SocketQuery>

/** Close codes the client can act on (docs/pubsub.md "Close codes"). */
export const CloseCode = {
  goingAway: 1001,
  unsupportedData: 1003,
  policy: 1008,
  tooBig: 1009,
  slowConsumer: 1013,
  revoked: 4401,
  deadPeer: 4408
} as const

const listOf = (value: string | ReadonlyArray<string> | undefined): ReadonlyArray<string> =>
  value === undefined ? [] : typeof value === "string" ? [value] : value

interface Open {
  readonly ws: WebSocket
  lastSeen: number
}

export const makePubSubSockets = (options: { readonly pubsub: PubSubService; readonly revocation: SocketRevocation }) => {
  const { pubsub, revocation } = options
  const { settings, engine } = pubsub
  const wss = new WebSocketServer({
    noServer: true,
    // a client frame is a publish: its payload in base64 and a little JSON around it
    maxPayload: largestFrameBytes(settings.maxMessageBytes),
    perMessageDeflate: false,
    clientTracking: false
  })
  const open = new Set<Open>()
  const perUser = new Map<string, number>()
  let pending = 0

  /** Pings every socket; one silent past the dead-peer time is dropped. */
  const pinger = setInterval(() => {
    const now = Date.now()
    for (const o of open) {
      if (now - o.lastSeen > settings.deadPeerMs) o.ws.close(CloseCode.deadPeer, "DEAD_PEER: no answer to pings")
      else o.ws.ping()
    }
  }, settings.pingIntervalMs)
  pinger.unref()

  const judge = (caller: Principal, query: SocketQuery): Either.Either<{ topics: ReadonlyArray<string>; resume: ReadonlyMap<string, ResumePoint> }, AppRefusal> => {
    const topics = [...new Set(listOf(query.topic))]
    if (topics.length === 0) return Either.left({ code: "VALIDATION_FAILED", error: "topic is required", hint: "?topic=<name>, repeated for more topics" })
    if (topics.length > settings.topicsPerSocket) {
      return Either.left({ code: "VALIDATION_FAILED", error: `a socket subscribes to at most ${settings.topicsPerSocket} topics`, hint: "open another socket" })
    }
    for (const topic of topics) {
      const refused = pubsub.readRefusal(caller, topic)
      if (refused !== undefined) return Either.left({ code: refused.code, error: refused.reason, hint: refused.hint })
    }
    const resume = new Map<string, ResumePoint>()
    for (const text of listOf(query.since)) {
      const point = parseResumePoint(text)
      if (point === undefined || !topics.includes(point.topic) || resume.has(point.topic)) {
        return Either.left({
          code: "VALIDATION_FAILED",
          error: `since "${text.slice(0, 80)}" is not <topic>,<epoch>,<offset> of a topic this socket subscribes to, once`,
          hint: "the epoch and offset of the last frame seen on that topic"
        })
      }
      resume.set(point.topic, point)
    }
    if (query.presence === "true") {
      if (query.member_id !== undefined && !MEMBER_ID_SHAPE.test(query.member_id)) {
        return Either.left({ code: "VALIDATION_FAILED", error: "member_id is 1-128 characters without spaces or control characters" })
      }
      if (query.member_meta !== undefined && parseMemberMeta(query.member_meta) === undefined) {
        return Either.left({ code: "VALIDATION_FAILED", error: "member_meta is a JSON object of at most 1024 bytes" })
      }
    } else if (query.member_id !== undefined || query.member_meta !== undefined) {
      return Either.left({ code: "VALIDATION_FAILED", error: "member_id and member_meta go with presence=true" })
    }
    return Either.right({ topics, resume })
  }

  const handle = async (handshake: SocketHandshake): Promise<void> => {
    const { query, refuse } = handshake
    const caller = handshake.caller
    if (caller === undefined) return refuse({ code: "INVALID_TOKEN", error: "a credential is required" })
    const judged = judge(caller, query)
    if (Either.isLeft(judged)) return refuse(judged.left)
    const { topics, resume } = judged.right
    const user = `${caller.namespace}\u0000${caller.subject}`
    if ((perUser.get(user) ?? 0) >= settings.socketsPerUser) {
      return refuse({ code: "RATE_LIMITED", error: `at most ${settings.socketsPerUser} open sockets per user`, hint: "close one, or subscribe to more topics on one socket", retryAfterSeconds: 5 })
    }
    if (open.size + pending >= settings.socketsPerNode) {
      return refuse({ code: "RATE_LIMITED", error: "this gateway holds its most open sockets", hint: "retry later", retryAfterSeconds: 5 })
    }
    perUser.set(user, (perUser.get(user) ?? 0) + 1)
    pending++
    const release = () => {
      const left = (perUser.get(user) ?? 1) - 1
      if (left <= 0) perUser.delete(user)
      else perUser.set(user, left)
    }

    // every topic subscribed before the 101; deliveries queue in their feeds until the socket opens
    let ws: WebSocket | undefined
    let closing = false
    const send = (frame: string | Buffer) => {
      if (ws === undefined || closing) return
      if (ws.bufferedAmount > settings.socketQueueBytes) {
        closing = true
        ws.close(CloseCode.slowConsumer, "SLOW_CONSUMER: messages were not read fast enough; resume with since=")
        // a client that reads nothing never takes the close frame either
        setTimeout(() => ws?.terminate(), 5_000).unref()
        return
      }
      ws.send(frame, { binary: false })
    }
    const feeds = new Map<string, TopicFeed>()
    const subscriptions: Array<Subscription> = []
    const output = (topic: string) => ({
      send: (frame: string | Buffer) => send(frame),
      history: async (after: { epoch: string; offset: number }) => {
        const answer = await Effect.runPromise(Effect.either(pubsub.withinDeadline(engine.history(caller.namespace, topic, after))))
        return Either.isRight(answer) ? answer.right : undefined
      }
    })
    const unsubscribe = () => {
      for (const s of subscriptions) s.close()
    }
    for (const topic of topics) {
      const listener = {
        deliver: (d: Delivery) => feeds.get(topic)?.deliver(d),
        interrupted: () => feeds.get(topic)?.interrupted()
      }
      const subscribed = await Effect.runPromise(Effect.either(pubsub.withinDeadline(engine.subscribe(caller.namespace, topic, listener))))
      if (Either.isLeft(subscribed)) {
        unsubscribe()
        pending--
        release()
        return refuse({ code: "UNAVAILABLE", error: "publish/subscribe is unavailable", hint: "retry shortly", retryAfterSeconds: 5 })
      }
      subscriptions.push(subscribed.right)
      const feed = new TopicFeed(topic, subscribed.right.position, output(topic))
      const point = resume.get(topic)
      if (point !== undefined) feed.resumeFrom(point)
      feeds.set(topic, feed)
    }

    let accepted = false
    wss.handleUpgrade(handshake.req, handshake.socket, handshake.head, (socket) => {
      accepted = true
      pending--
      handshake.answered(101)
      ws = socket
      const entry: Open = { ws: socket, lastSeen: Date.now() }
      open.add(entry)
      const connection = randomBytes(12).toString("base64url")
      const presence = query.presence === "true"
      const memberMeta = query.member_meta === undefined ? undefined : parseMemberMeta(query.member_meta)
      const memberId = query.member_id ?? caller.subject
      let refreshTimer: NodeJS.Timeout | undefined
      const credential = credentialOf(caller)
      const unregister = credential === undefined ? () => {} : revocation.register({ credential, revoke: () => socket.close(CloseCode.revoked, "REVOKED: the credential was revoked or its session ended") })

      const publish = makeSocketPublisher({ pubsub, caller, send, close: (code, reason) => socket.close(code, reason) })
      socket.on("pong", () => (entry.lastSeen = Date.now()))
      socket.on("message", (data, isBinary) => {
        entry.lastSeen = Date.now()
        if (isBinary) return socket.close(CloseCode.unsupportedData, "text frames only: {\"type\":\"publish\",...}")
        publish(data as Buffer)
      })
      socket.on("error", () => socket.terminate())
      socket.once("close", () => {
        open.delete(entry)
        unsubscribe()
        unregister()
        release()
        if (refreshTimer !== undefined) clearInterval(refreshTimer)
        if (presence) for (const topic of topics) Effect.runFork(Effect.ignore(pubsub.withinDeadline(engine.leave(caller.namespace, topic, connection))))
      })

      send(
        JSON.stringify({
          type: "subscribed",
          topics: [...feeds.values()].map((f, i) => ({ topic: f.topic, epoch: subscriptions[i]!.position.epoch, offset: subscriptions[i]!.position.offset }))
        })
      )
      for (const feed of feeds.values()) feed.open(resume.has(feed.topic))
      if (presence) {
        const joinedAt = Date.now()
        const entries = topics.map((topic) => ({ topic, entry: { connection, memberId, subject: caller.subject, joinedAt, meta: memberMeta } }))
        for (const { topic, entry } of entries) {
          Effect.runFork(Effect.ignore(pubsub.withinDeadline(engine.join(caller.namespace, topic, entry, joinedAt + settings.presenceTtlMs))))
        }
        const every = Math.max(100, Math.floor(settings.presenceTtlMs / 3))
        refreshTimer = setInterval(() => {
          Effect.runFork(Effect.ignore(pubsub.withinDeadline(engine.refresh(caller.namespace, entries, Date.now() + settings.presenceTtlMs))))
        }, every)
        refreshTimer.unref()
      }
    })
    if (!accepted) {
      // ws answered a handshake it could not complete itself: nothing is kept
      pending--
      unsubscribe()
      release()
    }
  }

  return {
    handle,
    /** Open sockets on this gateway (tests, the bench). */
    size: () => open.size,
    close: () => {
      clearInterval(pinger)
      for (const o of open) o.ws.close(CloseCode.goingAway, "the gateway is shutting down")
    }
  }
}

export type PubSubSockets = ReturnType<typeof makePubSubSockets>
