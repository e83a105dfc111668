/**
 * Node-to-node calls (spec §4.10): a request from another gateway of the cluster carries a
 * coordination MAC over what it asks, addressed to the receiving node's id, and must come from a
 * private overlay source. The MAC key is derived from the root secret the cluster's gateways
 * share.
 *
 * MAC v2 (spec §9.4) also covers a random nonce, spent on receipt in the receiving node's own
 * ledger (NonceLedger.ts): a call is accepted once. The internal SQL routes are not idempotent (a captured INSERT replayed within
 * the minute ran again, a captured delete removed a database re-created since). v1, with no
 * nonce, is accepted only for storage eviction (idempotent), for a rolling upgrade.
 *
 * The MAC is made under the newest root generation this node holds and accepted under its newest
 * and the one before (docs/cluster.md, "Root-secret rotation"), so nodes adopting a rotation a
 * moment apart still talk. A MAC that holds under neither makes the node read the registry's
 * newer generations (at most once every few seconds) and check again.
 */
import { Cause, Clock, Context, Data, Duration, Effect, Either, Exit, Layer, Runtime } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { createWriteStream } from "node:fs"
import { Readable, Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Membership } from "../cluster/Membership.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { canonicalJson } from "./CanonicalJson.js"
import { nonceLedger } from "./NonceLedger.js"
import { FORWARDED_ROOM_BYTES } from "../../api/RouteFacts.js"
import { CHANNEL_PATH, channelKeyText, makePeerChannels } from "./PeerChannel.js"
import { MAX_ANSWER_BYTES, type PeerBytesAnswer, postBytes as postBytesHttp, postText } from "./PeerHttp.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { catchUp } from "../secrets/RootChain.js"
import { safeEqual, Sealer } from "../secrets/Sealer.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export const MAC_HEADER = "x-portico-coordination-mac"
export const TIME_HEADER = "x-portico-coordination-time"
export const NONCE_HEADER = "x-portico-coordination-nonce"
/**
 * A streamed call's signed envelope (InternalClient.ts `stream`): its body is on its way as the
 * MAC is made, so the MAC covers this header's text in the body's place.
 */
export const ENVELOPE_HEADER = "x-portico-forward-envelope"
/**
 * What the MAC of a call whose body is bytes (a vault share) covers in the body's place: its
 * envelope header's text and the SHA-256 of the bytes, so neither can be changed under it.
 */
export const bytesSigned = (envelope: string, bytes: Uint8Array): string => `${envelope}\n${createHash("sha256").update(bytes).digest("hex")}`

const SKEW_SECONDS = 60
/** How often a MAC that holds under no generation held may make this node read newer ones. */
const CATCH_UP_EVERY_MS = 3000
const NONCE = /^[A-Za-z0-9_-]{22,64}$/

/** What both ends MAC: canonical JSON (CanonicalJson.ts). */
export { canonicalJson }

/** The peer is not configured, did not answer in time, or the connection failed. */
export class PeerUnreachable extends Data.TaggedError("PeerUnreachable")<{
  readonly nodeId: string
  readonly detail: string
  /** The answer was over the caller's byte limit (postToFile). */
  readonly tooLarge?: boolean
}> {}

export interface PeerAnswer {
  readonly status: number
  readonly text: string
  readonly retryAfter: string | undefined
}

export interface CoordinationService {
  /**
   * POSTs `payload` (as canonical JSON) to an internal route of peer `nodeId` (from
   * `PORTICO_PEERS`), signed for that node; any HTTP answer is returned as it came.
   */
  readonly post: (nodeId: string, path: string, payload: unknown, timeout: Duration.DurationInput) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /**
   * `post` for a caller outside the Effect runtime (a forwarded query in the fast lane): `body` is
   * the payload's canonical JSON, sent and signed as `post` sends it, or sent on the node's peer
   * channel when one is open (PeerChannel.ts); `done` gets the answer or why the peer is
   * unreachable, once.
   */
  readonly postNow: (
    nodeId: string,
    path: string,
    body: string,
    timeoutMs: number,
    done: (answer: Either.Either<PeerAnswer, PeerUnreachable>) => void
  ) => void
  /**
   * As `post`, for a route that answers bytes: a 200's body is streamed into `dest` (at most
   * `maxBytes`; more is `PeerUnreachable` with `tooLarge`), any other answer's text is returned.
   */
  readonly postToFile: (
    nodeId: string,
    path: string,
    payload: unknown,
    timeout: Duration.DurationInput,
    dest: string,
    maxBytes: number
  ) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /**
   * POSTs `body` as it is read, with `envelope` (canonical JSON) in `ENVELOPE_HEADER`, signed for
   * node `nodeId` over the envelope: for a body too large to be held, whose MAC cannot wait for its end.
   */
  readonly postStream: (
    nodeId: string,
    path: string,
    envelope: unknown,
    contentType: string,
    body: AsyncIterable<Uint8Array>,
    timeout: Duration.DurationInput
  ) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /**
   * A signed POST whose answer is kept as bytes, with its headers (a route that answers bytes): a
   * `json` payload sent and signed as `post` sends it, or `bytes` with `envelope` (canonical JSON
   * in `ENVELOPE_HEADER`), the MAC over `bytesSigned(envelope, bytes)`.
   */
  readonly postBytes: (
    nodeId: string,
    path: string,
    send: { readonly json: unknown } | { readonly envelope: unknown; readonly bytes: Uint8Array },
    timeout: Duration.DurationInput
  ) => Effect.Effect<PeerBytesAnswer, PeerUnreachable>
  /**
   * The key of a peer channel opened to this node (PeerChannel.ts) under root generation
   * `generation`, from its handshake's time, nonce and envelope; undefined when that generation
   * is not held here.
   */
  readonly channelKey: (generation: number, time: string, nonce: string, envelope: string) => Buffer | undefined
  /** Headers (MAC v2, single-use) that let node `audience` accept `method path` with `body`. */
  readonly sign: (audience: string, method: string, path: string, body: string) => Effect.Effect<Record<string, string>>
  /**
   * Why the request is refused, or undefined when it is a genuine call to this node, seen for the
   * first time (its nonce is spent). `acceptV1`: the route is idempotent and may take a v1 MAC
   * (storage eviction). Called once per call, by PeerGate (src/api/gate/GatesLive.ts).
   */
  readonly verify: (
    method: string,
    path: string,
    body: string,
    headers: Readonly<Record<string, string | undefined>>,
    remoteAddress: string | undefined,
    acceptV1: boolean
  ) => Effect.Effect<string | undefined>
  /**
   * `verify` decided on the spot at `now` (Unix ms), for the fast lane (src/api/FastLane.ts):
   * `MAC_UNHELD` when the MAC holds under no root generation this node holds yet, which `verify`
   * decides after reading the registry's newer ones. Its nonce is then not spent.
   */
  readonly verifyNow: (
    method: string,
    path: string,
    body: string,
    headers: Readonly<Record<string, string | undefined>>,
    remoteAddress: string | undefined,
    acceptV1: boolean,
    now: number
  ) => string | undefined | typeof MAC_UNHELD
}

/** `verifyNow`'s answer when only newer root generations could tell. */
export const MAC_UNHELD = Symbol("portico.coordination.macUnheld")

/**
 * Why a node-to-node call's source or coordination headers refuse it, or undefined when they are
 * well-formed and fresh (`now` in Unix ms): `verify` checks these before the MAC.
 */
export const coordinationHeadersRefusal = (
  headers: Readonly<Record<string, string | undefined>>,
  remoteAddress: string | undefined,
  now: number
): string | undefined => {
  if (!isOverlaySource(remoteAddress)) return "not from the cluster's private network"
  const given = headers[MAC_HEADER]
  const time = headers[TIME_HEADER]
  if (given === undefined || time === undefined || !/^\d{1,12}$/.test(time)) return "coordination MAC missing"
  if (Math.abs(Number(time) - now / 1000) > SKEW_SECONDS) return "coordination MAC expired"
  if (!given.startsWith("v1=") && !given.startsWith("v2=")) return "coordination MAC invalid"
  if (given.startsWith("v2=")) {
    const nonce = headers[NONCE_HEADER]
    if (nonce === undefined || !NONCE.test(nonce)) return "coordination nonce missing"
  }
  return undefined
}

const digest = (body: string) => createHash("sha256").update(body, "utf8").digest("hex")

/** Loopback, RFC 1918, CGNAT (the overlay's range) and IPv6 unique-local sources. */
export const isOverlaySource = (address: string | undefined): boolean => {
  if (address === undefined) return false
  const ip = address.startsWith("::ffff:") ? address.slice(7) : address
  if (ip === "::1") return true
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip)
  if (v4 !== null) {
    const a = Number(v4[1])
    const b = Number(v4[2])
    return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)
  }
  return /^f[cd][0-9a-f]{2}:/i.test(ip)
}

export class Coordination extends Context.Tag("portico/Coordination")<Coordination, CoordinationService>() {
  static readonly Live = Layer.scoped(
    Coordination,
    Effect.gen(function* () {
      const sealer = yield* Sealer
      const config = yield* PorticoConfig
      const membership = yield* Membership
      const store = yield* RegistryStore
      /** A MAC under root generation `generation` (the newest held when omitted); "" when not held. */
      const macV1 = (audience: string, method: string, path: string, body: string, time: string, generation = sealer.generation()) =>
        "v1=" + (sealer.hashAt(generation, "coordination-mac", [method.toUpperCase(), path, audience, time, digest(body)].join("\n")) ?? "")
      const macV2 = (audience: string, method: string, path: string, body: string, time: string, nonce: string, generation = sealer.generation()) =>
        "v2=" + (sealer.hashAt(generation, "coordination-mac-v2", [method.toUpperCase(), path, audience, time, nonce, digest(body)].join("\n")) ?? "")
      /** Whether `given` is `mac` under this node's newest generation or the one before. */
      const holdsUnderHeld = (given: string, mac: (generation: number) => string) => {
        const newest = sealer.generation()
        return safeEqual(given, mac(newest)) || (newest > 0 && safeEqual(given, mac(newest - 1)))
      }
      let lastCatchUp = 0
      /** As `holdsUnderHeld`, reading the registry's newer generations first when it does not hold. */
      const holds = (given: string, mac: (generation: number) => string) =>
        Effect.gen(function* () {
          if (holdsUnderHeld(given, mac)) return true
          const now = yield* Clock.currentTimeMillis
          if (now - lastCatchUp < CATCH_UP_EVERY_MS) return false
          lastCatchUp = now
          const before = sealer.generation()
          yield* Effect.catchAll(catchUp(store, sealer), (e) => Effect.logWarning(`could not read newer root generations: ${e.detail}`))
          return sealer.generation() !== before && holdsUnderHeld(given, mac)
        })
      const signAt = (audience: string, method: string, path: string, body: string, now: number) => {
        const time = String(Math.floor(now / 1000))
        const nonce = randomBytes(18).toString("base64url")
        return { [MAC_HEADER]: macV2(audience, method, path, body, time, nonce), [TIME_HEADER]: time, [NONCE_HEADER]: nonce }
      }
      const sign = (audience: string, method: string, path: string, body: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => signAt(audience, method, path, body, now))
      /** This node's own ledger of spent v2 nonces. */
      const ledger = yield* Effect.acquireRelease(
        Effect.sync(() => nonceLedger(config.dataDir)),
        (l) => Effect.sync(() => l.close())
      )
      /** The MAC a call's headers claim, as this node makes it under generation `g`. */
      const macOf = (method: string, path: string, body: string, headers: Readonly<Record<string, string | undefined>>) => {
        const time = headers[TIME_HEADER] ?? ""
        return (headers[MAC_HEADER] ?? "").startsWith("v1=")
          ? (g: number) => macV1(config.nodeId, method, path, body, time, g)
          : (g: number) => macV2(config.nodeId, method, path, body, time, headers[NONCE_HEADER] ?? "", g)
      }
      /** Spends a call's v2 nonce once its MAC holds (a forged call cannot use up a genuine one's nonce): why not, or undefined. */
      const spent = (headers: Readonly<Record<string, string | undefined>>): string | undefined => {
        let fresh: boolean
        try {
          fresh = ledger.spend(`${config.nodeId}:${headers[NONCE_HEADER] ?? ""}`, (Number(headers[TIME_HEADER]) + SKEW_SECONDS + 1) * 1000)
        } catch {
          return "this node could not record the coordination nonce"
        }
        return fresh ? undefined : "coordination call replayed"
      }
      const verifyNow: CoordinationService["verifyNow"] = (method, path, body, headers, remoteAddress, acceptV1, now) => {
        const malformed = coordinationHeadersRefusal(headers, remoteAddress, now)
        if (malformed !== undefined) return malformed
        const given = headers[MAC_HEADER] ?? ""
        const v1 = given.startsWith("v1=")
        if (v1 && !acceptV1) return "coordination MAC v1 is not accepted here: v2 is required"
        if (!holdsUnderHeld(given, macOf(method, path, body, headers))) return MAC_UNHELD
        return v1 ? undefined : spent(headers)
      }
      /** Node `nodeId`'s address, or why it is not called: it has none, or the membership says it is down. */
      const addressed = (nodeId: string, url: string | undefined, down: "inactive" | "stopped" | undefined): Either.Either<string, PeerUnreachable> =>
        url === undefined
          ? Either.left(new PeerUnreachable({ nodeId, detail: "no such node: neither in PORTICO_PEERS nor registered with an internal URL" }))
          : down !== undefined
            ? Either.left(new PeerUnreachable({ nodeId, detail: `the node is ${down} in the cluster's membership` }))
            : Either.right(url)
      /** Where node `nodeId` answers; unreachable when it has no address or the membership says it is down. */
      const baseOf = (nodeId: string) =>
        Effect.gen(function* () {
          const url = yield* membership.urlOf(nodeId)
          const down = url === undefined ? undefined : yield* membership.downOf(nodeId)
          return yield* addressed(nodeId, url, down)
        })
      /** A JSON call whose canonical body is `body`. */
      const postJson = (nodeId: string, path: string, body: string, timeout: Duration.DurationInput) =>
        Effect.gen(function* () {
          const base = yield* baseOf(nodeId)
          const headers = yield* sign(nodeId, "POST", path, body)
          return yield* Effect.tryPromise({
            try: (signal) => postText(base + path, { ...headers, "content-type": "application/json" }, body, signal),
            catch: (e) => new PeerUnreachable({ nodeId, detail: e instanceof Error ? e.message : String(e) })
          }).pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => new PeerUnreachable({ nodeId, detail: "no answer in time" }) }))
        })
      /**
       * `postBytes`: a vault share's call, one per node per push or pull. With the node's address
       * read in the last seconds (`addressNow`), the call is made at once, with one `async` and a
       * timer instead of an effect for each step; otherwise the membership is read first.
       */
      const postBytes: CoordinationService["postBytes"] = (nodeId, path, send, timeout) =>
        Effect.suspend(() => {
          let signed: string
          let body: string | Uint8Array
          let headers: Record<string, string>
          if ("json" in send) {
            signed = body = canonicalJson(send.json)
            headers = { "content-type": "application/json" }
          } else {
            const envelope = canonicalJson(send.envelope)
            signed = bytesSigned(envelope, send.bytes)
            body = send.bytes
            headers = { "content-type": "application/octet-stream", [ENVELOPE_HEADER]: envelope }
          }
          const address = membership.addressNow(nodeId)
          const base = address === undefined ? baseOf(nodeId) : addressed(nodeId, address.url, address.down)
          return Effect.flatMap(base, (url) =>
            Effect.async<PeerBytesAnswer, PeerUnreachable>((resume) => {
              const controller = new AbortController()
              let late = false
              const timer = setTimeout(() => {
                late = true
                controller.abort()
              }, Duration.toMillis(timeout))
              postBytesHttp(url + path, { ...signAt(nodeId, "POST", path, signed, Date.now()), ...headers }, body, controller.signal).then(
                (answer) => {
                  clearTimeout(timer)
                  resume(Effect.succeed(answer))
                },
                (e: unknown) => {
                  clearTimeout(timer)
                  resume(Effect.fail(new PeerUnreachable({ nodeId, detail: late ? "no answer in time" : e instanceof Error ? e.message : String(e) })))
                }
              )
              // an interrupted caller (its push answered, or gone) ends the call
              return Effect.sync(() => {
                clearTimeout(timer)
                controller.abort()
              })
            })
          )
        })
      const runCallback = Runtime.runCallback(yield* Effect.runtime<never>())
      const channelKey = (audience: string, generation: number, time: string, nonce: string, envelope: string) => {
        const hash = sealer.hashAt(generation, "peer-channel", channelKeyText(audience, time, nonce, envelope))
        return hash === undefined ? undefined : Buffer.from(hash, "base64url")
      }
      const channels = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makePeerChannels({
            opening: (nodeId) => {
              const generation = sealer.generation()
              const envelope = canonicalJson({ from: config.nodeId, generation })
              const headers = signAt(nodeId, "GET", CHANNEL_PATH, envelope, Date.now())
              const key = channelKey(nodeId, generation, headers[TIME_HEADER]!, headers[NONCE_HEADER]!, envelope)
              if (key === undefined) throw new Error(`root generation ${generation} is not held`)
              return { headers: { ...headers, [ENVELOPE_HEADER]: envelope }, key, generation }
            },
            generation: () => sealer.generation(),
            maxAnswerBytes: MAX_ANSWER_BYTES,
            // what a peer's channel takes: a forwarded body at its cap
            maxCallBytes: config.maxBodyBytes + FORWARDED_ROOM_BYTES,
            log: (message) => runCallback(Effect.logInfo(message))
          })
        ),
        (c) => Effect.sync(() => c.close())
      )
      /** `postNow` to node `nodeId` at `base`: on its peer channel when one is open, else as HTTP. */
      const postTo = (nodeId: string, base: string, path: string, body: string, timeoutMs: number, done: (answer: Either.Either<PeerAnswer, PeerUnreachable>) => void) => {
        const onChannel = channels.callNow(nodeId, base, path, body, timeoutMs, (outcome) =>
          done(Either.isRight(outcome) ? Either.right(outcome.right) : Either.left(new PeerUnreachable({ nodeId, detail: outcome.left })))
        )
        if (onChannel) return
        const signal = AbortSignal.timeout(timeoutMs)
        postText(base + path, { ...signAt(nodeId, "POST", path, body, Date.now()), "content-type": "application/json" }, body, signal)
          .then(
            (answer) => done(Either.right(answer)),
            (e: unknown) =>
              done(Either.left(new PeerUnreachable({ nodeId, detail: signal.aborted ? "no answer in time" : e instanceof Error ? e.message : String(e) })))
          )
          // `done` is the caller's: a throw of its own is logged, never an unhandled rejection
          .catch((e: unknown) => runCallback(Effect.logError("a peer's answer could not be handled", e)))
      }
      const postNow: CoordinationService["postNow"] = (nodeId, path, body, timeoutMs, done) => {
        const address = membership.addressNow(nodeId)
        if (address === undefined) {
          // the membership must be read first (the effect's way), then the call as below, within
          // what is left of the deadline
          const started = Date.now()
          runCallback(Effect.either(baseOf(nodeId)), {
            onExit: (exit) => {
              if (Exit.isFailure(exit)) return done(Either.left(new PeerUnreachable({ nodeId, detail: Cause.pretty(exit.cause) })))
              if (Either.isLeft(exit.value)) return done(Either.left(exit.value.left))
              const left = timeoutMs - (Date.now() - started)
              if (left <= 0) return done(Either.left(new PeerUnreachable({ nodeId, detail: "no answer in time" })))
              postTo(nodeId, exit.value.right, path, body, left, done)
            }
          })
          return
        }
        const base = addressed(nodeId, address.url, address.down)
        if (Either.isLeft(base)) return done(Either.left(base.left))
        postTo(nodeId, base.right, path, body, timeoutMs, done)
      }
      /**
       * One signed POST to a peer: `signed` is the text the MAC covers, `body` what is sent (the
       * same JSON, or a stream with `extra` headers); `read` takes the answer's body (it may fail
       * with PeerUnreachable).
       */
      const call = (
        nodeId: string,
        path: string,
        signed: string,
        send: { readonly body: string | AsyncIterable<Uint8Array>; readonly headers: Record<string, string> },
        timeout: Duration.DurationInput,
        read: (response: Response) => Promise<string>
      ): Effect.Effect<PeerAnswer, PeerUnreachable> =>
        Effect.gen(function* () {
          const base = yield* baseOf(nodeId)
          const headers = yield* sign(nodeId, "POST", path, signed)
          return yield* Effect.tryPromise({
            try: async (signal) => {
              const body = send.body
              const response = await fetch(base + path, {
                method: "POST",
                headers: { ...headers, ...send.headers },
                ...(typeof body === "string" ? { body } : { body: Readable.toWeb(Readable.from(body)) as ReadableStream<Uint8Array>, duplex: "half" }),
                redirect: "manual",
                signal
              } as RequestInit)
              return { status: response.status, text: await read(response), retryAfter: response.headers.get("retry-after") ?? undefined }
            },
            catch: (e) => (e instanceof PeerUnreachable ? e : new PeerUnreachable({ nodeId, detail: e instanceof Error ? e.message : String(e) }))
          }).pipe(
            Effect.timeoutFail({ duration: timeout, onTimeout: () => new PeerUnreachable({ nodeId, detail: "no answer in time" }) })
          )
        })

      /** A JSON call: the canonical JSON is both what the MAC covers and what is sent. */
      const json = (payload: unknown) => {
        const body = canonicalJson(payload)
        return [body, { body, headers: { "content-type": "application/json" } }] as const
      }

      return {
        post: (nodeId, path, payload, timeout) => Effect.suspend(() => postJson(nodeId, path, canonicalJson(payload), timeout)),
        postNow,
        postBytes,
        postStream: (nodeId, path, envelope, contentType, body, timeout) => {
          const signed = canonicalJson(envelope)
          return call(nodeId, path, signed, { body, headers: { [ENVELOPE_HEADER]: signed, "content-type": contentType } }, timeout, async (response) => response.text())
        },
        postToFile: (nodeId, path, payload, timeout, dest, maxBytes) =>
          call(nodeId, path, ...json(payload), timeout, async (response) => {
            if (response.status !== 200 || response.body === null) return response.text()
            let seen = 0
            const capped = new Transform({
              transform(chunk: Buffer, _encoding, done) {
                seen += chunk.length
                done(seen > maxBytes ? new PeerUnreachable({ nodeId, detail: `answered over ${maxBytes} bytes`, tooLarge: true }) : null, chunk)
              }
            })
            await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), capped, createWriteStream(dest))
            return ""
          }),
        sign,
        channelKey: (generation, time, nonce, envelope) => channelKey(config.nodeId, generation, time, nonce, envelope),
        verify: (method, path, body, headers, remoteAddress, acceptV1) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const decided = verifyNow(method, path, body, headers, remoteAddress, acceptV1, now)
            if (decided !== MAC_UNHELD) return decided
            const given = headers[MAC_HEADER] ?? ""
            if (!(yield* holds(given, macOf(method, path, body, headers)))) return "coordination MAC invalid"
            return given.startsWith("v1=") ? undefined : spent(headers)
          }),
        verifyNow
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Coordination.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test,
          PorticoConfig.Test,
          Membership.Test
        )
      )
    )
  )
}
