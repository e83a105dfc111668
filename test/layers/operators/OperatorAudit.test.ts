/** The operator audit trail: rows written and read back newest first, paged, over the registry's SQLite file. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { OperatorAudit } from "../../../src/layers/operators/OperatorAudit.js"

describe("OperatorAudit", () => {
  it.scoped("records rows and lists them newest first, in pages", () =>
    Effect.gen(function* () {
      const audit = yield* OperatorAudit
      yield* audit.record({ actor: "cli", action: "operator.add", target: "0xabc" })
      yield* audit.record({ actor: "0xabc", action: "settings.set", target: "namespace-creation", detail: { value: "open", n: 3 } })
      yield* audit.record({ actor: "0xabc", action: "namespace.remove", target: "shop" })
      const first = yield* audit.list({ limit: 2, after: undefined })
      expect(first.items.map((e) => e.action)).toEqual(["namespace.remove", "settings.set"])
      expect(first.items[1]!.detail).toEqual({ value: "open", n: 3 })
      expect(first.next).toBeDefined()
      const second = yield* audit.list({ limit: 2, after: first.next })
      expect(second.items.map((e) => [e.actor, e.action, e.target])).toEqual([["cli", "operator.add", "0xabc"]])
      expect(second.next).toBeUndefined()
    }).pipe(Effect.provide(OperatorAudit.Test))
  )
})
