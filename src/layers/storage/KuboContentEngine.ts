/**
 * The cluster content engine: bytes go into the local Kubo node through its RPC API with the
 * `unixfs-v1-2025` import parameters (so CIDs match the embedded engine's), and pins are IPFS
 * Cluster's, through its REST API, which allocates and replicates them across the cluster's
 * peers. Adds are not pinned in Kubo: the cluster pins them right after the caller has recorded
 * its reference, and this gateway's garbage collection waits for adds in progress, as the
 * embedded engine's sweep does.
 */
import { Clock, Duration, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { UNIXFS_PROFILE } from "../../domain/ContentId.js"
import { makeReclaimLock } from "./ReclaimLock.js"
import { ContentEngine, ContentEngineError, type ContentEngineService, EVICT_WAIT, type PinState, type PinStatusName } from "./ContentEngine.js"

export interface KuboOptions {
  /** Kubo's RPC API, e.g. http://127.0.0.1:5001 */
  readonly kuboUrl: string
  /** IPFS Cluster's REST API, e.g. http://127.0.0.1:9094 */
  readonly clusterUrl: string
}

const CALL_TIMEOUT = Duration.seconds(30)
/** How long a pin waits for a peer to hold it before answering with what the cluster says. */
const PIN_WAIT_MS = 15_000
/** Cluster pins younger than this are left alone by the sweep: their reference may be landing. */
const SWEEP_GRACE_MS = 10 * 60_000

const ADD_PARAMS = new URLSearchParams({
  "cid-version": String(UNIXFS_PROFILE.cidVersion),
  "raw-leaves": String(UNIXFS_PROFILE.rawLeaves),
  chunker: `size-${UNIXFS_PROFILE.chunkSize}`,
  // Kubo's default is 174 links per node: files over 174 MiB would get another CID without it
  "max-file-links": String(UNIXFS_PROFILE.maxLinksPerNode),
  pin: "false",
  progress: "false"
}).toString()

const unavailable = (detail: unknown) =>
  new ContentEngineError({ reason: "unavailable", detail: detail instanceof Error ? detail.message : String(detail) })

/** Cluster peer statuses, folded into the spec's six. */
const statusOf = (s: string): PinStatusName => {
  switch (s) {
    case "pinned":
      return "pinned"
    case "pinning":
      return "pinning"
    case "pin_queued":
      return "queued"
    case "unpinned":
    case "unpinning":
    case "unpin_queued":
      return "unpinned"
    case "pin_error":
    case "unpin_error":
    case "cluster_error":
      return "error"
    default:
      return "unknown"
  }
}

interface PeerState {
  readonly status: string
  readonly error?: string
}

/** One answer for the pin, over the peers it is allocated to (all peers when allocated everywhere). */
export const aggregate = (
  peerMap: Readonly<Record<string, PeerState>>,
  allocations: ReadonlyArray<string>,
  replicationMin: number,
  replicationMax: number
): PinState => {
  const peers = allocations.length > 0 ? allocations.filter((p) => p in peerMap) : Object.keys(peerMap)
  const states = peers.map((p) => ({ status: statusOf(peerMap[p]?.status ?? "unknown"), error: peerMap[p]?.error ?? "" }))
  const pinned = states.filter((s) => s.status === "pinned").length
  const failed = states.find((s) => s.status === "error")
  const status: PinStatusName =
    states.length === 0
      ? "unknown"
      : failed !== undefined
        ? "error"
        : pinned === states.length
          ? "pinned"
          : states.some((s) => s.status === "pinning")
            ? "pinning"
            : states.some((s) => s.status === "queued")
              ? "queued"
              : states.every((s) => s.status === "unpinned")
                ? "unpinned"
                : "unknown"
  return { status, replicationMin, replicationMax, replicationFactor: pinned, peers, error: failed?.error ?? "" }
}

export const makeKuboEngine = (options: KuboOptions) =>
  Effect.gen(function* () {
    const lock = yield* makeReclaimLock
    const kubo = (path: string, params: URLSearchParams | string = "") =>
      `${options.kuboUrl}/api/v0/${path}${params.toString() === "" ? "" : "?" + params.toString()}`

    /** Calls Kubo's RPC (always POST) and answers the body text; a non-200 is an error with Kubo's message. */
    const rpc = (path: string, params: URLSearchParams) =>
      Effect.tryPromise({
        try: async (signal) => {
          const response = await fetch(kubo(path, params), { method: "POST", signal })
          const text = await response.text()
          if (response.status !== 200) throw new KuboRefused(response.status, text)
          return text
        },
        catch: (e) => (e instanceof KuboRefused ? e : unavailable(e))
      }).pipe(Effect.timeoutFail({ duration: CALL_TIMEOUT, onTimeout: () => unavailable(`kubo ${path} timed out`) }))

    const cluster = (method: string, path: string) =>
      Effect.tryPromise({
        try: async (signal) => {
          const response = await fetch(options.clusterUrl + path, { method, signal })
          return { status: response.status, text: await response.text() }
        },
        catch: unavailable
      }).pipe(Effect.timeoutFail({ duration: CALL_TIMEOUT, onTimeout: () => unavailable(`cluster ${method} ${path} timed out`) }))

    const lines = (text: string): Array<Record<string, unknown>> =>
      text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>)

    const pinState = (cid: string) =>
      Effect.gen(function* () {
        const allocation = yield* cluster("GET", `/allocations/${cid}`)
        if (allocation.status === 404) {
          return { status: "unpinned", replicationMin: 0, replicationMax: 0, replicationFactor: 0, peers: [], error: "" } satisfies PinState
        }
        if (allocation.status !== 200) return yield* Effect.fail(unavailable(`cluster allocations answered ${allocation.status}`))
        const pin = JSON.parse(allocation.text) as { replication_factor_min?: number; replication_factor_max?: number; allocations?: Array<string> | null }
        const status = yield* cluster("GET", `/pins/${cid}`)
        if (status.status !== 200) return yield* Effect.fail(unavailable(`cluster status answered ${status.status}`))
        const info = JSON.parse(status.text) as { peer_map?: Record<string, PeerState> }
        return aggregate(info.peer_map ?? {}, pin.allocations ?? [], pin.replication_factor_min ?? -1, pin.replication_factor_max ?? -1)
      })

    const engine: ContentEngineService = {
      kind: "kubo",
      add: (bytes) =>
        Effect.gen(function* () {
          yield* lock.hold
          // what the byte source threw (a limit) is the caller's to report, not Kubo's
          let sourceError: unknown = undefined
          return yield* Effect.tryPromise({
            try: async (signal) => {
              const boundary = `portico-${randomBytes(12).toString("hex")}`
              let size = 0
              const head = Buffer.from(
                `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n`
              )
              const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
              const source = bytes[Symbol.asyncIterator]()
              let stage: "head" | "body" | "tail" | "done" = "head"
              const body = new ReadableStream<Uint8Array>({
                async pull(controller) {
                  if (stage === "head") {
                    stage = "body"
                    return controller.enqueue(head)
                  }
                  if (stage === "body") {
                    let next: IteratorResult<Uint8Array>
                    try {
                      next = await source.next()
                    } catch (e) {
                      sourceError = e
                      throw e
                    }
                    if (!next.done) {
                      size += next.value.length
                      return controller.enqueue(next.value)
                    }
                    stage = "tail"
                    return controller.enqueue(tail)
                  }
                  stage = "done"
                  controller.close()
                }
              })
              const response = await fetch(kubo("add", ADD_PARAMS), {
                method: "POST",
                headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
                body,
                signal,
                duplex: "half"
              } as RequestInit)
              const text = await response.text()
              if (response.status !== 200) throw new Error(`kubo add answered ${response.status}: ${text.slice(0, 200)}`)
              const last = lines(text).pop()
              const hash = last?.["Hash"]
              if (typeof hash !== "string") throw new Error("kubo add answered no CID")
              return { cid: hash, size }
            },
            catch: (e) => new ContentEngineError({ reason: "unavailable", detail: String(e), cause: sourceError ?? e })
          })
        }),

      size: (cid) =>
        rpc("files/stat", new URLSearchParams({ arg: `/ipfs/${cid}` })).pipe(
          Effect.map((text) => {
            const stat = JSON.parse(text) as { Size?: number; Type?: string }
            return stat.Type === "file" && typeof stat.Size === "number" ? stat.Size : undefined
          }),
          Effect.catchIf(
            (e): e is KuboRefused => e instanceof KuboRefused,
            () => Effect.succeed(undefined)
          ),
          Effect.mapError((e) => (e instanceof ContentEngineError ? e : unavailable(e)))
        ),

      read: (cid, offset, length) => ({
        async *[Symbol.asyncIterator]() {
          if (length === 0) return
          // a deadline for Kubo to start answering, not for the whole body: big files take long
          const abort = new AbortController()
          const deadline = setTimeout(() => abort.abort(), Duration.toMillis(CALL_TIMEOUT))
          try {
            const response = await fetch(kubo("cat", new URLSearchParams({ arg: cid, offset: String(offset), length: String(length) })), {
              method: "POST",
              signal: abort.signal
            })
            clearTimeout(deadline)
            if (response.status !== 200 || response.body === null) throw new Error(`kubo cat answered ${response.status}`)
            for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) yield chunk
          } finally {
            // the client went away mid-body: stop Kubo's side as well
            clearTimeout(deadline)
            abort.abort()
          }
        }
      }),

      pin: (cid, name) =>
        Effect.gen(function* () {
          const params = new URLSearchParams({ name, "replication-min": "-1", "replication-max": "-1" })
          const answer = yield* cluster("POST", `/pins/${cid}?${params.toString()}`)
          if (answer.status !== 200) return yield* Effect.fail(unavailable(`cluster pin answered ${answer.status}: ${answer.text.slice(0, 200)}`))
          // the content is on this node already: wait (briefly) until the cluster says so
          const started = yield* Clock.currentTimeMillis
          for (;;) {
            const state = yield* pinState(cid)
            if (state.status === "pinned") return
            if (state.status === "error") {
              return yield* Effect.fail(new ContentEngineError({ reason: "missing", detail: state.error }))
            }
            if ((yield* Clock.currentTimeMillis) - started > PIN_WAIT_MS) return
            yield* Effect.sleep(Duration.millis(100))
          }
        }),

      unpin: (cid) =>
        Effect.flatMap(cluster("DELETE", `/pins/${cid}`), (answer) =>
          // 404: not in the pinset, which is what was asked
          answer.status === 200 || answer.status === 404
            ? Effect.void
            : Effect.fail(unavailable(`cluster unpin answered ${answer.status}`))
        ),

      status: pinState,

      evict: (cid, keep) =>
        lock.exclusiveWithin(EVICT_WAIT)(
          Effect.gen(function* () {
            // pinned again since the unpin: theirs now, nothing is removed
            if ((yield* keep).includes(cid)) return false
            // the cluster's own unpin reaches this node's Kubo in its time; do it now
            yield* Effect.ignore(rpc("pin/rm", new URLSearchParams({ arg: cid })))
            const refs = yield* rpc("refs", new URLSearchParams({ arg: cid, recursive: "true", unique: "true", offline: "true" })).pipe(
              Effect.map((text) => lines(text).flatMap((l) => (typeof l["Ref"] === "string" && l["Ref"] !== "" ? [l["Ref"]] : []))),
              Effect.orElseSucceed(() => [] as Array<string>)
            )
            const blocks = [cid, ...refs]
            const params = new URLSearchParams()
            for (const b of blocks) params.append("arg", b)
            const removed = yield* rpc("block/rm", params).pipe(
              Effect.map(lines),
              Effect.catchIf(
                (e): e is KuboRefused => e instanceof KuboRefused,
                (e) => Effect.succeed(lines(e.body).filter((l) => "Hash" in l))
              )
            )
            // a block another pin holds stays by design; one still here for another reason fails
            return removed.every((l) => {
              const error = typeof l["Error"] === "string" ? l["Error"] : ""
              return error === "" || /pinned|not found|no such block/i.test(error)
            })
          })
        ).pipe(Effect.mapError((e) => (e instanceof ContentEngineError ? e : unavailable(e)))),

      sweep: (keep) =>
        lock.exclusive(
          Effect.gen(function* () {
            const kept = new Set(yield* keep)
            const now = yield* Clock.currentTimeMillis
            // pins the registry no longer has (an unpin whose cluster call failed)
            const all = yield* cluster("GET", "/allocations")
            if (all.status === 200) {
              for (const pin of lines(all.text)) {
                const cid = typeof pin["cid"] === "string" ? pin["cid"] : undefined
                const at = typeof pin["timestamp"] === "string" ? Date.parse(pin["timestamp"]) : now
                if (cid !== undefined && !kept.has(cid) && now - at > SWEEP_GRACE_MS) {
                  yield* Effect.ignore(cluster("DELETE", `/pins/${cid}`))
                }
              }
            }
            const gc = yield* rpc("repo/gc", new URLSearchParams({ quiet: "true" }))
            return { removed: lines(gc).filter((l) => l["Key"] !== undefined).length }
          })
        ).pipe(Effect.mapError((e) => (e instanceof ContentEngineError ? e : unavailable(e))))
    }
    return engine
  })

/** Kubo answered, with a refusal: its body says why. */
class KuboRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: string
  ) {
    super(`kubo answered ${status}: ${body.slice(0, 200)}`)
  }
}

export const KuboContentEngine = {
  layer: (options: KuboOptions) => Layer.effect(ContentEngine, makeKuboEngine(options))
}
