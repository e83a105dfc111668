/**
 * A node-local database lives on its home node; a request for it that reaches another gateway is
 * forwarded there over the cluster's private overlay through the internal client (its `sqlite*`
 * routes, coordination MAC), with the caller as this gateway resolved and authorized it. The home node's answer, success or
 * refusal, goes back to the client as it came; a home node that is not configured or does not
 * answer in time is the spec's 503 HOME_NODE_UNREACHABLE with Retry-After.
 */
import { Duration, Effect, Either, Schema } from "effect"
import { Code, SqlRefusals, type SqlCode } from "../../domain/Errors.js"
import { ForwardedPrincipal, forwardedPrincipal, type Principal, toPrincipal } from "../../domain/Principal.js"
import type { CoordinationService, PeerAnswer } from "../coordination/Coordination.js"
import { canonicalJson, writtenExactly } from "../coordination/CanonicalJson.js"
import { internalClient, internalPath, type InternalPayload } from "../coordination/InternalClient.js"
import { oncePerObject } from "../../domain/Memo.js"
import { refuse, type SqlRefused } from "./SqlRefused.js"

export { ForwardedPrincipal, toPrincipal }

/** The internal route of each forwarded operation. */
const FORWARD_ROUTES = { query: "sqliteQuery", delete: "sqliteDelete", backup: "sqliteBackup" } as const
type ForwardRoutes = typeof FORWARD_ROUTES
/** What operation `Op` carries besides the caller, as its internal endpoint's payload types it. */
export type ForwardPayload<Op extends keyof ForwardRoutes> = Omit<InternalPayload<ForwardRoutes[Op]>, "principal">

/** The caller, carried to the home node (the MAC vouches for it). */
const Envelope = Schema.parseJson(Schema.Struct({ error: Schema.String, code: Schema.String, hint: Schema.optional(Schema.String) }))
const decodeEnvelope = Schema.decodeUnknownOption(Envelope)
/** The home node answers with the same services, so its refusals are the SQL family's codes. */
const passable: ReadonlySet<string> = new Set(SqlRefusals)
const isSqlCode = (code: string): code is SqlCode => passable.has(code)

const unreachable = (home: string) =>
  refuse(Code.HOME_NODE_UNREACHABLE, `the database's home node (${home}) is not reachable from this gateway`, "retry shortly", 30)

/**
 * The home node's answer as this gateway gives it: its body text on 200 or 201, its refusal of the
 * SQL family as it came, anything else the retryable 503. `warn` gets a refusal of this gateway
 * itself (COORDINATION_REFUSED): a cluster misconfiguration (peer address, secret, clock) for the
 * operator's log, while the client hears the node is unreachable.
 */
const fromHome = (home: string, answer: PeerAnswer, warn: (message: string) => void): Either.Either<string, SqlRefused> => {
  if (answer.status === 200 || answer.status === 201) return Either.right(answer.text)
  const envelope = decodeEnvelope(answer.text)
  if (envelope._tag === "None") return Either.left(unreachable(home))
  if (envelope.value.code === Code.COORDINATION_REFUSED) {
    warn(`the home node ${home} refused this gateway's coordination call: ${envelope.value.error}`)
    return Either.left(unreachable(home))
  }
  const code = envelope.value.code
  // anything else (a 500, a code of another family) is not an answer about the database
  if (!isSqlCode(code)) return Either.left(unreachable(home))
  const retry = Number(answer.retryAfter)
  return Either.left(refuse(code, envelope.value.error, envelope.value.hint, Number.isFinite(retry) && retry > 0 ? retry : undefined))
}

/** Runs `op` on the home node and answers its body text on 200; its refusal otherwise. */
export const forwardToHome = <Op extends keyof ForwardRoutes>(
  coordination: CoordinationService,
  home: string,
  op: Op,
  caller: Principal,
  payload: ForwardPayload<Op>,
  timeoutMs: number
): Effect.Effect<string, SqlRefused> =>
  internalClient(coordination)
    // the spread of a payload generic in `Op` is not narrowed to the endpoint's type, though it is one
    .call(home, FORWARD_ROUTES[op], { ...payload, principal: forwardedPrincipal(caller) } as InternalPayload<ForwardRoutes[Op]>, Duration.millis(timeoutMs))
    .pipe(
      Effect.mapError(() => unreachable(home)),
      Effect.flatMap((answer) => {
        let warning: string | undefined
        const given = fromHome(home, answer, (message) => (warning = message))
        return warning === undefined ? given : Effect.zipRight(Effect.logWarning(warning), given)
      })
    )

/** A caller's canonical JSON as a forwarded call carries it, made once per principal object (an API key's is one per key row). */
const principalText = oncePerObject((caller: Principal) => canonicalJson(forwardedPrincipal(caller)))

/**
 * The forwarded query's payload in canonical JSON (what both ends MAC), written directly: its
 * members are in canonical order, and the arguments go through canonicalJson only when one of them
 * is a number JSON.stringify would not write exactly (past 2^53, infinite) or a bigint. Its parts
 * come decoded by the endpoint's schema at the front, so encoding them again would change nothing.
 */
export const forwardedQueryText = (caller: Principal, payload: ForwardPayload<"query">): string => {
  const plain = payload.params.every((p) => (typeof p === "number" ? writtenExactly(p) : typeof p !== "bigint"))
  const params = plain ? JSON.stringify(payload.params) : canonicalJson(payload.params)
  return `{"database_name":${JSON.stringify(payload.database_name)},"params":${params},"principal":${principalText(caller)},"query":${JSON.stringify(payload.query)}}`
}

const QUERY_PATH = internalPath("sqliteQuery")

/** `forwardToHome` of a query for a caller outside the Effect runtime (the fast lane): `done` gets the outcome once. */
export const forwardQueryNow = (
  coordination: CoordinationService,
  home: string,
  caller: Principal,
  payload: ForwardPayload<"query">,
  timeoutMs: number,
  warn: (message: string) => void,
  done: (outcome: Either.Either<string, SqlRefused>) => void
): void =>
  coordination.postNow(home, QUERY_PATH, forwardedQueryText(caller, payload), timeoutMs, (answer) =>
    done(Either.isLeft(answer) ? Either.left(unreachable(home)) : fromHome(home, answer.right, warn))
  )
