/**
 * `operator add`: the operator plane's bootstrap (docs/operators.md). It writes the registry
 * directly, so it works whether or not a gateway runs on the same data dir; the gateway reads the
 * list at each operator request. Everything after the first operator is done over HTTP.
 */
import { Effect, Layer, ParseResult, Schema } from "effect"
import { Wallet } from "../domain/Names.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { Operators } from "../layers/operators/Operators.js"
import { servicesLayer } from "../layers/Services.js"
import { type Parsed, printResult, stringOption } from "./Cli.js"
import { runCommand, UsageError } from "./failure.js"

export const operatorAdd = (parsed: Parsed): Promise<void> =>
  runCommand(
    Effect.gen(function* () {
      const raw = parsed.positionals[0]
      if (raw === undefined) return yield* new UsageError({ message: "operator add needs a WALLET" })
      if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) return yield* new UsageError({ message: "WALLET must be a 0x-prefixed 40-hex wallet address" })
      const wallet = yield* Effect.mapError(Schema.decodeUnknown(Wallet)(raw), (error) => {
        const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
        return new UsageError({ message: `WALLET: ${first?.message ?? "not accepted"}` })
      })
      const dataDir = stringOption(parsed, "data-dir")
      const settings = yield* PorticoConfig.pipe(Effect.provide(PorticoConfig.fromEnv(dataDir === undefined ? {} : { dataDir })))
      const added = yield* Effect.flatMap(Operators, (ops) => ops.add(wallet, "cli")).pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
      printResult(parsed, { wallet, added })
    })
  )
