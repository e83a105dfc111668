/**
 * Functions' control plane (docs/functions.md): deploy a module as a new version, list, read,
 * change settings, roll back, delete, secrets and logs. Everything acts on the caller's own
 * namespace; the routes' policy (control plane, `secrets:write`) is bound where they are declared.
 *
 * A deploy is refused before anything is stored when the module is not one the runner could run:
 * malformed, importing what the gateway does not offer (named in the 400, never found at the
 * first call), with neither `_start` nor `ws_frame`, or needing more memory at start than its limit.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { unofferedImport } from "../../domain/FunctionHostCalls.js"
import { envProblem, FUNCTION_NAME, FUNCTION_NAME_RULE, MEMORY_MB, schedulesProblem, SECRET_MAX_BYTES, SECRETS_MAX, ENV_NAME, TIMEOUT_SECONDS, topicsProblem } from "../../domain/FunctionRules.js"
import type { FunctionCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { capMemory, inspectWasm, WASM_PAGE_BYTES, WasmInvalid } from "../../domain/WasmBinary.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import { Sealer } from "../secrets/Sealer.js"
import { ContentIndex } from "../storage/ContentIndex.js"
import { Storage } from "../storage/Storage.js"
import { FormRefused, formEvents } from "../storage/UploadForm.js"
import { FunctionRunner, moduleKey } from "./FunctionRunner.js"
import { FunctionStore, type FunctionRow, type LogRow, type VersionRow } from "./FunctionStore.js"

export type FunctionRefused = Refused<FunctionCode>

export interface FunctionView {
  readonly name: string
  readonly version: number
  readonly cid: string
  readonly size: number
  readonly memory_limit_mb: number
  readonly timeout_seconds: number
  readonly is_public: boolean
  readonly env_vars: Readonly<Record<string, string>>
  readonly cron_expressions: ReadonlyArray<string>
  readonly pubsub_topics: ReadonlyArray<string>
  readonly created_at: number
  readonly updated_at: number
}

export interface SettingsChange {
  readonly memory_limit_mb?: number | undefined
  readonly timeout_seconds?: number | undefined
  readonly is_public?: boolean | undefined
  readonly env_vars?: Readonly<Record<string, string>> | undefined
  readonly cron_expressions?: ReadonlyArray<string> | undefined
  readonly pubsub_topics?: ReadonlyArray<string> | undefined
}

export interface FunctionsService {
  readonly deploy: (caller: Principal, contentType: string, body: AsyncIterable<Uint8Array>) => Effect.Effect<FunctionView, FunctionRefused>
  readonly list: (caller: Principal, after: string | undefined, limit: number) => Effect.Effect<ReadonlyArray<FunctionView>, FunctionRefused>
  readonly get: (caller: Principal, name: string) => Effect.Effect<FunctionView, FunctionRefused>
  readonly change: (caller: Principal, name: string, change: SettingsChange) => Effect.Effect<FunctionView, FunctionRefused>
  readonly remove: (caller: Principal, name: string) => Effect.Effect<void, FunctionRefused>
  readonly versions: (caller: Principal, name: string) => Effect.Effect<ReadonlyArray<VersionRow>, FunctionRefused>
  readonly rollback: (caller: Principal, name: string, version: number) => Effect.Effect<FunctionView, FunctionRefused>
  readonly logs: (caller: Principal, name: string, limit: number, before: number | undefined) => Effect.Effect<ReadonlyArray<LogRow>, FunctionRefused>
  readonly secretNames: (caller: Principal, name: string) => Effect.Effect<ReadonlyArray<{ key: string; updated_at: number }>, FunctionRefused>
  readonly putSecret: (caller: Principal, name: string, key: string, value: string) => Effect.Effect<void, FunctionRefused>
  readonly deleteSecret: (caller: Principal, name: string, key: string) => Effect.Effect<void, FunctionRefused>
  /** A version's module bytes from content storage (503 when they cannot be read). */
  readonly readModule: (row: Pick<FunctionRow, "namespace" | "cid">) => Effect.Effect<Uint8Array, FunctionRefused>
  /** The environment of a function row, opened. */
  readonly envOf: (row: FunctionRow) => Effect.Effect<Readonly<Record<string, string>>, FunctionRefused>
}

export class Functions extends Context.Tag("portico/Functions")<Functions, FunctionsService>() {
  static readonly Live = Layer.suspend(() => Layer.effect(Functions, makeFunctions))
  /** Over the doubles of the registry rows, content storage, its index, the sealer and the settings. */
  static readonly Test = Layer.suspend(() =>
    Functions.Live.pipe(Layer.provide(Layer.mergeAll(FunctionStore.Test, FunctionRunner.Test, Storage.Test, ContentIndex.Test, Sealer.Test, PorticoConfig.Test)))
  )
}

const storeDown = () => refuse("UNAVAILABLE", "the registry did not answer", "retry shortly", 2)
const noFunction = (name: string) => refuse("NOT_FOUND", `no function named ${name}`, "GET /v1/functions lists this namespace's functions")
const invalid = (reason: string, hint?: string) => refuse("VALIDATION_FAILED", reason, hint)
const badModule = (reason: string, hint?: string) => refuse("BAD_REQUEST", reason, hint)

const FORM_LIMITS = { maxParts: 16, maxFieldSize: 256 * 1024 }
/** The deploy form's text fields (docs/functions.md); the module is the part named `wasm`. */
const FORM_FIELDS: ReadonlySet<string> = new Set(["name", "memory_limit_mb", "timeout_seconds", "is_public", "metadata"])
const METADATA_MEMBERS: ReadonlySet<string> = new Set(["env_vars", "cron_expressions", "pubsub_topics"])
const FORM_HINT = "send multipart/form-data: name, optional settings, and the module in a part named wasm"

interface DeployForm {
  readonly fields: Map<string, string>
  readonly wasm: Uint8Array | undefined
}

const parseBoolean = (text: string | undefined, field: string): Effect.Effect<boolean | undefined, FunctionRefused> =>
  text === undefined ? Effect.succeed(undefined) : text === "true" ? Effect.succeed(true) : text === "false" ? Effect.succeed(false) : Effect.fail(invalid(`${field} must be true or false`))

const parseInteger = (text: string | undefined, field: string, range: { min: number; max: number }) =>
  text === undefined
    ? Effect.succeed(undefined)
    : /^\d{1,6}$/.test(text) && Number(text) >= range.min && Number(text) <= range.max
      ? Effect.succeed(Number(text))
      : Effect.fail(invalid(`${field} must be an integer from ${range.min} to ${range.max}`))

const makeFunctions = Effect.gen(function* () {
    const store = yield* FunctionStore
    const storage = yield* Storage
    const index = yield* ContentIndex
    const sealer = yield* Sealer
    const runner = yield* FunctionRunner
    const settings = (yield* PorticoConfig).functions
    const db = <A>(effect: Effect.Effect<A, unknown>) => Effect.mapError(effect, storeDown)

    const sealEnv = (namespace: string, name: string, env: Readonly<Record<string, string>>) =>
      sealer.seal("function-env", `${namespace}/${name}`, new TextEncoder().encode(JSON.stringify(env)))
    const envOf = (row: FunctionRow) =>
      Effect.map(
        Effect.mapError(sealer.open("function-env", `${row.namespace}/${row.name}`, row.env_sealed), () =>
          refuse("UNAVAILABLE", "the function's environment could not be opened", "the gateway's root secret may differ from the one that sealed it")
        ),
        (bytes) => JSON.parse(new TextDecoder().decode(bytes)) as Record<string, string>
      )
    const view = (row: FunctionRow) =>
      Effect.map(envOf(row), (env): FunctionView => ({
        name: row.name,
        version: row.version,
        cid: row.cid,
        size: row.size,
        memory_limit_mb: row.memory_mb,
        timeout_seconds: row.timeout_ms / 1000,
        is_public: row.public === 1,
        env_vars: env,
        cron_expressions: row.schedules,
        pubsub_topics: row.topics,
        created_at: row.created_at,
        updated_at: row.updated_at
      }))
    const existing = (namespace: string, name: string) =>
      Effect.flatMap(db(store.get(namespace, name)), (row) => (row === undefined ? Effect.fail(noFunction(name)) : Effect.succeed(row)))
    const checkName = (name: string) => (FUNCTION_NAME.test(name) ? Effect.void : Effect.fail(invalid(`name: ${FUNCTION_NAME_RULE}`)))

    const readForm = (contentType: string, body: AsyncIterable<Uint8Array>) =>
      Effect.tryPromise({
        try: async (): Promise<DeployForm> => {
          const fields = new Map<string, string>()
          const chunks: Array<Uint8Array> = []
          let size = 0
          let inWasm = false
          let seen = false
          for await (const event of formEvents(contentType, body, FORM_LIMITS)) {
            if (event.kind === "field") {
              // a misspelt or repeated field is refused, never ignored or taken last-wins
              if (event.name === "wasm" || !FORM_FIELDS.has(event.name)) throw new FieldRefused(`${event.name}: is not a field of the deploy form`)
              if (fields.has(event.name)) throw new FieldRefused(`${event.name}: is given twice`)
              fields.set(event.name, event.value)
            } else if (event.kind === "file") {
              inWasm = event.name === "wasm"
              if (!inWasm) {
                throw new FieldRefused(
                  FORM_FIELDS.has(event.name)
                    ? `${event.name}: send it as a text field, not a file (curl: -F '${event.name}=<file' reads a file as text)`
                    : `${event.name}: is not a part of the deploy form; the module goes in a part named wasm`
                )
              }
              if (seen) throw new FormRefused("one wasm part only")
              seen ||= inWasm
            } else if (event.kind === "chunk" && inWasm) {
              size += event.bytes.length
              if (size > settings.maxModuleBytes) throw new TooLarge()
              chunks.push(event.bytes.slice())
            } else if (event.kind === "end-file") inWasm = false
          }
          return { fields, wasm: seen ? Buffer.concat(chunks) : undefined }
        },
        catch: (e) =>
          e instanceof TooLarge
            ? refuse("PAYLOAD_TOO_LARGE", `the module is over ${settings.maxModuleBytes} bytes`, "PORTICO_FUNCTIONS_MAX_MODULE_BYTES sets the cap")
            : e instanceof FieldRefused
              ? invalid(e.message, FORM_HINT)
              : badModule(e instanceof FormRefused ? e.reason : "the deploy form could not be read", FORM_HINT)
      })

    /** The module's problems for the runner, or none. */
    const checkModule = (wasm: Uint8Array, memoryMb: number) =>
      Effect.try({
        try: () => {
          const facts = inspectWasm(wasm)
          const missing = unofferedImport(facts.imports)
          if (missing !== undefined) {
            throw new WasmInvalid(`the module imports ${missing.module}.${missing.name} (${missing.kind}), which the gateway does not offer`)
          }
          // a command (`_start`) is invoked; a module with `ws_frame` serves sockets; one may do both
          if (!facts.exports.some((e) => (e.name === "_start" || e.name === "ws_frame") && e.kind === "function")) {
            throw new WasmInvalid(
              "the module exports neither _start nor ws_frame: build it as a WASI command (GOOS=wasip1 GOARCH=wasm go build), or export ws_frame for sockets"
            )
          }
          if (!facts.exports.some((e) => e.name === "memory" && e.kind === "memory")) throw new WasmInvalid("the module exports no memory")
          const capped = capMemory(wasm, memoryMb * ((1024 * 1024) / WASM_PAGE_BYTES))
          if (!WebAssembly.validate(capped)) throw new WasmInvalid("the module does not validate as WebAssembly")
        },
        catch: (e) =>
          badModule(e instanceof WasmInvalid ? e.reason : "the module could not be read", "docs/functions.md lists the host calls and how to build a function")
      })

    const release = (namespace: string, versions: ReadonlyArray<VersionRow>) =>
      Effect.forEach(versions, (v) => Effect.ignore(index.release({ namespace, cid: v.cid, kind: "function", ref: v.ref })), { discard: true })

    const addVersion = (
      namespace: string,
      name: string,
      wasm: Uint8Array,
      s: { memoryMb: number; timeoutMs: number; isPublic: boolean; env: Readonly<Record<string, string>>; schedules: ReadonlyArray<string>; topics: ReadonlyArray<string> }
    ) =>
      Effect.gen(function* () {
        const ref = randomUUID()
        const now = yield* Clock.currentTimeMillis
        const envSealed = sealEnv(namespace, name, s.env)
        yield* Effect.mapError(
          storage.store(namespace, "function", ref, `${name}.wasm`, one(wasm), (cid, size) =>
            store.addVersionStatements(namespace, name, cid, size, ref, { ...s, envSealed }, now)
          ),
          (e): FunctionRefused => (e.code === "BAD_REQUEST" ? badModule(e.reason) : e)
        )
        yield* Effect.flatMap(db(store.prune(namespace, name, settings.versionsKept)), (pruned) => release(namespace, pruned))
        const row = yield* existing(namespace, name)
        // this gateway holds the bytes now: its runner compiles them before the first call asks
        runner.warm(moduleKey(row.cid, row.memory_mb), capMemory(wasm, row.memory_mb * ((1024 * 1024) / WASM_PAGE_BYTES)))
        return yield* view(row)
      })

    /** A version's module bytes from content storage. */
    const readModule = (row: Pick<FunctionRow, "namespace" | "cid">) =>
      Effect.gen(function* () {
        const opened = yield* Effect.mapError(storage.open(row.namespace, row.cid), () =>
          refuse("UNAVAILABLE", "the function's module could not be read from content storage", "retry shortly", 5)
        )
        return yield* Effect.tryPromise({
          try: async () => {
            const chunks: Array<Uint8Array> = []
            for await (const chunk of storage.read(opened.cid, 0, opened.size)) chunks.push(chunk)
            return new Uint8Array(Buffer.concat(chunks))
          },
          catch: () => refuse("UNAVAILABLE", "the function's module could not be read from content storage", "retry shortly", 5)
        })
      })

    const service: FunctionsService = {
      envOf,
      readModule,
      deploy: (caller, contentType, body) =>
        Effect.gen(function* () {
          const form = yield* readForm(contentType, body)
          const name = form.fields.get("name") ?? ""
          yield* checkName(name)
          if (form.wasm === undefined) return yield* Effect.fail(badModule("the form has no wasm part", "send the module in a part named wasm"))
          const memory = yield* parseInteger(form.fields.get("memory_limit_mb"), "memory_limit_mb", MEMORY_MB)
          const timeout = yield* parseInteger(form.fields.get("timeout_seconds"), "timeout_seconds", TIMEOUT_SECONDS)
          const isPublic = yield* parseBoolean(form.fields.get("is_public"), "is_public")
          const metadata = yield* parseMetadata(form.fields.get("metadata"))
          const before = yield* db(store.get(caller.namespace, name))
          const previous = before === undefined ? undefined : yield* envOf(before)
          const chosen = {
            memoryMb: memory ?? before?.memory_mb ?? MEMORY_MB.default,
            timeoutMs: (timeout ?? (before === undefined ? TIMEOUT_SECONDS.default : before.timeout_ms / 1000)) * 1000,
            isPublic: isPublic ?? before?.public === 1,
            env: metadata.env ?? previous ?? {},
            // a redeploy that names no schedules keeps the function's (the original system's CLI deploy dropped them)
            schedules: metadata.schedules ?? before?.schedules ?? [],
            topics: metadata.topics ?? before?.topics ?? []
          }
          yield* checkModule(form.wasm, chosen.memoryMb)
          return yield* addVersion(caller.namespace, name, form.wasm, chosen)
        }),
      list: (caller, after, limit) =>
        Effect.flatMap(db(store.list(caller.namespace, after, limit)), (rows) => Effect.forEach(rows, view)),
      get: (caller, name) => Effect.flatMap(existing(caller.namespace, name), view),
      change: (caller, name, change) =>
        Effect.gen(function* () {
          const row = yield* existing(caller.namespace, name)
          if (change.env_vars !== undefined) {
            const problem = envProblem(change.env_vars)
            if (problem !== undefined) return yield* Effect.fail(invalid(`env_vars: ${problem}`))
          }
          if (change.cron_expressions !== undefined) {
            const problem = schedulesProblem(change.cron_expressions)
            if (problem !== undefined) return yield* Effect.fail(invalid(`cron_expressions: ${problem}`))
          }
          if (change.pubsub_topics !== undefined) {
            const problem = topicsProblem(change.pubsub_topics)
            if (problem !== undefined) return yield* Effect.fail(invalid(`pubsub_topics: ${problem}`))
          }
          const env = change.env_vars ?? (yield* envOf(row))
          const memoryMb = change.memory_limit_mb ?? row.memory_mb
          if (memoryMb !== row.memory_mb) {
            const bytes = yield* readModule(row)
            yield* checkModule(bytes, memoryMb)
          }
          const now = yield* Clock.currentTimeMillis
          const updated = yield* db(
            store.updateSettings(caller.namespace, name, {
              memoryMb,
              timeoutMs: change.timeout_seconds === undefined ? row.timeout_ms : change.timeout_seconds * 1000,
              isPublic: change.is_public ?? row.public === 1,
              envSealed: sealEnv(caller.namespace, name, env),
              schedules: change.cron_expressions === undefined ? row.schedules : [...new Set(change.cron_expressions)],
              topics: change.pubsub_topics === undefined ? row.topics : [...new Set(change.pubsub_topics)]
            }, now)
          )
          if (!updated) return yield* Effect.fail(noFunction(name))
          return yield* Effect.flatMap(existing(caller.namespace, name), view)
        }),
      remove: (caller, name) =>
        Effect.gen(function* () {
          yield* existing(caller.namespace, name)
          const versions = yield* db(store.remove(caller.namespace, name))
          yield* release(caller.namespace, versions)
        }),
      versions: (caller, name) => Effect.zipRight(existing(caller.namespace, name), db(store.versions(caller.namespace, name))),
      rollback: (caller, name, version) =>
        Effect.gen(function* () {
          const row = yield* existing(caller.namespace, name)
          const target = yield* db(store.version(caller.namespace, name, version))
          if (target === undefined) return yield* Effect.fail(refuse("NOT_FOUND", `${name} has no version ${version}`, `GET /v1/functions/${name}/versions lists the versions kept`))
          const bytes = yield* readModule({ namespace: row.namespace, cid: target.cid })
          return yield* addVersion(caller.namespace, name, bytes, {
            memoryMb: row.memory_mb,
            timeoutMs: row.timeout_ms,
            isPublic: row.public === 1,
            env: yield* envOf(row),
            schedules: row.schedules,
            topics: row.topics
          })
        }),
      logs: (caller, name, limit, before) => Effect.zipRight(existing(caller.namespace, name), db(store.logs(caller.namespace, name, limit, before))),
      secretNames: (caller, name) => Effect.zipRight(existing(caller.namespace, name), db(store.secretNames(caller.namespace, name))),
      putSecret: (caller, name, key, value) =>
        Effect.gen(function* () {
          yield* existing(caller.namespace, name)
          if (!ENV_NAME.test(key)) return yield* Effect.fail(invalid("a secret's name is letters, digits and _, not starting with a digit, at most 128"))
          if (new TextEncoder().encode(value).length > SECRET_MAX_BYTES) return yield* Effect.fail(invalid(`a secret is at most ${SECRET_MAX_BYTES} bytes`))
          const sealed = sealer.seal("function-secret", `${caller.namespace}/${name}/${key}`, new TextEncoder().encode(value))
          const now = yield* Clock.currentTimeMillis
          const written = yield* db(store.putSecret(caller.namespace, name, key, sealed, now, SECRETS_MAX))
          if (!written) return yield* Effect.fail(invalid(`a function has at most ${SECRETS_MAX} secrets`, "delete one first"))
        }),
      deleteSecret: (caller, name, key) =>
        Effect.gen(function* () {
          yield* existing(caller.namespace, name)
          const gone = yield* db(store.deleteSecret(caller.namespace, name, key))
          if (!gone) return yield* Effect.fail(refuse("NOT_FOUND", `${name} has no secret ${key}`))
        })
    }

    /** The deploy form's metadata: `env_vars`, `cron_expressions` and `pubsub_topics`, each absent when not given. */
    const parseMetadata = (metadata: string | undefined) =>
      Effect.gen(function* () {
        const none: { env?: Readonly<Record<string, string>>; schedules?: ReadonlyArray<string>; topics?: ReadonlyArray<string> } = {}
        if (metadata === undefined) return none
        let parsed: unknown
        try {
          parsed = JSON.parse(metadata)
        } catch {
          return yield* Effect.fail(invalid("metadata must be a JSON object"))
        }
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* Effect.fail(invalid("metadata must be a JSON object"))
        const fields = parsed as Record<string, unknown>
        const stray = Object.keys(fields).find((key) => !METADATA_MEMBERS.has(key))
        if (stray !== undefined) return yield* Effect.fail(invalid(`metadata.${stray}: is unexpected; metadata takes env_vars, cron_expressions and pubsub_topics`))
        const env = fields["env_vars"]
        if (env !== undefined) {
          if (typeof env !== "object" || env === null || Array.isArray(env)) return yield* Effect.fail(invalid("metadata.env_vars must be an object of strings"))
          const problem = envProblem(env as Record<string, unknown>)
          if (problem !== undefined) return yield* Effect.fail(invalid(`metadata.env_vars: ${problem}`))
        }
        const schedules = fields["cron_expressions"]
        if (schedules !== undefined) {
          if (!Array.isArray(schedules)) return yield* Effect.fail(invalid("metadata.cron_expressions must be an array of cron expressions"))
          const problem = schedulesProblem(schedules)
          if (problem !== undefined) return yield* Effect.fail(invalid(`metadata.cron_expressions: ${problem}`))
        }
        const topics = fields["pubsub_topics"]
        if (topics !== undefined) {
          if (!Array.isArray(topics)) return yield* Effect.fail(invalid("metadata.pubsub_topics must be an array of topics"))
          const problem = topicsProblem(topics)
          if (problem !== undefined) return yield* Effect.fail(invalid(`metadata.pubsub_topics: ${problem}`))
        }
        return {
          ...(env === undefined ? {} : { env: env as Record<string, string> }),
          ...(schedules === undefined ? {} : { schedules: [...new Set(schedules as Array<string>)] }),
          ...(topics === undefined ? {} : { topics: [...new Set(topics as Array<string>)] })
        }
      })

    return service
  })

class TooLarge extends Error {}
/** A form field or part the deploy form does not have, or one given twice. */
class FieldRefused extends Error {}

async function* one(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes
}

