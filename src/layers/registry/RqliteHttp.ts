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
class Transient extends Data.TaggedError("Transient")<{ readonly detail: string; readonly unsent: boolean }> {}

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

export const rqliteHttp = (config: RqliteHttpConfig): RqliteHttp => {
  const base = config.url.replace(/\/+$/, "")
  const timeout = Duration.decode(config.timeout ?? defaultTimeout)
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (config.user !== undefined) {
    const secret = config.password === undefined ? "" : Redacted.value(config.password)
    headers["authorization"] = `Basic ${Buffer.from(`${config.user}:${secret}`).toString("base64")}`
  }
  const retrySchedule = Schedule.exponential(Duration.millis(100), 2).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(config.retries ?? defaultRetries))
  )

  // node:http with a keep-alive pool rather than fetch: the WHATWG stream machinery costs more
  // than the rqlite round trip itself on a point read
  const agent = new (base.startsWith("https:") ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: 64 })

  const limit = config.maxResponseBytes ?? Number.POSITIVE_INFINITY
  const sendOnce = (url: string, body: string): Effect.Effect<HttpAnswer, Transient | StoreError> =>
    Effect.async<HttpAnswer, Transient | StoreError>((resume, signal) => {
      const target = new URL(url)
      const client = target.protocol === "https:" ? https : http
      const request = client.request(
        target,
        { method: "POST", headers: { ...headers, "content-length": Buffer.byteLength(body) }, agent, signal },
        (response) => {
          const chunks: Array<Buffer> = []
          let size = 0
          response.on("data", (chunk: Buffer) => {
            size += chunk.length
            if (size <= limit) return void chunks.push(chunk)
            // a tenant's query may select more than any answer should carry: stop reading it
            chunks.length = 0
            response.destroy()
            resume(Effect.fail(new StoreError({ reason: "too_large", detail: `rqlite's answer is over ${limit} bytes` })))
          })
          response.on("end", () =>
            resume(
              Effect.succeed({
                status: response.statusCode ?? 0,
                location: response.headers.location ?? null,
                body: Buffer.concat(chunks).toString("utf8")
              })
            )
          )
          response.on("error", (error) => resume(Effect.fail(transportFailure(error))))
        }
      )
      request.on("error", (error) => resume(Effect.fail(transportFailure(error))))
      request.end(body)
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => new Transient({ detail: `rqlite did not answer within ${Duration.format(timeout)}`, unsent: false })
      })
    )

  const send = (url: string, body: string, hops: number): Effect.Effect<unknown, Transient | StoreError> =>
    Effect.flatMap(sendOnce(url, body), (answer) => {
      const { status } = answer
      if (status >= 300 && status < 400 && answer.location !== null && hops < maxRedirects) {
        return send(new URL(answer.location, url).toString(), body, hops + 1)
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

  const post = (path: string, body: string, idempotent: boolean): Effect.Effect<unknown, StoreError> =>
    Effect.suspend(() => send(`${base}${path}`, body, 0)).pipe(
      Effect.retry({
        schedule: retrySchedule,
        while: (error) => error._tag === "Transient" && (error.unsent || idempotent)
      }),
      Effect.catchTag("Transient", (error) => Effect.fail(new StoreError({ reason: "unavailable", detail: error.detail })))
    )

  return { post, base, headers, timeout }
}
