/**
 * APNs provider API over HTTP/2 (node:http2, see docs/push.md for why not @parse/node-apn).
 *
 * One HTTP/2 connection per signing key and environment, opened on first use, multiplexed and
 * reused until the server closes it (GOAWAY, error) or it has been idle for `idleTimeoutMs`, then
 * opened again on the next send. Every request carries the key's cached provider token (ProviderToken.ts). Each device gets
 * a DeliveryOutcome and nothing fails: 410 (`Unregistered`, `ExpiredToken`) and 400
 * `BadDeviceToken` are `unregistered`; any other answer, a timeout or a broken connection is a
 * `failed` outcome for that device alone.
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import * as http2 from "node:http2"
import { type DeliveryOutcome, Reasons, delivered, failed, unregistered } from "./Delivery.js"
import { type ApnsSigningKey, type ProviderTokenOptions, makeProviderTokens, signingKeyId } from "./ProviderToken.js"

export const APNS_PRODUCTION_URL = "https://api.push.apple.com"
export const APNS_SANDBOX_URL = "https://api.sandbox.push.apple.com"
/** APNs' payload limit for every push type but VoIP. */
export const APNS_MAX_PAYLOAD_BYTES = 4096
/** APNs accepts 5 KB for VoIP notifications. */
export const APNS_MAX_VOIP_PAYLOAD_BYTES = 5120
/** `apns-collapse-id` may not exceed 64 bytes. */
export const APNS_MAX_COLLAPSE_ID_BYTES = 64

export interface ApnsCredential extends ApnsSigningKey {
  readonly bundleId: string
  readonly environment: "sandbox" | "production"
}

export type ApnsPushType = "alert" | "background"

export interface ApnsMessage {
  /** The device token as hex. */
  readonly deviceToken: string
  /** The JSON payload text (`{"aps": {...}, ...}`). */
  readonly payload: string
  /** `ios_voip_push`: topic `<bundle>.voip` and `apns-push-type: voip`. */
  readonly voip?: boolean
  /** Ignored for VoIP; default `alert`. */
  readonly pushType?: ApnsPushType
  /** 10 (immediate), 5 (power-considerate) or 1; default 10 (5 is required for `background`). */
  readonly priority?: 10 | 5 | 1
  /** Unix seconds after which APNs stops trying; 0 means deliver once or drop. */
  readonly expiration?: number
  /** Sent only when it fits APNs' 64 bytes. */
  readonly collapseId?: string
}

export interface ApnsClientOptions extends ProviderTokenOptions {
  /** Both default to Apple's hosts; PORTICO_APNS_URL sets both for test setups. */
  readonly productionUrl?: string
  readonly sandboxUrl?: string
  /** Per request; default 10 s. A request past it is cancelled and reported as `Timeout`. */
  readonly requestTimeoutMs?: number
  /**
   * A connection with no traffic for this long is closed (default 10 minutes), so a replaced
   * credential's connection does not linger; the next send opens a new one.
   */
  readonly idleTimeoutMs?: number
  /** Extra CA certificates for in-process clients; a gateway uses NODE_EXTRA_CA_CERTS instead. */
  readonly ca?: string
}

export interface ApnsClientService {
  readonly send: (credential: ApnsCredential, message: ApnsMessage) => Effect.Effect<DeliveryOutcome>
  /** Sends to many devices over the credential's one connection, `concurrency` streams at a time. */
  readonly sendAll: (
    credential: ApnsCredential,
    messages: ReadonlyArray<ApnsMessage>,
    options?: { readonly concurrency?: number }
  ) => Effect.Effect<ReadonlyArray<DeliveryOutcome>>
  /** Provider tokens minted so far (one per key per lifetime window). */
  readonly tokensMinted: () => number
  /** Connections opened so far. */
  readonly connectionsOpened: () => number
  /** Closes every connection. */
  readonly close: Effect.Effect<void>
}

export class ApnsClient extends Context.Tag("portico/ApnsClient")<ApnsClient, ApnsClientService>() {
  static readonly layer = (options: ApnsClientOptions = {}) =>
    Layer.scoped(ApnsClient, Effect.acquireRelease(Effect.sync(() => makeApnsClient(options)), (client) => client.close))

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"): no connection is opened until a send. */
  static readonly Test = Layer.suspend(() => ApnsClient.layer())
}

const HEX_TOKEN = /^[0-9a-fA-F]{8,200}$/
/**
 * One request in flight, reached from its stream by the listeners every stream shares: a send to
 * 10,000 devices made a dozen closures per request, alive as long as the stream and promoted with
 * it, which grew the heap about a fifth more than node's own http2 objects did.
 */
interface Pending {
  readonly credential: ApnsCredential
  readonly message: ApnsMessage
  readonly jwt: string
  readonly attempt: number
  readonly deadline: number
  readonly done: (outcome: DeliveryOutcome) => void
  readonly events: StreamEvents
  stream: http2.ClientHttp2Stream | undefined
  status: number
  apnsId: string | undefined
  /** An answer's body, kept only for an answer other than 200 (its reason). */
  body: Array<Buffer> | undefined
  settled: boolean
}

/** What a client does when its streams answer, end or break. */
interface StreamEvents {
  readonly ended: (p: Pending) => void
  readonly broken: (p: Pending) => void
  readonly settle: (p: Pending, outcome: DeliveryOutcome) => void
}

const PENDING = Symbol("apns.pending")
type TaggedStream = http2.ClientHttp2Stream & { [PENDING]?: Pending }

function onResponse(this: TaggedStream, answer: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader) {
  const p = this[PENDING]!
  p.status = Number(answer[":status"] ?? 0)
  const id = answer["apns-id"]
  p.apnsId = typeof id === "string" ? id : undefined
  if (p.status !== 200) p.body = []
}
function onData(this: TaggedStream, chunk: Buffer) {
  this[PENDING]!.body?.push(chunk)
}
function onEnd(this: TaggedStream) {
  const p = this[PENDING]!
  p.events.ended(p)
}
function onError(this: TaggedStream) {
  const p = this[PENDING]!
  p.events.broken(p)
}
function onClose(this: TaggedStream) {
  const p = this[PENDING]!
  if (p.status === 0) p.events.broken(p)
  else p.events.settle(p, failed(p.status, Reasons.badAnswer))
}

/** Sends again of a stream the server refused unprocessed. */
const MAX_RETRIES = 2

/** Whether a payload fits APNs' limit for its push type (checked before anything is sent). */
export const apnsPayloadFits = (payload: string, voip = false): boolean =>
  Buffer.byteLength(payload, "utf8") <= (voip ? APNS_MAX_VOIP_PAYLOAD_BYTES : APNS_MAX_PAYLOAD_BYTES)

/** Answers that mean the device token is gone for good: delete the registration. */
export const isUnregisteredAnswer = (status: number, reason: string | undefined): boolean =>
  status === 410 || (status === 400 && reason === "BadDeviceToken")

export const makeApnsClient = (options: ApnsClientOptions = {}): ApnsClientService => {
  const tokens = makeProviderTokens(options)
  const timeoutMs = options.requestTimeoutMs ?? 10_000
  const idleTimeoutMs = options.idleTimeoutMs ?? 10 * 60_000
  const urlFor = (environment: ApnsCredential["environment"]) =>
    environment === "production" ? options.productionUrl ?? APNS_PRODUCTION_URL : options.sandboxUrl ?? APNS_SANDBOX_URL
  const sessions = new Map<string, http2.ClientHttp2Session>()
  /** A credential's connection key (address and signing key), worked out once per credential object. */
  const sessionKeys = new WeakMap<ApnsCredential, string>()
  const sessionKeyOf = (credential: ApnsCredential): string => {
    let key = sessionKeys.get(credential)
    if (key === undefined) {
      key = urlFor(credential.environment) + "\n" + signingKeyId(credential)
      sessionKeys.set(credential, key)
    }
    return key
  }
  let opened = 0

  const sessionFor = (credential: ApnsCredential): http2.ClientHttp2Session => {
    const key = sessionKeyOf(credential)
    const known = sessions.get(key)
    if (known !== undefined && !known.closed && !known.destroyed) return known
    const session = http2.connect(urlFor(credential.environment), options.ca === undefined ? {} : { ca: options.ca })
    opened += 1
    sessions.set(key, session)
    const forget = () => {
      if (sessions.get(key) === session) sessions.delete(key)
    }
    // A connection that errs or is told to go away takes no new streams; the next send opens another.
    session.on("error", forget)
    session.on("goaway", forget)
    session.on("close", forget)
    session.setTimeout(idleTimeoutMs, () => {
      forget()
      session.close()
    })
    // An idle connection does not keep the process alive; requests in flight hold the sweep timer.
    session.unref()
    return session
  }

  /**
   * Requests in flight, each with its deadline, in the order they started (every request has the
   * same timeout, so deadlines ascend). One sweep timer cancels the overdue ones, rather than a
   * timer per request: a send to 10,000 devices spent about 5% of its time arming and clearing
   * them. The sweep timer is ref'd while anything is in flight and gone when nothing is, as the
   * per-request timers were (the connections themselves are unref'd).
   */
  const inFlight = new Set<Pending>()
  const sweepMs = Math.min(1_000, Math.max(5, Math.floor(timeoutMs / 10)))
  let sweeper: ReturnType<typeof setInterval> | undefined
  const sweep = () => {
    const now = Date.now()
    for (const p of inFlight) {
      if (p.deadline > now) break
      settle(p, failed(0, Reasons.timeout))
      p.stream?.close(http2.constants.NGHTTP2_CANCEL)
    }
  }
  const track = (p: Pending) => {
    inFlight.add(p)
    sweeper ??= setInterval(sweep, sweepMs)
  }
  const untrack = (p: Pending) => {
    inFlight.delete(p)
    if (inFlight.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper)
      sweeper = undefined
    }
  }

  const settle = (p: Pending, outcome: DeliveryOutcome) => {
    if (p.settled) return
    p.settled = true
    untrack(p)
    p.done(outcome)
  }
  const events: StreamEvents = {
    settle,
    ended: (p) => {
      if (p.status === 200) return settle(p, delivered(200, p.apnsId))
      const reason = reasonOf(Buffer.concat(p.body ?? []).toString("utf8")) ?? (p.status === 0 ? Reasons.connection : "HTTP" + p.status)
      if (reason === "ExpiredProviderToken" || reason === "InvalidProviderToken") tokens.refused(p.credential, p.jwt)
      settle(p, isUnregisteredAnswer(p.status, reason) ? unregistered(p.status, reason) : failed(p.status, reason))
    },
    /**
     * A stream the server refused (RST_STREAM REFUSED_STREAM, as when a connection goes away
     * with streams still queued) was never processed, so it is sent again on a new connection,
     * at most twice; any other broken stream is a failure, since APNs may have delivered it.
     */
    broken: (p) => {
      if (p.settled) return
      const refused = p.status === 0 && p.stream?.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM
      if (!(refused && p.attempt < MAX_RETRIES)) return settle(p, failed(p.status, Reasons.connection))
      p.settled = true
      untrack(p)
      request(p.credential, p.message, p.jwt, p.attempt + 1, p.done)
    }
  }

  /**
   * Sends one notification and calls `done` once with its outcome. Callbacks, not a promise per
   * request: what a request keeps alive while in flight is its Pending and node's own stream.
   */
  const request = (credential: ApnsCredential, message: ApnsMessage, jwt: string, attempt: number, done: (outcome: DeliveryOutcome) => void): void => {
    const voip = message.voip === true
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": "/3/device/" + message.deviceToken,
      authorization: "bearer " + jwt,
      "apns-topic": voip ? credential.bundleId + ".voip" : credential.bundleId,
      "apns-push-type": voip ? "voip" : message.pushType ?? "alert",
      "apns-priority": String(message.priority ?? (message.pushType === "background" && !voip ? 5 : 10)),
      "content-type": "application/json"
    }
    if (message.expiration !== undefined) headers["apns-expiration"] = String(message.expiration)
    if (message.collapseId !== undefined && Buffer.byteLength(message.collapseId) <= APNS_MAX_COLLAPSE_ID_BYTES) {
      headers["apns-collapse-id"] = message.collapseId
    }
    let stream: TaggedStream
    try {
      stream = sessionFor(credential).request(headers)
    } catch {
      // The session closed between the check and the request: nothing was sent.
      if (attempt < MAX_RETRIES) request(credential, message, jwt, attempt + 1, done)
      // answered later, never from inside the call: a pool starting its next request on each
      // answer would otherwise recurse once per message while the connection cannot be had
      else queueMicrotask(() => done(failed(0, Reasons.connection)))
      return
    }
    const p: Pending = {
      credential,
      message,
      jwt,
      attempt,
      deadline: Date.now() + timeoutMs,
      done,
      events,
      stream,
      status: 0,
      apnsId: undefined,
      body: undefined,
      settled: false
    }
    stream[PENDING] = p
    track(p)
    stream.on("response", onResponse)
    stream.on("data", onData)
    stream.on("end", onEnd)
    stream.on("error", onError)
    stream.on("close", onClose)
    stream.end(message.payload)
  }

  /** Refused before anything is sent: these would only cost a round trip to be refused. */
  const refusedLocally = (message: ApnsMessage): DeliveryOutcome | undefined => {
    if (!HEX_TOKEN.test(message.deviceToken)) return unregistered(400, Reasons.badDeviceToken)
    if (!payloadFits(message)) return failed(413, Reasons.payloadTooLarge)
    return undefined
  }
  /** The last payload checked: a send to many devices carries one payload text, measured once. */
  let checked: { payload: string; voip: boolean; fits: boolean } | undefined
  const payloadFits = (message: ApnsMessage): boolean => {
    const voip = message.voip === true
    if (checked === undefined || checked.payload !== message.payload || checked.voip !== voip) {
      checked = { payload: message.payload, voip, fits: apnsPayloadFits(message.payload, voip) }
    }
    return checked.fits
  }

  const send = (credential: ApnsCredential, message: ApnsMessage): Effect.Effect<DeliveryOutcome> =>
    Effect.suspend(() => {
      const refused = refusedLocally(message)
      if (refused !== undefined) return Effect.succeed(refused)
      return tokens.current(credential).pipe(
        Effect.flatMap((jwt) => Effect.async<DeliveryOutcome>((resume) => request(credential, message, jwt, 0, (outcome) => resume(Effect.succeed(outcome))))),
        Effect.catchAll(() => Effect.succeed(failed(0, Reasons.badProviderKey)))
      )
    })

  /**
   * Many devices, one token lookup and `concurrency` streams at a time, each answer starting the
   * next request: a fiber per device costs more than the HTTP/2 stream it waits on.
   */
  const sendAll = (
    credential: ApnsCredential,
    messages: ReadonlyArray<ApnsMessage>,
    concurrency: number
  ): Effect.Effect<ReadonlyArray<DeliveryOutcome>> =>
    tokens.current(credential).pipe(
      Effect.flatMap((jwt) =>
        Effect.async<ReadonlyArray<DeliveryOutcome>>((resume) => {
          const outcomes = new Array<DeliveryOutcome>(messages.length)
          let next = 0
          let answered = 0
          const finish = () => {
            if (++answered === messages.length) resume(Effect.succeed(outcomes))
          }
          const startNext = (): void => {
            while (next < messages.length) {
              const index = next++
              const message = messages[index]!
              const refused = refusedLocally(message)
              if (refused !== undefined) {
                outcomes[index] = refused
                finish()
                continue
              }
              request(credential, message, jwt, 0, (outcome) => {
                outcomes[index] = outcome
                finish()
                startNext()
              })
              return
            }
          }
          if (messages.length === 0) return resume(Effect.succeed(outcomes))
          for (let i = 0; i < Math.max(1, Math.min(concurrency, messages.length)); i++) startNext()
        })
      ),
      Effect.catchAll(() => Effect.succeed(messages.map((message) => refusedLocally(message) ?? failed(0, Reasons.badProviderKey))))
    )

  return {
    send,
    sendAll: (credential, messages, sendOptions) => sendAll(credential, messages, sendOptions?.concurrency ?? 500),
    tokensMinted: tokens.minted,
    connectionsOpened: () => opened,
    close: Effect.promise(() =>
      Promise.all([...sessions.values()].map((session) =>
        new Promise<void>((resolve) => {
          if (session.closed || session.destroyed) return resolve()
          session.close(() => resolve())
        })
      ))
    ).pipe(Effect.zipRight(Effect.sync(() => sessions.clear())))
  }
}

/** APNs error bodies: `{"reason": "...", "timestamp": ms}` (timestamp only with 410). */
const ApnsErrorBody = Schema.parseJson(Schema.Struct({ reason: Schema.String, timestamp: Schema.optional(Schema.Number) }))
const decodeErrorBody = Schema.decodeUnknownOption(ApnsErrorBody)

const reasonOf = (body: string): string | undefined => Option.getOrUndefined(Option.map(decodeErrorBody(body), (error) => error.reason))
