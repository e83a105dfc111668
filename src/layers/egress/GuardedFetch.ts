/**
 * The one HTTP client for hosts a tenant chose (a namespace's relay `base_url`, the legacy relay;
 * later the anonymity proxy's and deployments' outbound calls). Spec §4.6: at dial time, after name
 * resolution, it refuses loopback, private, link-local, carrier-grade NAT, benchmarking, multicast,
 * reserved and IPv4-embedding IPv6 addresses (src/domain/AddressRanges.ts), follows no redirects,
 * and gives up after a deadline.
 *
 * The check runs inside the socket's own `lookup`: the addresses it approves are the very ones the
 * socket connects to, so a DNS answer that changes between a check and the connect (rebinding)
 * cannot slip through. node:net skips `lookup` for an IP literal, so a literal host is judged
 * before the request is made; the WHATWG URL parser has already turned every IPv4 spelling
 * (2130706433, 0177.0.0.1, 0x7f.1) into dotted decimal and every IPv6 one into its short form.
 *
 * `PORTICO_EGRESS_ALLOW_CIDRS` exempts ranges (tests reach a loopback relay through it).
 */
import { Context, Data, Effect, Either, Layer } from "effect"
import * as dns from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import * as tls from "node:tls"
import { type AllowList, emptyAllowList, ipLiteral, judgeAddress, parseCidrs } from "../../domain/AddressRanges.js"
import { PorticoConfig } from "../config/PorticoConfig.js"

/**
 * Why an egress request failed: the URL is not one (`invalid_url`), its host resolves only to
 * refused addresses (`refused`), it does not resolve (`unresolvable`), the deadline passed
 * (`timeout`), the connection failed (`transport`), or the answer was over its cap (`too_large`).
 * `detail` is for logs and hints; it never carries a credential.
 */
export class EgressError extends Data.TaggedError("EgressError")<{
  readonly reason: "invalid_url" | "refused" | "unresolvable" | "timeout" | "transport" | "too_large"
  readonly detail: string
}> {}

export interface GuardedRequest {
  readonly url: string
  readonly method?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
  /** Deadline of the whole exchange (connect, send, answer); the client's default otherwise. */
  readonly timeoutMs?: number
}

/** The answer as it came: a 3xx is handed back like any other status, its Location not followed. */
export interface GuardedResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: Uint8Array
}

/** What a name resolves to: dns.lookup with `all: true` (getaddrinfo) unless a test gives another. */
export type Resolver = (host: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>

export interface GuardedFetchOptions {
  readonly allow?: AllowList
  /** Default deadline of one exchange. */
  readonly timeoutMs?: number
  /** Largest answer body read; past it the request fails `too_large`. */
  readonly maxResponseBytes?: number
  readonly resolve?: Resolver
  /**
   * CA certificates (PEM) trusted beside the platform's, for in-process tests of TLS stand-ins; a
   * gateway process trusts them through NODE_EXTRA_CA_CERTS instead.
   */
  readonly ca?: string
}

export interface GuardedFetchService {
  /** One request to a tenant-chosen URL (http or https), guarded as above. */
  readonly request: (request: GuardedRequest) => Effect.Effect<GuardedResponse, EgressError>
  /**
   * A host as written in a tenant's URL (name or IP literal in any spelling, no port), checked
   * when it is stored (`PUT /v1/push/config`): it must resolve, and every address it resolves to
   * must be permitted. The dial-time check still runs on each request.
   */
  readonly resolvesPublicly: (host: string) => Effect.Effect<void, EgressError>
}

export const defaultEgressTimeoutMs = 10_000
export const defaultEgressMaxResponseBytes = 1024 * 1024

const platformResolve: Resolver = (host) => dns.promises.lookup(host, { all: true, verbatim: true })

/** Marks the refusal raised inside `lookup`, so the request's error can be told apart. */
class GuardRefusal extends Error {
  readonly code = "EGRESS_REFUSED"
}

const familyOf = (family: number | string): 4 | 6 => (family === 6 || family === "IPv6" ? 6 : 4)

/** The host part of a URL's hostname or a bare host: IP literal in canonical form, or a name. */
const hostOf = (host: string): Either.Either<string, EgressError> => {
  const literal = ipLiteral(host)
  if (literal !== undefined) return Either.right(literal.address)
  try {
    // a port (outside an IPv6 literal's brackets) is not part of a host
    if (host.replace(/^\[[^\]]*\]/, "").includes(":")) throw new Error("a port is not a host")
    const parsed = new URL(`http://${host}/`)
    if (parsed.host !== parsed.hostname || parsed.username !== "" || parsed.pathname !== "/") throw new Error("not a bare host")
    const hostname = parsed.hostname
    return Either.right(hostname.startsWith("[") ? hostname.slice(1, -1) : hostname)
  } catch {
    return Either.left(new EgressError({ reason: "invalid_url", detail: `not a host: ${JSON.stringify(host.slice(0, 100))}` }))
  }
}

const refusedLiteral = (address: string, allow: AllowList): EgressError | undefined => {
  const verdict = judgeAddress(address, allow)
  return verdict.permitted ? undefined : new EgressError({ reason: "refused", detail: `${address} is ${verdict.reason}` })
}

const dnsFailure = (host: string, error: unknown): EgressError => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  return ["ENOTFOUND", "ENODATA", "EAI_FAIL", "EAI_NONAME", "EAI_AGAIN", "ESERVFAIL"].includes(code) || code === ""
    ? new EgressError({ reason: "unresolvable", detail: `${host} does not resolve${code === "" ? "" : ` (${code})`}` })
    : new EgressError({ reason: "transport", detail: `resolving ${host}: ${code}` })
}

export const makeGuardedFetch = (options: GuardedFetchOptions = {}): GuardedFetchService => {
  const allow = options.allow ?? emptyAllowList
  const resolve = options.resolve ?? platformResolve
  const defaultTimeout = options.timeoutMs ?? defaultEgressTimeoutMs
  const maxBytes = options.maxResponseBytes ?? defaultEgressMaxResponseBytes

  /** The socket's resolver: only permitted addresses are handed to the connect. */
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    const wanted = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : undefined
    resolve(hostname).then(
      (answers) => {
        const permitted = answers.filter(
          (answer) => (wanted === undefined || familyOf(answer.family) === wanted) && judgeAddress(answer.address, allow).permitted
        )
        const first = permitted[0]
        if (first === undefined) {
          const seen = answers.map((answer) => answer.address).join(", ")
          const error = answers.length === 0 ? Object.assign(new Error(`${hostname} does not resolve`), { code: "ENOTFOUND" }) : new GuardRefusal(`${hostname} resolves only to refused addresses (${seen})`)
          return callback(error as NodeJS.ErrnoException, "", 0)
        }
        if (lookupOptions.all === true) {
          ;(callback as unknown as (e: null, all: ReadonlyArray<dns.LookupAddress>) => void)(
            null,
            permitted.map((answer) => ({ address: answer.address, family: familyOf(answer.family) }))
          )
        } else callback(null, first.address, familyOf(first.family))
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 0)
    )
  }

  // Kept-alive connections per client: a relay fan-out reuses them. Each new socket resolves and
  // is judged again.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, lookup }),
    "https:": new https.Agent({
      keepAlive: true,
      lookup,
      ...(options.ca === undefined ? {} : { ca: [...tls.rootCertificates, options.ca] })
    })
  } as const

  const request = (req: GuardedRequest): Effect.Effect<GuardedResponse, EgressError> =>
    Effect.suspend(() => {
      let url: URL
      try {
        url = new URL(req.url)
      } catch {
        return Effect.fail(new EgressError({ reason: "invalid_url", detail: "not a URL" }))
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        return Effect.fail(new EgressError({ reason: "invalid_url", detail: `scheme ${url.protocol} is not http or https` }))
      }
      const literal = ipLiteral(url.hostname)
      if (literal !== undefined) {
        const refusal = refusedLiteral(literal.address, allow)
        if (refusal !== undefined) return Effect.fail(refusal)
      }
      const timeoutMs = req.timeoutMs ?? defaultTimeout
      return Effect.async<GuardedResponse, EgressError>((resume) => {
        let settled = false
        const finish = (outcome: Effect.Effect<GuardedResponse, EgressError>) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          resume(outcome)
        }
        const client = url.protocol === "https:" ? https : http
        const outgoing = client.request(url, {
          method: req.method ?? "GET",
          headers: req.headers,
          agent: agents[url.protocol as "http:" | "https:"],
          lookup
        })
        const timer = setTimeout(() => {
          finish(Effect.fail(new EgressError({ reason: "timeout", detail: `no answer from ${url.host} within ${timeoutMs} ms` })))
          outgoing.destroy()
        }, timeoutMs)
        outgoing.on("error", (error: NodeJS.ErrnoException) => {
          if (error instanceof GuardRefusal) finish(Effect.fail(new EgressError({ reason: "refused", detail: error.message })))
          else if (error.code === "ENOTFOUND" || error.syscall === "getaddrinfo") finish(Effect.fail(dnsFailure(url.hostname, error)))
          else finish(Effect.fail(new EgressError({ reason: "transport", detail: `${url.host}: ${error.code ?? error.message}` })))
        })
        outgoing.on("response", (incoming) => {
          const chunks: Array<Buffer> = []
          let size = 0
          incoming.on("data", (chunk: Buffer) => {
            size += chunk.length
            if (size > maxBytes) {
              finish(Effect.fail(new EgressError({ reason: "too_large", detail: `answer from ${url.host} over ${maxBytes} bytes` })))
              outgoing.destroy()
              return
            }
            chunks.push(chunk)
          })
          incoming.on("error", () => finish(Effect.fail(new EgressError({ reason: "transport", detail: `${url.host}: answer cut off` }))))
          incoming.on("end", () =>
            finish(Effect.succeed({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: new Uint8Array(Buffer.concat(chunks)) }))
          )
        })
        outgoing.end(req.body === undefined ? undefined : Buffer.from(req.body))
        return Effect.sync(() => {
          settled = true
          clearTimeout(timer)
          outgoing.destroy()
        })
      })
    })

  const resolvesPublicly = (host: string): Effect.Effect<void, EgressError> =>
    Effect.gen(function* () {
      const bare = yield* hostOf(host)
      if (ipLiteral(bare) !== undefined) {
        const refusal = refusedLiteral(bare, allow)
        return refusal === undefined ? undefined : yield* Effect.fail(refusal)
      }
      const answers = yield* Effect.tryPromise({ try: () => resolve(bare), catch: (error) => dnsFailure(bare, error) })
      if (answers.length === 0) return yield* Effect.fail(dnsFailure(bare, undefined))
      for (const answer of answers) {
        const refusal = refusedLiteral(answer.address, allow)
        if (refusal !== undefined) return yield* Effect.fail(new EgressError({ reason: "refused", detail: `${bare} resolves to ${refusal.detail}` }))
      }
    })

  return { request, resolvesPublicly }
}

export class GuardedFetch extends Context.Tag("portico/GuardedFetch")<GuardedFetch, GuardedFetchService>() {
  /** The client with the operator's allow-list (`PORTICO_EGRESS_ALLOW_CIDRS`). */
  static readonly Live = Layer.effect(
    GuardedFetch,
    Effect.map(PorticoConfig, (settings) =>
      makeGuardedFetch({ allow: Either.getOrElse(parseCidrs(settings.egress.allowCidrs.join(",")), () => emptyAllowList) })
    )
  )
  /**
   * The client as a test gateway configures it: loopback (127.0.0.0/8, ::1) exempted, so tests
   * reach their stand-ins on 127.0.0.1; every other refusal stands.
   */
  static readonly Test = Layer.sync(GuardedFetch, () =>
    makeGuardedFetch({ allow: Either.getOrElse(parseCidrs("127.0.0.0/8,::1"), () => emptyAllowList) })
  )
}
