/**
 * rqlite's HTTP API as a transport: deadlines, leader redirects followed by hand, and retries
 * that never send a write twice unless it certainly never arrived. The registry store and the
 * tenants' cluster SQL store both speak through it.
 */
import { Data, Duration, Effect, Redacted, Schedule } from "effect"
import { parseExactJson } from "../../domain/ExactJson.js"
import * as http from "node:http"
import * as https from "node:https"
import { StoreError } from "./RegistryStore.js"

export interface RqliteHttpConfig {
  /** Base URL of any node (`http://host:4001`); a follower forwards to the leader itself. */
  readonly url: string
  readonly user?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  /** Deadline of one HTTP attempt. Default 10 s. */
  readonly timeout?: Duration.DurationInput | undefined
  /** How many times a retry-safe `unavailable` failure is tried again. Default 3. */
  readonly retries?: number | undefined
  /**
   * Largest answer read; a longer one is cut off and fails with reason `too_large` (never
   * retried). Unset: no bound (the registry's own queries are bounded by their SQL).
   */
  readonly maxResponseBytes?: number | undefined
  /**
   * Whether a read whose attempt ran past the deadline is tried again. Default true. The SQL
   * store says false: rqlite stops its statements itself before the deadline (`db_timeout`), so
   * an attempt still running at the deadline is one that would only run as long again.
   */
  readonly retryPastDeadline?: boolean | undefined
}

const defaultTimeout = Duration.seconds(10)
const defaultRetries = 3
/** A misconfigured cluster could bounce requests between nodes forever. */
const maxRedirects = 3

/**
 * A failure that says nothing about the data, only that the cluster did not answer. `unsent`
 * means the request certainly never reached rqlite (connection refused, or rqlite refused it
 * before doing anything: no leader), so even a write can be sent again; otherwise only reads are.
 */
class Transient extends Data.TaggedError("Transient")<{
  readonly detail: string
  readonly unsent: boolean
  /** The attempt ran past its deadline. */
  readonly late?: boolean
}> {}

/** Socket errors raised before a byte of the request left: retrying cannot apply a write twice. */
const unsentCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT"
])

const errorCode = (error: unknown, depth = 0): string | undefined => {
  if (typeof error !== "object" || error === null || depth > 4) return undefined
  if ("code" in error && typeof error.code === "string") return error.code
  if ("errors" in error && Array.isArray(error.errors)) {
    for (const inner of error.errors) {
      const code = errorCode(inner, depth + 1)
      if (code !== undefined) return code
    }
  }
  return "cause" in error ? errorCode(error.cause, depth + 1) : undefined
}

const transportFailure = (error: unknown): Transient => {
  const code = errorCode(error)
  return new Transient({ detail: `rqlite request failed: ${code ?? String(error)}`, unsent: code !== undefined && unsentCodes.has(code) })
}

interface HttpAnswer {
  readonly status: number
  readonly location: string | null
  readonly body: string
}

export interface RqliteHttp {
  /** POSTs a JSON body to `path`; the parsed answer, after rqlite's cluster-level error check. */
  readonly post: (path: string, body: string, idempotent: boolean) => Effect.Effect<unknown, StoreError>
  /** Base URL and headers, for the streaming calls (backup, load) that bypass JSON. */
  readonly base: string
  readonly headers: Readonly<Record<string, string>>
  readonly timeout: Duration.Duration
}

/** A URL without its user and password, and those as `user:password` (percent-decoded). */
const splitCredentials = (url: string): { readonly base: string; readonly urlCredentials: string | undefined } => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return { base: url, urlCredentials: undefined }
  }
  if (parsed.username === "" && parsed.password === "") return { base: url, urlCredentials: undefined }
  const urlCredentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`
  parsed.username = ""
  parsed.password = ""
  return { base: parsed.toString().replace(/\/+$/, ""), urlCredentials }
}

export const rqliteHttp = (config: RqliteHttpConfig): RqliteHttp => {
  // Credentials in the URL (`http://user:pass@host:4001`, the only place a tenant's rqlite
  // credentials can go) become the Authorization header, and the base keeps none: fetch (backup,
  // load) refuses a URL with credentials, and they must not reach a log with the URL. Configured
  // credentials win over them.
  const { base, urlCredentials } = splitCredentials(config.url.replace(/\/+$/, ""))
  const timeout = Duration.decode(config.timeout ?? defaultTimeout)
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (config.user !== undefined) {
    const secret = config.password === undefined ? "" : Redacted.value(config.password)
    headers["authorization"] = `Basic ${Buffer.from(`${config.user}:${secret}`).toString("base64")}`
  } else if (urlCredentials !== undefined) {
    headers["authorization"] = `Basic ${Buffer.from(urlCredentials).toString("base64")}`
  }
  // Retries wait 100, 200, 400 ms … (jittered). The first wait is taken by hand and the schedule
  // covers the later ones: `Effect.retry` builds its schedule driver up front, ~4.5 µs on every
  // request that never needs it.
  const retries = config.retries ?? defaultRetries
  const retryPastDeadline = config.retryPastDeadline ?? true
  const laterRetries = Schedule.exponential(Duration.millis(200), 2).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(retries - 1))
  )
  const firstRetryDelay = Effect.suspend(() => Effect.sleep(Duration.millis(100 * (0.8 + Math.random() * 0.4))))

  // node:http with a keep-alive pool rather than fetch: the WHATWG stream machinery costs more
  // than the rqlite round trip itself on a point read. One pool per protocol, made on first use:
  // a leader redirect may name the other one.
  const agents = new Map<string, http.Agent>()
  const agentFor = (protocol: "http:" | "https:"): http.Agent => {
    let agent = agents.get(protocol)
    if (agent === undefined) {
      agent = new (protocol === "https:" ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: 64 })
      agents.set(protocol, agent)
    }
    return agent
  }

  const limit = config.maxResponseBytes ?? Number.POSITIVE_INFINITY
  // node fires a timer past 2^31-1 ms at once: a longer (or infinite) deadline means no timer
  const timeoutMillis = Duration.toMillis(timeout)
  const timed = Number.isFinite(timeoutMillis) && timeoutMillis <= 2_147_483_647
  const timeoutDetail = `rqlite did not answer within ${Duration.format(timeout)}`

  // Request options by URL, parsed once: a gateway sends to a handful of paths (plus the odd
  // leader redirect), and `new URL` per request showed in the profile.
  // A redirect's URL with a user and password sends them as Basic auth, as node does for a URL
  // object, unless an Authorization header is already set (the base's, above).
  const targets = new Map<string, http.RequestOptions>()
  const optionsFor = (url: string): http.RequestOptions | undefined => {
    const known = targets.get(url)
    if (known !== undefined) return known
    let target: URL
    try {
      target = new URL(url)
    } catch {
      return undefined
    }
    if (target.protocol !== "http:" && target.protocol !== "https:") return undefined
    const options: http.RequestOptions = {
      protocol: target.protocol,
      hostname: target.hostname.replace(/^\[|\]$/g, ""),
      port: target.port === "" ? undefined : Number(target.port),
      path: target.pathname + target.search,
      auth: target.username === "" ? undefined : `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`,
      method: "POST",
      agent: agentFor(target.protocol)
    }
    if (targets.size >= 64) targets.clear()
    targets.set(url, options)
    return options
  }

  /**
   * One attempt, with a plain timer for its deadline and `destroy` for interruption. Not
   * `Effect.timeoutFail` and not the AbortSignal `Effect.async` offers: the first forks a sleeping
   * fiber per request, the second builds an AbortController and its listeners per request; with
   * both, a point read spent ~230 µs of CPU in this function against ~50 µs for node:http alone.
   */
  const sendOnce = (url: string, body: string): Effect.Effect<HttpAnswer, Transient | StoreError> =>
    Effect.async<HttpAnswer, Transient | StoreError>((resume) => {
      let settled = false
      let timer: ReturnType<typeof setTimeout> | undefined
      const settle = (outcome: Effect.Effect<HttpAnswer, Transient | StoreError>) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resume(outcome)
      }
      const options = optionsFor(url)
      if (options === undefined) {
        // a redirect to something that is not an http(s) URL: the cluster is misconfigured
        resume(Effect.fail(new StoreError({ reason: "unavailable", detail: "rqlite redirected to an address that is not an http(s) URL" })))
        return
      }
      const client = options.protocol === "https:" ? https : http
      const request = client.request(
        { ...options, headers: { ...headers, "content-length": Buffer.byteLength(body) } },
        (response) => {
          const chunks: Array<Buffer> = []
          let size = 0
          response.on("data", (chunk: Buffer) => {
            size += chunk.length
            if (size <= limit) return void chunks.push(chunk)
            // a tenant's query may select more than any answer should carry: stop reading it
            chunks.length = 0
            response.destroy()
            settle(Effect.fail(new StoreError({ reason: "too_large", detail: `rqlite's answer is over ${limit} bytes` })))
          })
          response.on("end", () =>
            settle(
              Effect.succeed({
                status: response.statusCode ?? 0,
                location: response.headers.location ?? null,
                body: Buffer.concat(chunks).toString("utf8")
              })
            )
          )
          response.on("error", (error) => settle(Effect.fail(transportFailure(error))))
        }
      )
      if (timed) {
        timer = setTimeout(() => {
          settle(Effect.fail(new Transient({ detail: timeoutDetail, unsent: false, late: true })))
          request.destroy()
        }, timeoutMillis)
      }
      request.on("error", (error) => settle(Effect.fail(transportFailure(error))))
      request.end(body)
      return Effect.sync(() => {
        settled = true
        clearTimeout(timer)
        request.destroy()
      })
    })

  const send = (url: string, body: string, hops: number): Effect.Effect<unknown, Transient | StoreError> =>
    Effect.flatMap(sendOnce(url, body), (answer) => {
      const { status } = answer
      if (status >= 300 && status < 400 && answer.location !== null && hops < maxRedirects) {
        let next: string
        try {
          next = new URL(answer.location, url).toString()
        } catch {
          return Effect.fail(
            new StoreError({ reason: "unavailable", detail: `rqlite redirected to an invalid location: ${answer.location.slice(0, 200)}` })
          )
        }
        return send(next, body, hops + 1)
      }
      if (status === 503) {
        // rqlite answers 503 before touching the log: no leader, or the node is not ready.
        return Effect.fail(new Transient({ detail: `rqlite unavailable: ${answer.body.trim()}`, unsent: true }))
      }
      // A result rqlite cannot write as JSON (±Infinity: "json: unsupported value: +Inf") is a 500
      // that no retry will clear: the statement's answer, not the store, is the problem.
      if (status === 400 || (status === 500 && (answer.body.startsWith("SQL rewrite") || answer.body.includes("unsupported value")))) {
        return Effect.fail(new StoreError({ reason: "statement", detail: `rqlite rejected the request: ${answer.body.trim()}` }))
      }
      if (status !== 200) {
        // 401/403 (bad credentials), 408 (queue timeout), other 5xx: the store cannot answer.
        return Effect.fail(
          new StoreError({ reason: "unavailable", detail: `rqlite answered ${status}: ${answer.body.trim()}` })
        )
      }
      return Effect.try({
        // rqlite writes 64-bit integers digit for digit; parseExactJson keeps them
        try: (): unknown => parseExactJson(answer.body),
        catch: () => new StoreError({ reason: "statement", detail: "rqlite answered something other than JSON" })
      }).pipe(
        Effect.flatMap((parsed) => {
          // A top-level error is the cluster's, not the statement's: Raft apply timed out,
          // leadership moved mid-commit, forwarding to the leader failed.
          const error = typeof parsed === "object" && parsed !== null && "error" in parsed ? parsed.error : undefined
          return typeof error === "string"
            ? Effect.fail(new Transient({ detail: `rqlite: ${error}`, unsent: false }))
            : Effect.succeed(parsed)
        })
      )
    })

  const post = (path: string, body: string, idempotent: boolean): Effect.Effect<unknown, StoreError> => {
    const attempt = Effect.suspend(() => send(`${base}${path}`, body, 0))
    const retriable = (error: Transient | StoreError) =>
      error._tag === "Transient" && (error.unsent || (idempotent && (retryPastDeadline || error.late !== true)))
    return attempt.pipe(
      Effect.catchAll((error) =>
        retries < 1 || !retriable(error)
          ? Effect.fail(error)
          : Effect.zipRight(firstRetryDelay, Effect.retry(attempt, { schedule: laterRetries, while: retriable }))
      ),
      Effect.catchTag("Transient", (error) => Effect.fail(new StoreError({ reason: "unavailable", detail: error.detail })))
    )
  }

  return { post, base, headers, timeout }
}
