/**
 * Reading a name's TXT records, for custom-domain verification (docs/deployments.md, "Custom
 * domains"). node's c-ares `Resolver` asks the servers of `PORTICO_DNS_SERVERS` (the system's
 * resolvers when unset) directly: not `dns.lookup`, which reads no TXT, and not a cache, so a
 * record the tenant just published is seen as soon as their server answers it.
 *
 * "The name has no such record" (NXDOMAIN, or no TXT data) is an answer: no records. Anything
 * else (a timeout, SERVFAIL, REFUSED, a server that cannot be reached, a malformed answer) says
 * nothing about the record and is `DnsUnavailable`, for the caller to answer as retryable.
 */
import { Data, Duration, Effect } from "effect"
import { Resolver } from "node:dns/promises"

export class DnsUnavailable extends Data.TaggedError("DnsUnavailable")<{ readonly detail: string }> {}

/** How long one lookup may take in all, retries included. */
export const TXT_LOOKUP_TIMEOUT = Duration.seconds(5)

/** c-ares per-try timeout and tries: two tries fit the whole lookup's 5 s. */
const TRY_TIMEOUT_MS = 2000
const TRIES = 2

/** The error codes that mean the name exists without TXT data, or does not exist. */
const NO_RECORD = new Set(["ENODATA", "ENOTFOUND"])

/**
 * The TXT records of `name`, each record's character-strings joined into one value. `servers`
 * are `ip`, `ip:port` or `[ipv6]:port`, in order; empty means the system's resolvers.
 */
export const lookupTxt = (
  servers: ReadonlyArray<string>,
  name: string,
  timeout: Duration.DurationInput = TXT_LOOKUP_TIMEOUT
): Effect.Effect<ReadonlyArray<string>, DnsUnavailable> =>
  Effect.async<ReadonlyArray<string>, DnsUnavailable>((resume) => {
    const resolver = new Resolver({ timeout: TRY_TIMEOUT_MS, tries: TRIES })
    if (servers.length > 0) resolver.setServers([...servers])
    resolver.resolveTxt(name).then(
      (records) => resume(Effect.succeed(records.map((chunks) => chunks.join("")))),
      (e: NodeJS.ErrnoException) => {
        const code = typeof e?.code === "string" ? e.code : "unknown"
        resume(NO_RECORD.has(code) ? Effect.succeed([]) : Effect.fail(new DnsUnavailable({ detail: `${code} asking for TXT ${name}` })))
      }
    )
    // interrupted (the overall timeout, a client gone): the queries in flight are dropped
    return Effect.sync(() => resolver.cancel())
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new DnsUnavailable({ detail: `no DNS answer for TXT ${name} within ${Duration.format(timeout)}` })
    })
  )
