/**
 * The typed client (src/client.ts) as the e2e suites drive it: every call goes through the
 * client's own request building and answer decoding, and, on top of that, its raw answer is
 * decoded once more with the endpoint's declared success schema for the answer's status, with
 * excess members an error. The client alone ignores an undeclared member; here it fails the test.
 */
import { FetchHttpClient, HttpApi, HttpApiSchema, HttpClient, type HttpClientResponse } from "@effect/platform"
import { Effect, Either, Layer, Option, ParseResult, Schema } from "effect"
import { expect } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { type Client, makeClient, NamespaceName } from "../../src/client.js"
import type { Gateway } from "./gateway.js"

interface Declared {
  readonly successes: ReadonlyMap<number, Schema.Schema<unknown, unknown, never> | undefined>
  readonly json: ReadonlySet<number>
}

/** Every endpoint's declared successes, by "group.endpoint". */
const declared = new Map<string, Declared>()
/** The endpoints of each group, as "group.endpoint". */
const endpointsByGroup = new Map<string, Array<string>>()
HttpApi.reflect(PorticoApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, group, successes }) => {
    const schemas = new Map<number, Schema.Schema<unknown, unknown, never> | undefined>()
    const json = new Set<number>()
    successes.forEach(({ ast }, status) => {
      schemas.set(status, Option.isSome(ast) ? (Schema.make(ast.value) as Schema.Schema<unknown, unknown, never>) : undefined)
      if (Option.isSome(ast) && HttpApiSchema.getEncoding(ast.value).kind === "Json") json.add(status)
    })
    declared.set(`${group.identifier}.${endpoint.name}`, { successes: schemas, json })
    endpointsByGroup.set(group.identifier, [...(endpointsByGroup.get(group.identifier) ?? []), `${group.identifier}.${endpoint.name}`])
  }
})

/** Endpoints called through a checked client in this process, by "group.endpoint". */
const called = new Set<string>()

/** The endpoints of `groups` that no checked client in this process has called yet. */
export const notCalled = (groups: ReadonlyArray<string>): Array<string> =>
  groups.flatMap((group) => {
    const endpoints = endpointsByGroup.get(group)
    if (endpoints === undefined) throw new Error(`no group ${group}`)
    return endpoints.filter((key) => !called.has(key))
  })

export const strictDecode = (key: string, response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function* () {
    const entry = declared.get(key)
    if (entry === undefined) return yield* Effect.die(new Error(`no endpoint ${key}`))
    if (!entry.successes.has(response.status)) {
      return yield* Effect.die(new Error(`${key} answered ${response.status}, which it does not declare`))
    }
    const schema = entry.successes.get(response.status)
    if (schema === undefined || !entry.json.has(response.status)) return
    const text = new TextDecoder().decode(yield* response.arrayBuffer)
    const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(JSON.parse(text))
    if (Either.isLeft(decoded)) {
      return yield* Effect.die(
        new Error(`${key}: the answer does not match its declared schema exactly:\n${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}\n${text}`)
      )
    }
  })

type Method = (request?: Record<string, unknown>) => Effect.Effect<unknown, unknown>

/** The client with every method checked as the module comment says. */
const checked = (client: Client): Client => {
  const groups: Record<string, Record<string, Method>> = {}
  for (const [group, methods] of Object.entries(client as unknown as Record<string, Record<string, Method>>)) {
    groups[group] = {}
    for (const [name, method] of Object.entries(methods)) {
      const key = `${group}.${name}`
      groups[group][name] = (request) => {
        called.add(key)
        return method({ ...request, withResponse: true }).pipe(
          Effect.flatMap((answer) => {
            const [value, response] = answer as [unknown, HttpClientResponse.HttpClientResponse]
            return strictDecode(key, response).pipe(Effect.as(request?.["withResponse"] === true ? answer : value))
          })
        )
      }
    }
  }
  return groups as unknown as Client
}

/** A checked client over fetch that tells `seen` the status of each answer it receives. */
const clientFor = (gw: Gateway, token: string | undefined, seen: (status: number) => void) =>
  makeClient({ baseUrl: gw.url, token }).pipe(
    Effect.map(checked),
    Effect.provide(
      Layer.effect(
        HttpClient.HttpClient,
        Effect.map(HttpClient.HttpClient, HttpClient.tap((response) => Effect.sync(() => seen(response.status))))
      ).pipe(Layer.provide(FetchHttpClient.layer))
    )
  )

/** Runs `use` with a checked client for `gw` and `token`, as a promise of its answer. */
export const call = <A, E>(gw: Gateway, token: string | undefined, use: (client: Client) => Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(Effect.flatMap(clientFor(gw, token, () => {}), use))

export interface Refusal<E> {
  /** The refusal as the client decoded it. */
  readonly error: E
  /** The status of the answer that carried it. */
  readonly status: number
}

/** Runs `use` expecting it to fail; answers the failure and the status of the last answer. */
export const refusal = async <A, E>(gw: Gateway, token: string | undefined, use: (client: Client) => Effect.Effect<A, E>): Promise<Refusal<E>> => {
  let status = 0
  const error = await Effect.runPromise(Effect.flip(Effect.flatMap(clientFor(gw, token, (s) => (status = s)), use)))
  return { error, status }
}

/** Failures that are not the server's declared refusal: the request or the answer's decoding failed. */
const CLIENT_FAILURES = ["RequestError", "ResponseError", "ParseError"]

/**
 * A refusal decoded as a declared error: the status, the wire code, a message for a human, and
 * none of the client's own failures (an undeclared status is a ResponseError, a body that does
 * not match is a ParseError).
 */
export const expectRefusal = (refused: Refusal<unknown>, status: number, code: string) => {
  const error = refused.error as { readonly _tag?: string; readonly code?: unknown; readonly error?: unknown }
  expect(CLIENT_FAILURES, String(error)).not.toContain(error._tag)
  expect(refused.status, String(error)).toBe(status)
  expect(error.code).toBe(code)
  expect(typeof error.error).toBe("string")
}

/** A wallet that signs EIP-191 messages (an ethers Wallet). */
export interface Signer {
  readonly address: string
  readonly signMessage: (message: string) => Promise<string>
}

/** Signs `wallet` in to `namespace` through the client (challenge, EIP-191 signature, verify); the session's answer. */
export const signIn = async (gw: Gateway, namespace: string, wallet: Signer) => {
  const challenge = await call(gw, undefined, (c) => c.auth.challenge({ payload: { wallet: wallet.address, namespace: NamespaceName.make(namespace) } }))
  const signature = await wallet.signMessage(challenge.message)
  const session = await call(gw, undefined, (c) => c.auth.verify({ payload: { message: challenge.message, signature } }))
  if (!("access_token" in session)) throw new Error(`sign-in is pending approval: ${JSON.stringify(session)}`)
  return session
}

/** An operator's access token: `wallet` signed in with no namespace (an operator's sign-in, docs/operators.md). */
export const operatorToken = async (gw: Pick<Gateway, "request">, wallet: Signer): Promise<string> => {
  const challenged = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address } })
  const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await wallet.signMessage(challenged.body.message) } })
  if (typeof verified.body?.access_token !== "string") throw new Error(`operator sign-in refused: ${verified.text}`)
  return verified.body.access_token
}
