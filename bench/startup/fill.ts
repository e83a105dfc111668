/**
 * Fills a data dir's registry for bench/startup, through the same services the CLI's `namespace
 * create` and `keys create` use (one process, so a hundred namespaces take seconds, not a hundred
 * CLI starts): NAMESPACES namespaces `startup-<i>`, each with its owner key and KEYS more keys
 * (every key and namespace writes its audit rows too). Prints the first namespace's owner key.
 *
 *   node --import tsx bench/startup/fill.ts <data dir> <namespaces> <keys per namespace>
 */
import { Effect, Layer } from "effect"
import type { NamespaceName } from "../../src/domain/Names.js"
import { PorticoConfig } from "../../src/layers/config/PorticoConfig.js"
import { ApiKeys } from "../../src/layers/keys/ApiKeys.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"
import { servicesLayer } from "../../src/layers/Services.js"

const [dataDir, namespaceCount, keyCount] = process.argv.slice(2)
if (dataDir === undefined) throw new Error("usage: fill.ts <data dir> <namespaces> <keys per namespace>")

const program = Effect.gen(function* () {
  const namespaces = yield* Namespaces
  const keys = yield* ApiKeys
  let first = ""
  for (let i = 0; i < Number(namespaceCount ?? 100); i++) {
    const name = `startup-${i}` as NamespaceName
    const created = yield* namespaces.create(name, undefined, "cli")
    if (i === 0) first = created.ownerKey.apiKey
    for (let k = 0; k < Number(keyCount ?? 12); k++) {
      yield* keys
        .mint({ _tag: "Operator", actor: "cli" }, { namespace: name, role: "custom", scopes: ["cache"], label: `key-${k}`, expiresInDays: undefined })
        .pipe(Effect.catchTag("MintRefused", Effect.die))
    }
  }
  return first
})

const main = Effect.gen(function* () {
  const settings = yield* PorticoConfig.pipe(Effect.provide(PorticoConfig.fromEnv({ dataDir })))
  return yield* program.pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
})

Effect.runPromise(main.pipe(Effect.scoped)).then(
  (key) => {
    process.stdout.write(`${key}\n`)
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
