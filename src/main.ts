/**
 * The `portico` command.
 *
 *   portico serve [--port N] [--host H] [--data-dir DIR]
 *   portico namespace create NAME [--owner WALLET]
 *   portico keys create --namespace NAME (--scopes a,b | --profile admin|runtime) [--label L] [--expires-in-days N]
 *
 * Commands that change the registry write to it directly, so they work whether or not a gateway
 * is running on the same data dir; a running gateway sees the change on its next lookup.
 */
import { Effect, Exit, Layer, Schema } from "effect"
import { GrantString, KeyProfile, profileGrants } from "./domain/Grants.js"
import { Label, NamespaceName, reservedNamespaces, Wallet } from "./domain/Names.js"
import { Audit } from "./layers/audit/Audit.js"
import { PorticoConfig } from "./layers/config/PorticoConfig.js"
import { ApiKeys } from "./layers/keys/ApiKeys.js"
import { Namespaces } from "./layers/namespaces/Namespaces.js"
import { RegistryStore } from "./layers/registry/RegistryStore.js"
import { servicesLayer } from "./layers/Services.js"

class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

const USAGE = `usage:
  portico serve [--port N] [--host H] [--data-dir DIR]
  portico namespace create NAME [--owner WALLET]
  portico keys create --namespace NAME (--scopes a,b | --profile admin|runtime) [--label L] [--expires-in-days N]`

interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly flags: ReadonlyMap<string, string>
}

const parseArgs = (argv: ReadonlyArray<string>): Effect.Effect<Parsed, UsageError> => {
  const positional: Array<string> = []
  const flags = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ""
    if (!arg.startsWith("--")) {
      positional.push(arg)
      continue
    }
    const eq = arg.indexOf("=")
    const name = eq > 0 ? arg.slice(2, eq) : arg.slice(2)
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i]
    if (value === undefined) return Effect.fail(new UsageError({ message: `--${name} needs a value` }))
    flags.set(name, value)
  }
  return Effect.succeed({ positional, flags })
}

const decode = <A, I>(schema: Schema.Schema<A, I>, value: unknown, what: string) =>
  Effect.mapError(Schema.decodeUnknown(schema)(value), (e) => new UsageError({ message: `${what}: ${e.message}` }))

const flagInt = (flags: ReadonlyMap<string, string>, name: string) => {
  const raw = flags.get(name)
  if (raw === undefined) return Effect.succeed(undefined)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 0 ? Effect.succeed(n) : Effect.fail(new UsageError({ message: `--${name} must be a whole number` }))
}

const print = (value: unknown) => Effect.sync(() => process.stdout.write(JSON.stringify(value) + "\n"))

const serve = (flags: ReadonlyMap<string, string>) =>
  Effect.gen(function* () {
    const port = yield* flagInt(flags, "port")
    const settings = yield* PorticoConfig.pipe(
      Effect.provide(
        PorticoConfig.fromEnv({
          ...(port === undefined ? {} : { port }),
          ...(flags.has("host") ? { host: flags.get("host") } : {}),
          ...(flags.has("data-dir") ? { dataDir: flags.get("data-dir") } : {})
        })
      )
    )
    // Loaded here so registry commands do not pay for the HTTP stack and the docs bundle.
    const { serveGateway } = yield* Effect.promise(() => import("./api/Gateway.js"))
    const { logLine } = yield* Effect.promise(() => import("./api/AccessLog.js"))
    const listening = yield* serveGateway(settings)
    logLine({
      level: "info",
      msg: "listening",
      port: listening.port,
      host: listening.host,
      registry: settings.registry.engine,
      url: `http://${listening.host}:${listening.port}`
    })
    // Serve until SIGINT/SIGTERM; closing the scope then drains in-flight requests.
    yield* Effect.async<void>((resume) => {
      const stop = () => resume(Effect.void)
      process.once("SIGINT", stop)
      process.once("SIGTERM", stop)
    })
    logLine({ level: "info", msg: "shutting down" })
  }).pipe(Effect.scoped)

/** Runs a registry command against the configured store, without starting a server. */
const withRegistry = <A, E>(
  flags: ReadonlyMap<string, string>,
  program: Effect.Effect<A, E, Namespaces | ApiKeys | Audit | RegistryStore>
) =>
  Effect.gen(function* () {
    const settings = yield* PorticoConfig.pipe(
      Effect.provide(PorticoConfig.fromEnv(flags.has("data-dir") ? { dataDir: flags.get("data-dir") } : {}))
    )
    return yield* program.pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
  })

const namespaceCreate = (parsed: Parsed) =>
  Effect.gen(function* () {
    const raw = parsed.positional[2]
    if (raw === undefined) return yield* new UsageError({ message: "namespace create needs a NAME" })
    const name = yield* decode(NamespaceName, raw, "namespace name")
    if (reservedNamespaces.has(name)) return yield* new UsageError({ message: `${name} is reserved` })
    const ownerRaw = parsed.flags.get("owner")
    const owner = ownerRaw === undefined ? undefined : yield* decode(Wallet, ownerRaw, "--owner")
    const created = yield* withRegistry(
      parsed.flags,
      Effect.flatMap(Namespaces, (ns) => ns.create(name, owner, "cli"))
    ).pipe(
      Effect.catchTag("NamespaceRuleError", () => Effect.fail(new UsageError({ message: `namespace ${name} exists` })))
    )
    yield* print({ namespace: name, api_key: created.ownerKey.apiKey, key_id: created.ownerKey.record.id, owner: owner ?? null })
  })

const keysCreate = (parsed: Parsed) =>
  Effect.gen(function* () {
    const namespace = parsed.flags.get("namespace")
    if (namespace === undefined) return yield* new UsageError({ message: "keys create needs --namespace" })
    const scopesFlag = parsed.flags.get("scopes")
    const profileFlag = parsed.flags.get("profile")
    if ((scopesFlag === undefined) === (profileFlag === undefined)) {
      return yield* new UsageError({ message: "give exactly one of --scopes or --profile" })
    }
    const scopes =
      scopesFlag !== undefined
        ? yield* decode(Schema.Array(GrantString), scopesFlag.split(",").map((s) => s.trim()).filter((s) => s !== ""), "--scopes")
        : profileGrants[yield* decode(KeyProfile, profileFlag, "--profile")]
    const role = profileFlag === undefined ? ("custom" as const) : yield* decode(KeyProfile, profileFlag, "--profile")
    const days = yield* flagInt(parsed.flags, "expires-in-days")
    const label = yield* decode(Label, parsed.flags.get("label") ?? "", "--label")
    const minted = yield* withRegistry(
      parsed.flags,
      Effect.gen(function* () {
        const namespaces = yield* Namespaces
        const keys = yield* ApiKeys
        const audit = yield* Audit
        const store = yield* RegistryStore
        const exists = yield* namespaces.get(namespace)
        if (exists._tag === "None") return yield* new UsageError({ message: `no namespace ${namespace}` })
        const minted = yield* keys.prepare({
          namespace,
          role,
          scopes,
          label,
          expiresAt: days === undefined ? undefined : Date.now() + days * 86_400_000,
          createdBy: "cli"
        })
        const entry = yield* audit.entry(namespace, "key.create", "cli", minted.record.id, { role, scopes, label })
        yield* store.batch([minted.statement, entry])
        return minted
      })
    )
    yield* print({
      id: minted.record.id,
      api_key: minted.apiKey,
      namespace,
      label,
      role,
      scopes: minted.record.scopes,
      expires_at: minted.record.expiresAt === undefined ? null : Math.floor(minted.record.expiresAt / 1000)
    })
  })

const program = Effect.gen(function* () {
  const parsed = yield* parseArgs(process.argv.slice(2))
  const [command, sub] = parsed.positional
  if (command === "serve") return yield* serve(parsed.flags)
  if (command === "namespace" && sub === "create") return yield* namespaceCreate(parsed)
  if (command === "keys" && sub === "create") return yield* keysCreate(parsed)
  return yield* new UsageError({ message: command === undefined ? "no command" : `unknown command ${parsed.positional.join(" ")}` })
})

Effect.runPromiseExit(program).then((exit) => {
  if (Exit.isSuccess(exit)) return process.exit(0)
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (failure instanceof UsageError) {
    process.stderr.write(`portico: ${failure.message}\n${USAGE}\n`)
    return process.exit(2)
  }
  // Our typed errors carry the reason in `detail` (a store that cannot open, a Redis with no
  // eviction policy); an Error's default message says only "An error has occurred".
  const tag = typeof failure === "object" && failure !== null && "_tag" in failure ? String(failure._tag) : undefined
  const detail = typeof failure === "object" && failure !== null && "detail" in failure ? String(failure.detail) : undefined
  process.stderr.write(detail !== undefined ? `portico: failed: ${tag ?? "error"}: ${detail}\n` : `portico: failed\n${String(exit.cause)}\n`)
  return process.exit(1)
})
