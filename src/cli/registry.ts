/**
 * Registry commands: `namespace create` and `keys create`. They write to the registry directly, so
 * they work whether or not a gateway is running on the same data dir; a running gateway sees the
 * change on its next lookup.
 */
import { Effect, Layer, ParseResult, Schema } from "effect"
import { GrantString, KeyLifetimeDays, KeyProfile, profileGrants } from "../domain/Grants.js"
import { Label, NamespaceName, reservedNamespaces, Wallet } from "../domain/Names.js"
import { Audit } from "../layers/audit/Audit.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { ApiKeys } from "../layers/keys/ApiKeys.js"
import { Namespaces } from "../layers/namespaces/Namespaces.js"
import { NamespaceTeardown } from "../layers/namespaces/NamespaceTeardown.js"
import { RegistryStore } from "../layers/registry/RegistryStore.js"
import { servicesLayer } from "../layers/Services.js"
import { type Parsed, printResult, stringOption, wholeNumberOption } from "./Cli.js"
import { runCommand, UsageError } from "./failure.js"

/** Decodes with a Schema; a refusal becomes one line naming the argument and the rule broken. */
const decode = <A, I>(schema: Schema.Schema<A, I>, value: unknown, what: string) =>
  Effect.mapError(Schema.decodeUnknown(schema)(value), (error) => {
    const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    return new UsageError({ message: `${what}: ${first?.message ?? "not accepted"}` })
  })

const decodeOwner = (raw: string) =>
  /^0x[0-9a-fA-F]{40}$/.test(raw)
    ? decode(Wallet, raw, "--owner")
    : Effect.fail(new UsageError({ message: "--owner must be a 0x-prefixed 40-hex wallet address" }))

/** Runs a registry program against the configured store, without starting a server. */
const withRegistry = <A, E>(parsed: Parsed, program: Effect.Effect<A, E, Namespaces | ApiKeys | Audit | RegistryStore>) =>
  Effect.gen(function* () {
    const dataDir = stringOption(parsed, "data-dir")
    const settings = yield* PorticoConfig.pipe(Effect.provide(PorticoConfig.fromEnv(dataDir === undefined ? {} : { dataDir })))
    return yield* program.pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
  })

export const namespaceCreate = (parsed: Parsed): Promise<void> =>
  runCommand(
    Effect.gen(function* () {
      const raw = parsed.positionals[0]
      if (raw === undefined) return yield* new UsageError({ message: "namespace create needs a NAME" })
      const name = yield* decode(NamespaceName, raw, "namespace name")
      if (reservedNamespaces.has(name)) return yield* new UsageError({ message: `${name} is reserved` })
      const ownerRaw = stringOption(parsed, "owner")
      const owner = ownerRaw === undefined ? undefined : yield* decodeOwner(ownerRaw)
      const created = yield* withRegistry(
        parsed,
        Effect.gen(function* () {
          // a deletion of the name still running or owed keeps it taken (docs/namespaces.md)
          const deleting = yield* Effect.flatMap(NamespaceTeardown, (t) => t.pending(name)).pipe(Effect.provide(NamespaceTeardown.Pending))
          if (deleting) {
            return yield* new UsageError({
              message: `NAMESPACE_TEARDOWN_PENDING: a deletion of namespace ${name} is still running or owed; retry once it has finished`
            })
          }
          return yield* Effect.flatMap(Namespaces, (ns) => ns.create(name, owner, "cli"))
        })
      ).pipe(Effect.catchTag("NamespaceRuleError", () => Effect.fail(new UsageError({ message: `namespace ${name} exists` }))))
      printResult(parsed, { namespace: name, api_key: created.ownerKey.apiKey, key_id: created.ownerKey.record.id, owner: owner ?? null })
    })
  )

export const keysCreate = (parsed: Parsed): Promise<void> =>
  runCommand(
    Effect.gen(function* () {
      const namespace = stringOption(parsed, "namespace")
      if (namespace === undefined) return yield* new UsageError({ message: "keys create needs --namespace" })
      const scopesFlag = stringOption(parsed, "scopes")
      const profileFlag = stringOption(parsed, "profile")
      if ((scopesFlag === undefined) === (profileFlag === undefined)) {
        return yield* new UsageError({ message: "give exactly one of --scopes or --profile" })
      }
      const profile =
        profileFlag === undefined
          ? undefined
          : yield* Effect.mapError(
              Schema.decodeUnknown(KeyProfile)(profileFlag),
              () => new UsageError({ message: `--profile must be one of ${KeyProfile.literals.join(", ")}` })
            )
      const scopes =
        profile === undefined
          ? yield* decode(Schema.Array(GrantString), (scopesFlag ?? "").split(",").map((s) => s.trim()).filter((s) => s !== ""), "--scopes")
          : profileGrants[profile]
      const role = profile ?? ("custom" as const)
      const digits = yield* Effect.try({
        try: () => wholeNumberOption(parsed, "expires-in-days"),
        catch: (e) => new UsageError({ message: e instanceof Error ? e.message : "--expires-in-days must be a whole number" })
      })
      // the route's rule (1-3650): 0 would mint a key already expired
      const days = digits === undefined ? undefined : yield* decode(KeyLifetimeDays, digits, "--expires-in-days")
      const label = yield* decode(Label, stringOption(parsed, "label") ?? "", "--label")
      const minted = yield* withRegistry(
        parsed,
        Effect.gen(function* () {
          const exists = yield* Effect.flatMap(Namespaces, (namespaces) => namespaces.get(namespace))
          if (exists._tag === "None") return yield* new UsageError({ message: `no namespace ${namespace}` })
          // the operator's CLI is a trusted minter: mint never refuses it
          const keys = yield* ApiKeys
          return yield* keys
            .mint({ _tag: "Operator", actor: "cli" }, { namespace, role, scopes, label, expiresInDays: days })
            .pipe(Effect.catchTag("MintRefused", Effect.die))
        })
      )
      printResult(parsed, {
        id: minted.record.id,
        api_key: minted.apiKey,
        namespace,
        label,
        role,
        scopes: minted.record.scopes,
        expires_at: minted.record.expiresAt === undefined ? null : Math.floor(minted.record.expiresAt / 1000)
      })
    })
  )
