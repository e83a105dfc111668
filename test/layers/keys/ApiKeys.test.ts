/**
 * ApiKeys.mint owns the minting rules: a principal cannot mint grants it does not hold nor an
 * admin key below admin, nor into another namespace; the operator's CLI is trusted. A minted key
 * and its audit row land together; a refused mint writes nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { KeptReads } from "../../../src/layers/registry/KeptReads.js"
import { type Grant, parseGrant, roleGrants } from "../../../src/domain/Grants.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { ApiKeys, type Minter, type MintOrder } from "../../../src/layers/keys/ApiKeys.js"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"
import { registryLayer } from "../../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const withKeys = <A, E>(use: Effect.Effect<A, E, ApiKeys | Audit>) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-keys-"))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const settings = testSettings(dir)
    const core = Layer.mergeAll(Sealer.Live, registryLayer(settings), KeptReads.Live).pipe(Layer.provideMerge(PorticoConfig.layer(settings)))
    const services = Layer.mergeAll(ApiKeys.Live, Audit.Live, Namespaces.Live.pipe(Layer.provide(ApiKeys.Live), Layer.provide(Audit.Live))).pipe(
      Layer.provideMerge(core)
    )
    return yield* Effect.gen(function* () {
      yield* Effect.flatMap(Namespaces, (ns) => ns.create("shop", undefined, "test"))
      return yield* use
    }).pipe(Effect.provide(services))
  })

const grants = (names: ReadonlyArray<string>): ReadonlyArray<Grant> =>
  names.flatMap((n) => {
    const g = parseGrant(n)
    return g === undefined ? [] : [g]
  })

const wallet = (role: "owner" | "admin" | "developer" | "user", namespace = "shop"): Minter => ({
  _tag: "Principal",
  principal: {
    namespace,
    subject: "0x" + "ab".repeat(20),
    method: "jwt",
    role,
    grants: grants(roleGrants[role]),
    keyId: undefined,
    sessionId: "ses_1",
    deviceId: undefined
  } satisfies Principal
})

const order = (patch: Partial<MintOrder>): MintOrder => ({
  namespace: "shop",
  role: "custom",
  scopes: ["cache"],
  label: "test",
  expiresInDays: undefined,
  ...patch
})

/** The namespace's key.create audit rows (the owner key of `create` is audited as namespace.create). */
const keyCreations = Effect.flatMap(Audit, (audit) =>
  Effect.map(audit.list("shop", { action: "key.create", principal: undefined, since: undefined }, { limit: 100, after: undefined }), (p) => p.items)
)
const keyCount = Effect.flatMap(ApiKeys, (keys) => Effect.map(keys.list("shop", { limit: 100, after: undefined }), (p) => p.items.length))

describe("ApiKeys.mint", () => {
  it.scoped("mints what the caller holds, with its audit row, and the key authenticates", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const minted = yield* keys.mint(wallet("developer"), order({ scopes: ["cache", "db:write"], expiresInDays: 2 }))
        expect(minted.record.scopes).toEqual(["cache", "db:write"])
        expect(minted.record.createdBy).toBe("0x" + "ab".repeat(20))
        expect(minted.record.expiresAt).toBe(minted.record.createdAt + 2 * 86_400_000)
        const found = yield* keys.authenticate(minted.apiKey)
        expect(Option.map(found, (r) => r.id)).toEqual(Option.some(minted.record.id))
        const audited = yield* keyCreations
        expect(audited.map((e) => [e.principal, e.target, e.detail])).toEqual([
          ["0x" + "ab".repeat(20), minted.record.id, { role: "custom", scopes: ["cache", "db:write"], label: "test" }]
        ])
      })
    )
  )

  it.scoped("refuses grants the caller does not hold, naming them, and writes nothing", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const before = yield* keyCount
        const refused = yield* Effect.either(keys.mint(wallet("developer"), order({ scopes: ["cache", "members-write", "admin"] })))
        expect(Either.isLeft(refused) && refused.left._tag === "MintRefused" ? [refused.left.rule, refused.left.grants] : refused).toEqual([
          "GrantsNotHeld",
          ["members-write", "admin"]
        ])
        // an end user holds the data plane only: even the runtime profile's push:write is beyond it
        const user = yield* Effect.either(keys.mint(wallet("user"), order({ scopes: ["push:write"] })))
        expect(Either.isLeft(user) && user.left._tag === "MintRefused" ? user.left.grants : user).toEqual(["push:write"])
        // a narrowed grant needs the unrestricted one: a caller holding only cache:key=a/* holds no cache
        const narrowed: Minter = {
          _tag: "Principal",
          principal: { ...(wallet("user") as { principal: Principal }).principal, grants: grants(["cache:key=a/*"]) }
        }
        const narrow = yield* Effect.either(keys.mint(narrowed, order({ scopes: ["cache:key=a/*"] })))
        expect(Either.isLeft(narrow) && narrow.left._tag === "MintRefused" ? narrow.left.rule : narrow).toBe("GrantsNotHeld")
        expect(yield* keyCount).toBe(before)
        expect(yield* keyCreations).toEqual([])
      })
    )
  )

  it.scoped("an admin key needs an owner or admin, even when the grants would pass", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const developer: Minter = {
          _tag: "Principal",
          principal: { ...(wallet("developer") as { principal: Principal }).principal, grants: grants(roleGrants.admin) }
        }
        const refused = yield* Effect.either(keys.mint(developer, order({ role: "admin", scopes: roleGrants.admin })))
        expect(Either.isLeft(refused) && refused.left._tag === "MintRefused" ? refused.left.rule : refused).toBe("AdminKeyNeedsAdmin")
        const minted = yield* keys.mint(wallet("admin"), order({ role: "admin", scopes: roleGrants.admin }))
        expect(minted.record.role).toBe("admin")
      })
    )
  )

  it.scoped("a principal mints only in its own namespace", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const refused = yield* Effect.either(keys.mint(wallet("owner", "other"), order({})))
        expect(Either.isLeft(refused) && refused.left._tag === "MintRefused" ? refused.left.rule : refused).toBe("OtherNamespace")
        expect(yield* keyCreations).toEqual([])
      })
    )
  )

  it.scoped("the operator's CLI is trusted: any grant, any role, audited as its actor", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const minted = yield* keys.mint({ _tag: "Operator", actor: "cli" }, order({ role: "admin", scopes: roleGrants.admin }))
        expect(minted.record.createdBy).toBe("cli")
        const audited = yield* keyCreations
        expect(audited.map((e) => [e.principal, e.detail])).toEqual([["cli", { role: "admin", scopes: roleGrants.admin, label: "test" }]])
      })
    )
  )

  it.scoped("a sign-in key is audited with its origin", () =>
    withKeys(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        yield* keys.mint(wallet("user"), order({ scopes: ["cache", "storage"], origin: "sign-in" }))
        const audited = yield* keyCreations
        expect(audited.map((e) => e.detail)).toEqual([{ origin: "sign-in", scopes: ["cache", "storage"], label: "test" }])
      })
    )
  )
})
