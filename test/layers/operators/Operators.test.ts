/**
 * Removing an operator (docs/operators.md, "Removing an operator"): over the registry's SQLite
 * file, with and without wallets PORTICO_OPERATORS names.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { OperatorAudit } from "../../../src/layers/operators/OperatorAudit.js"
import { Operators } from "../../../src/layers/operators/Operators.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"

const a = "0x" + "a".repeat(40)
const b = "0x" + "b".repeat(40)
const c = "0x" + "c".repeat(40)

const operatorsWith = (bootstrap: ReadonlyArray<string>) =>
  Operators.Live.pipe(
    Layer.provideMerge(OperatorAudit.Live),
    Layer.provideMerge(SqliteRegistryStore.Test),
    Layer.provide(PorticoConfig.layer(testSettings("/nonexistent", { operators: bootstrap })))
  )

const codeOf = (e: unknown) => (typeof e === "object" && e !== null && "code" in e ? e.code : e)

describe("Operators.remove", () => {
  it.scoped("takes a listed wallet off, audited; unknown is no change; the last operator stays", () =>
    Effect.gen(function* () {
      const ops = yield* Operators
      yield* ops.add(a, "cli")
      yield* ops.add(b, a)
      expect(yield* ops.remove(b, a)).toBe(true)
      expect(yield* ops.isOperator(b)).toBe(false)
      expect(yield* ops.remove(c, a)).toBe(false)
      expect(codeOf(yield* Effect.flip(ops.remove(a, a)))).toBe("CONFLICT")
      expect(yield* ops.isOperator(a)).toBe(true)
      const audit = yield* (yield* OperatorAudit).list({ limit: 10, after: undefined })
      expect(audit.items.filter((e) => e.action === "operator.remove").map((e) => [e.actor, e.target])).toEqual([[a, b]])
    }).pipe(Effect.provide(operatorsWith([])))
  )

  it.scoped("refuses a PORTICO_OPERATORS wallet, and lets the last listed one go while one stays there", () =>
    Effect.gen(function* () {
      const ops = yield* Operators
      yield* ops.add(a, "cli")
      expect(codeOf(yield* Effect.flip(ops.remove(c, a)))).toBe("CONFLICT")
      expect(yield* ops.remove(a, c)).toBe(true)
      expect((yield* ops.list).map((o) => [o.wallet, o.source])).toEqual([[c, "config"]])
    }).pipe(Effect.provide(operatorsWith([c])))
  )
})
