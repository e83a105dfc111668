/**
 * NamespaceCreation over a real registry file: the setting and the allowlist decide who creates,
 * the per-wallet cap counts owned namespaces, a name whose deletion is recorded answers 409
 * NAMESPACE_TEARDOWN_PENDING with a Retry-After (NamespaceTeardown.pending, N2's source of truth),
 * and a registry that refuses the write answers NAMESPACE_PROVISION_FAILED with its fixed message.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { KeptReads } from "../../../src/layers/registry/KeptReads.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { ApiKeys } from "../../../src/layers/keys/ApiKeys.js"
import { NamespaceCreation } from "../../../src/layers/namespaces/NamespaceCreation.js"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"
import { NamespaceTeardown } from "../../../src/layers/namespaces/NamespaceTeardown.js"
import { OperatorAudit } from "../../../src/layers/operators/OperatorAudit.js"
import { Operators } from "../../../src/layers/operators/Operators.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const OP = "0x" + "a".repeat(40)
const ALICE = "0x" + "b".repeat(40)

const withCreation = <A, E>(use: Effect.Effect<A, E, NamespaceCreation | Operators | RegistryStore>) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-create-"))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const settings = testSettings(dir)
    const core = Layer.mergeAll(Sealer.Live, registryLayer(settings), KeptReads.Live).pipe(Layer.provideMerge(PorticoConfig.layer(settings)))
    const base = Layer.mergeAll(Audit.Live, OperatorAudit.Live, ApiKeys.Live).pipe(Layer.provideMerge(core))
    const services = Layer.mergeAll(Namespaces.Live, Operators.Live, NamespaceTeardown.Pending).pipe(Layer.provideMerge(base))
    return yield* use.pipe(Effect.provide(NamespaceCreation.Live.pipe(Layer.provideMerge(services))))
  })

const codeOf = <A>(outcome: Either.Either<A, { readonly code: string }>) => (Either.isLeft(outcome) ? outcome.left.code : "created")

describe("NamespaceCreation", () => {
  it.scoped("who may create, the cap, a pending deletion and a refused write", () =>
    withCreation(
      Effect.gen(function* () {
        const creation = yield* NamespaceCreation
        const ops = yield* Operators
        const store = yield* RegistryStore
        yield* ops.add(OP, "cli")

        expect(codeOf(yield* Effect.either(creation.create("shop", ALICE)))).toBe("FORBIDDEN")
        expect(codeOf(yield* Effect.either(creation.create("shop", OP)))).toBe("created")
        expect(codeOf(yield* Effect.either(creation.create("lobby", OP)))).toBe("VALIDATION_FAILED")
        expect(codeOf(yield* Effect.either(creation.create("shop", OP)))).toBe("NAMESPACE_EXISTS")

        yield* ops.set("namespace-creation", "allowlist", OP)
        expect(codeOf(yield* Effect.either(creation.create("alice", ALICE)))).toBe("FORBIDDEN")
        yield* ops.allowCreator(ALICE, OP)
        expect(codeOf(yield* Effect.either(creation.create("alice", ALICE)))).toBe("created")

        yield* ops.set("max-namespaces-per-wallet", "1", OP)
        expect(codeOf(yield* Effect.either(creation.create("alice-two", ALICE)))).toBe("FORBIDDEN")
        expect(yield* creation.belowCap(ALICE)).toBe(false)
        yield* ops.set("max-namespaces-per-wallet", "10", OP)

        // a deletion of the name recorded (N2's ledger row): 409 with Retry-After until it is done
        yield* store.exec({
          sql: "INSERT INTO portico_teardowns (namespace, actor, reason, started_at, runner, lease_until, next_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
          params: ["gone", OP, "", 0, "node", 0, 0]
        })
        const pending = yield* Effect.either(creation.create("gone", ALICE))
        expect(codeOf(pending)).toBe("NAMESPACE_TEARDOWN_PENDING")
        if (Either.isLeft(pending)) expect(pending.left.retryAfterSeconds).toBeGreaterThan(0)
        yield* store.exec({ sql: "DELETE FROM portico_teardowns WHERE namespace = ?", params: ["gone"] })
        expect(codeOf(yield* Effect.either(creation.create("gone", ALICE)))).toBe("created")

        // the registry refuses the write (a statement error): the fixed message, nothing half written
        yield* store.exec({ sql: "CREATE TRIGGER refuse_new BEFORE INSERT ON namespaces BEGIN INSERT INTO no_such_table VALUES (1); END" })
        const failed = yield* Effect.either(creation.create("broken", ALICE))
        expect(codeOf(failed)).toBe("NAMESPACE_PROVISION_FAILED")
        if (Either.isLeft(failed)) expect(failed.left.reason).toBe("the namespace could not be provisioned")
        const keys = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM api_keys WHERE namespace = 'broken'" })
        expect(Number(keys[0]!.n)).toBe(0)

        const listed = yield* creation.list(ALICE, false)
        expect(listed.map((n) => [n.name, n.role])).toEqual([["alice", "owner"], ["gone", "owner"]])
        expect((yield* creation.list(OP, true)).map((n) => n.name)).toEqual(["alice", "gone", "shop"])
      })
    )
  )
})
