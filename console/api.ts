/**
 * The console's one way to the gateway: the typed client (src/client.ts), made for the current
 * credential, and every refusal turned into the API's own `{error, code, hint}` for the page to say
 * in words. A failure that is not the gateway's refusal (the network, an answer the client could
 * not read) gets the same shape, with a code of the console's own saying which.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { Cursor, type KeyPart } from "../src/api/Paging.js"
import { type Client, makeClient } from "../src/client.js"

/** What the page shows for a failed call. */
export interface Refusal {
  readonly error: string
  readonly code: string
  readonly hint?: string | undefined
}

/** A failed call, thrown by `call`: carries the refusal. */
export class RefusedError extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.error)
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/** The refusal a failed call's error stands for. */
export const refusalOf = (failure: unknown): Refusal => {
  if (failure instanceof RefusedError) return failure.refusal
  if (isRecord(failure) && typeof failure["error"] === "string" && typeof failure["code"] === "string") {
    return { error: failure["error"], code: failure["code"], hint: typeof failure["hint"] === "string" ? failure["hint"] : undefined }
  }
  const tag = isRecord(failure) && typeof failure["_tag"] === "string" ? failure["_tag"] : undefined
  if (tag === "RequestError") return { error: "the gateway could not be reached", code: "NETWORK", hint: "check that it is running and try again" }
  if (tag === "ResponseError") {
    const status = isRecord(failure) && isRecord(failure["response"]) ? failure["response"]["status"] : undefined
    return { error: `the gateway answered ${String(status ?? "")} in a form the console does not know`, code: "UNEXPECTED_ANSWER" }
  }
  if (tag === "ParseError") return { error: String(isRecord(failure) ? failure["message"] : failure), code: "VALIDATION_FAILED", hint: "the console checked the request before sending it" }
  return { error: failure instanceof Error ? failure.message : String(failure), code: "CONSOLE_ERROR" }
}

const clients = new Map<string, Client>()
const clientFor = (token: string | undefined): Effect.Effect<Client> => {
  const key = token ?? ""
  const known = clients.get(key)
  if (known !== undefined) return Effect.succeed(known)
  return makeClient({ baseUrl: location.origin, token }).pipe(
    Effect.provide(FetchHttpClient.layer),
    Effect.tap((client) => Effect.sync(() => clients.set(key, client)))
  )
}

/** Forgets the clients made for a credential (on sign-out). */
export const forgetClients = () => clients.clear()

/**
 * Runs `use` with the client for `token`; rejects with a RefusedError. `init` is the fetch's own
 * options (`{cache: "no-store"}` for an answer the browser's cache must not give back).
 */
export const call = async <A, E>(token: string | undefined, use: (client: Client) => Effect.Effect<A, E>, init?: RequestInit): Promise<A> => {
  const run = Effect.flatMap(clientFor(token), use).pipe(Effect.provide(FetchHttpClient.layer))
  const exit = await Effect.runPromiseExit(init === undefined ? run : Effect.provideService(run, FetchHttpClient.RequestInit, init))
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  throw new RefusedError(refusalOf(Option.isSome(failure) ? failure.value : Cause.squash(exit.cause)))
}

/**
 * A list's `next_cursor` as the typed client takes it back: the client's `cursor` is the decoded
 * key (src/api/Paging.ts), which it encodes again to the very text the gateway sent.
 */
export const cursorOf = (parts: ReadonlyArray<KeyPart>, next: string | undefined) =>
  next === undefined ? undefined : Schema.decodeSync(Cursor(parts))(next)
