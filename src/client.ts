/**
 * The typed Portico client, made from the API definition itself (`HttpApiClient.make`): every
 * route is a method named as its endpoint (`client.cache.get`, `client.auth.whoami`), its input
 * and answer typed by the endpoint's schemas, its refusals typed by the errors the endpoint
 * declares (`BadRequest`, `Forbidden`, ... each carrying the wire `{error, code, hint?}`).
 *
 * This module imports only `effect`, `@effect/platform` and the API definition, so an
 * application can import it without the server.
 *
 * From Effect code, provide `PorticoClient.layer({ baseUrl, token })` and `yield* PorticoClient`.
 * From a promise, one line: `await Effect.runPromise(withPortico({ baseUrl, token }, (p) => p.auth.whoami()))`.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Context, Effect, Layer } from "effect"
import { PorticoApi } from "./api/Api.js"
import type { DeploymentType } from "./domain/DeploymentRules.js"
import { type DeploymentUploadForm, encodeDeploymentForm } from "./api/DeploymentUploadForm.js"

/** A namespace name, as the sign-in payloads take it: `NamespaceName.make("acme")` checks and brands it. */
export { NamespaceName } from "./domain/Names.js"

export interface ClientOptions {
  /** Where the gateway listens, as `http://127.0.0.1:6001`. */
  readonly baseUrl: string | URL
  /**
   * Sent as `Authorization: Bearer <token>` on every request: an API key (`portico_key_…`), a
   * JWT from `/v1/auth/token`, or a signed-in session's access token. Absent: no credential,
   * for the open routes (health, version, sign-in).
   */
  readonly token?: string | undefined
}

/** Sends the credential, when there is one, as `Authorization: Bearer <token>`. */
const withCredential =
  (options: ClientOptions) =>
  (client: HttpClient.HttpClient): HttpClient.HttpClient =>
    options.token === undefined ? client : HttpClient.mapRequest(client, HttpClientRequest.bearerToken(options.token))

/** The client `HttpApiClient.make` derives from `PorticoApi`, before the two streamed bodies are typed. */
const derive = (options: ClientOptions) =>
  HttpApiClient.make(PorticoApi, { baseUrl: options.baseUrl, transformClient: withCredential(options) })

type Derived = Effect.Effect.Success<ReturnType<typeof derive>>
type StorageMethods = Derived["storage"]
type SqlMethods = Derived["sql"]
type DeploymentMethods = Derived["deployments"]
type FunctionMethods = Derived["functions"]
type InvokeMethods = Derived["invoke"]
/** A derived method's call without `withResponse`: its answer alone, not paired with the response. */
type Plain<F> = F extends (...args: never) => Effect.Effect<infer A, infer E, infer R> ? Effect.Effect<Exclude<A, readonly [unknown, unknown]>, E, R> : never

/**
 * The client's type: the derived one without the node-to-node groups (`internal` and `pushRelay`:
 * only gateways call them, with the cluster's coordination MAC; `join`: a joining node's first
 * call, made by `portico serve --join`; `nodeStamp`: a node's own calls on its machine, stamped
 * with its key; `edge`: the TLS edge's calls on its machine, with the node's edge token; `webrtcEvents`: a
 * node's media server reporting its participants, with a MAC), and with the routes whose bodies
 * the server streams typed (their endpoints declare no payload schema, so the derived methods
 * would take none): `storage.upload`, `deployments.upload`/`update` and `functions.deploy` take
 * their multipart forms, `sql.import` the SQLite file's bytes, `invoke.*` the function's input.
 */
export type Client = Omit<Derived, "storage" | "sql" | "deployments" | "functions" | "invoke" | "internal" | "pushRelay" | "join" | "nodeStamp" | "edge" | "webrtcEvents"> & {
  readonly storage: Omit<StorageMethods, "upload"> & {
    /** `POST /v1/storage/upload`: a form with one file part (`form.append("file", blob, name)`). */
    readonly upload: (request: { readonly payload: FormData }) => Plain<StorageMethods["upload"]>
  }
  readonly sql: Omit<SqlMethods, "import"> & {
    /** `POST /v1/rqlite/import`: replaces the namespace's cluster database with this SQLite file. */
    readonly import: (request: { readonly payload: Uint8Array }) => Plain<SqlMethods["import"]>
  }
  readonly deployments: Omit<DeploymentMethods, "upload" | "update"> & {
    /**
     * `POST /v1/deployments/{type}/upload`: a form with the fields (`name`, `subdomain`,
     * `health_check`, `env` as JSON text, `skip_install`) first and the tar.gz last
     * (`form.append("archive", blob, "app.tar.gz")`), or a `DeploymentUploadForm` (fields and the
     * archive as a stream of known size: sent as it is read, never held whole).
     */
    readonly upload: (request: { readonly path: { readonly type: DeploymentType }; readonly payload: FormData | DeploymentUploadForm }) => Plain<DeploymentMethods["upload"]>
    /** `POST /v1/deployments/{type}/update`: the same form with `name`, `health_check`, `skip_install`, then `archive`. */
    readonly update: (request: { readonly path: { readonly type: DeploymentType }; readonly payload: FormData | DeploymentUploadForm }) => Plain<DeploymentMethods["update"]>
  }
  readonly functions: Omit<FunctionMethods, "deploy"> & {
    /** `POST /v1/functions`: a form with `name` and the settings first, the module last (`form.append("wasm", blob, "f.wasm")`). */
    readonly deploy: (request: { readonly payload: FormData }) => Plain<FunctionMethods["deploy"]>
  }
  readonly invoke: {
    /** `POST /v1/functions/{name}/invoke`: the input's bytes (or text) in, the function's answer out. */
    readonly invoke: (request: { readonly path: { readonly name: string }; readonly payload: Uint8Array | string }) => Plain<InvokeMethods["invoke"]>
    /** `POST /v1/invoke/{namespace}/{target}`: the same, naming the namespace (public functions need no credential). */
    readonly invokeIn: (request: { readonly path: { readonly namespace: string; readonly target: string }; readonly payload: Uint8Array | string }) => Plain<InvokeMethods["invokeIn"]>
    /**
     * `GET /v1/functions/{name}/ws` is a WebSocket: open it with a WebSocket client (the credential
     * as `Authorization`, or `?jwt=` from a browser). Called as a request it is 400 BAD_REQUEST.
     */
    readonly ws: InvokeMethods["ws"]
  }
}

/**
 * A client for one gateway and one credential. It needs an `HttpClient`: `FetchHttpClient.layer`
 * (what `PorticoClient.layer` and `withPortico` use), or any other, such as the undici one of
 * `@effect/platform-node`. To call with another credential (after a sign-in), make another client.
 */
export const makeClient = (options: ClientOptions): Effect.Effect<Client, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const derived = yield* derive(options)
    const http = withCredential(options)(yield* HttpClient.HttpClient)
    // The derived upload already sends a FormData payload as multipart: only its type changes.
    // The import's bytes are set on the request the derived endpoint builds, and its answer is
    // decoded by the endpoint's declared schemas like any other.
    const importFile = (request: { readonly payload: Uint8Array; readonly withResponse?: boolean }) =>
      HttpApiClient.endpoint(PorticoApi, {
        group: "sql",
        endpoint: "import",
        baseUrl: options.baseUrl,
        httpClient: HttpClient.mapRequest(http, HttpClientRequest.bodyUint8Array(request.payload, "application/octet-stream"))
      }).pipe(Effect.flatMap((send) => send({ withResponse: request.withResponse === true })))
    // A streamed deployment form is encoded here (DeploymentUploadForm.ts) and set on the request
    // the derived endpoint builds, with its exact length; a FormData goes through the derived method.
    const sendArchive =
      (endpoint: "upload" | "update") =>
      (request: { readonly path: { readonly type: DeploymentType }; readonly payload: FormData | DeploymentUploadForm; readonly withResponse?: boolean }) => {
        const withResponse = request.withResponse === true
        if (request.payload instanceof FormData) return derived.deployments[endpoint]({ path: request.path, payload: request.payload, withResponse } as never)
        const form = encodeDeploymentForm(request.payload)
        return HttpApiClient.endpoint(PorticoApi, {
          group: "deployments",
          endpoint,
          baseUrl: options.baseUrl,
          httpClient: HttpClient.mapRequest(http, HttpClientRequest.bodyStream(form.body, { contentType: form.contentType, contentLength: form.contentLength }))
        }).pipe(Effect.flatMap((send) => send({ path: request.path, withResponse })))
      }
    // A function's input is set on the request the derived endpoint builds, as the import's is.
    const sendInput =
      <E extends "invoke" | "invokeIn">(endpoint: E) =>
      (request: { readonly path: Record<string, string>; readonly payload: Uint8Array | string; readonly withResponse?: boolean }) => {
        const bytes = typeof request.payload === "string" ? new TextEncoder().encode(request.payload) : request.payload
        return HttpApiClient.endpoint(PorticoApi, {
          group: "invoke",
          endpoint,
          baseUrl: options.baseUrl,
          httpClient: HttpClient.mapRequest(http, HttpClientRequest.bodyUint8Array(bytes, "application/octet-stream"))
        }).pipe(Effect.flatMap((send) => send({ path: request.path, withResponse: request.withResponse === true } as never)))
      }
    const { internal: _nodeToNode, pushRelay: _relayFanOut, join: _joining, nodeStamp: _nodeOwn, edge: _edge, webrtcEvents: _mediaServer, ...forUsers } = derived
    return {
      ...forUsers,
      sql: { ...derived.sql, import: importFile },
      deployments: { ...derived.deployments, upload: sendArchive("upload"), update: sendArchive("update") },
      invoke: { invoke: sendInput("invoke"), invokeIn: sendInput("invokeIn"), ws: derived.invoke.ws }
    } as unknown as Client
  })

/** The client as an Effect service. */
export class PorticoClient extends Context.Tag("portico/PorticoClient")<PorticoClient, Client>() {
  /** The client over the platform's fetch. */
  static readonly layer = (options: ClientOptions): Layer.Layer<PorticoClient> =>
    Layer.effect(PorticoClient, makeClient(options)).pipe(Layer.provide(FetchHttpClient.layer))

  /** The client over the `HttpClient` the application provides. */
  static readonly layerWithoutHttpClient = (options: ClientOptions): Layer.Layer<PorticoClient, never, HttpClient.HttpClient> =>
    Layer.effect(PorticoClient, makeClient(options))
}

/**
 * Makes a fetch-based client and runs `use` with it: the whole call is one Effect with no
 * requirements, ready for `Effect.runPromise` (whose promise rejects with a FiberFailure carrying
 * the refusal; `Effect.either` or `Effect.runPromiseExit` give the refusal as a value).
 */
export const withPortico = <A, E>(
  options: ClientOptions,
  use: (client: Client) => Effect.Effect<A, E, never>
): Effect.Effect<A, E> => Effect.flatMap(makeClient(options), use).pipe(Effect.provide(FetchHttpClient.layer))
