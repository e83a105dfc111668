/**
 * The vault's rules over real guardians (each a SQLite share store in a directory of its own) with
 * the calls between nodes made in process: quorum and threshold, version conflicts, a retried push,
 * shares of two splits mixed under one version (the original system's silent garbage), not found
 * against unavailable, replayed and stale pulls, the limits. Through real gateways:
 * test/e2e/vault.test.ts (one node) and vault.cluster.test.ts (three).
 */
import { Effect, Either, Layer } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { Membership } from "../../../src/layers/cluster/Membership.js"
import { Coordination } from "../../../src/layers/coordination/Coordination.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"
import { defaultVaultSettings, type VaultSettings } from "../../../src/layers/config/VaultSettings.js"
import { type GetOutcome, type Guardian, makeGuardian, type PutOutcome } from "../../../src/layers/vault/Guardian.js"
import type { GuardianCalls } from "../../../src/layers/vault/GuardianCalls.js"
import { shareStore } from "../../../src/layers/vault/ShareStore.js"
import { makeVault, Vault, type VaultService } from "../../../src/layers/vault/Vault.js"
import { combine } from "../../../src/domain/Shamir.js"
import { newIdentity, pullBody, pushBody } from "../../support/vault.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "portico-vault-"))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

interface Fleet {
  readonly vault: VaultService
  readonly guardians: Map<string, Guardian>
  /** Nodes whose calls fail (a lost or hung node still counted a member). */
  readonly down: Set<string>
  /** Nodes the membership says are not live. */
  readonly inactive: Set<string>
  /** Each node's puts, intercepted: a test may replace one. */
  putHook?: (node: string, outcome: PutOutcome) => PutOutcome
}

let fleets = 0
const fleet = (nodes: ReadonlyArray<string>, vaultSettings: Partial<VaultSettings> = {}): Fleet => {
  const dir = path.join(root, `fleet-${++fleets}`)
  const guardians = new Map(nodes.map((node) => [node, makeGuardian(shareStore(path.join(dir, node)))]))
  const down = new Set<string>()
  const inactive = new Set<string>()
  const failed = { outcome: "failed" as const, reason: "unreachable" }
  const f: Fleet = { guardians, down, inactive } as Fleet
  const calls: GuardianCalls = {
    members: Effect.sync(() => ({ all: [...nodes].sort(), live: [...nodes].sort().filter((n) => !inactive.has(n)) })),
    put: (node, offer) =>
      Effect.sync(() => {
        if (down.has(node)) return failed
        const outcome = guardians.get(node)!.put(offer)
        return f.putHook === undefined ? outcome : f.putHook(node, outcome)
      }),
    get: (node, ask) => Effect.sync((): GetOutcome | typeof failed => (down.has(node) ? failed : guardians.get(node)!.get(ask))),
    count: (node, namespace) => Effect.sync(() => (down.has(node) ? null : guardians.get(node)!.count(namespace))),
    dropEverywhere: (namespace) => Effect.sync(() => void nodes.forEach((n) => guardians.get(n)!.drop(namespace)))
  }
  const settings = testSettings(dir, { vault: { ...defaultVaultSettings, ...vaultSettings } })
  ;(f as { vault: VaultService }).vault = makeVault({ settings, guardian: guardians.get(nodes[0]!)!, calls })
  return f
}

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))
const codeOf = <A>(answer: Either.Either<A, { code: string }>) => (Either.isLeft(answer) ? answer.left.code : "ok")
const bytes = (text: string) => new Uint8Array(Buffer.from(text))
const text = (answer: Either.Either<{ envelope: Uint8Array }, unknown>) => (Either.isRight(answer) ? Buffer.from(answer.right.envelope).toString() : undefined)

describe("the vault over three guardians", () => {
  it("splits 2-of-3, needs all three to push, gives the envelope back from any two", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    const pushed = await run(f.vault.push("ns", "127.0.0.1", pushBody(id, 1, bytes("the secret"))))
    expect(pushed).toEqual(Either.right({ mode: "shared", acks: 3, total: 3, quorum: 3, threshold: 2 }))
    // no single guardian holds the envelope: its share is not the bytes
    const held = f.guardians.get("a")!.get({ namespace: "ns", ...pullBody(id) })
    expect(held.outcome).toBe("found")
    expect(Buffer.from((held as { share: Uint8Array }).share).includes(Buffer.from("the secret"))).toBe(false)
    f.down.add("c")
    // two pulls signed for two different seconds: a second ticking between them must not make
    // the second pull the first one's signature again (each is honoured once)
    const second = Math.floor(Date.now() / 1000) - 10
    expect(text(await run(f.vault.pull("ns", "127.0.0.1", pullBody(id, second))))).toBe("the secret")
    // one node lost: no push stands (W = 3), and none is half written on the others
    const refused = await run(f.vault.push("ns", "127.0.0.1", pushBody(id, 2, bytes("newer"))))
    expect(codeOf(refused)).toBe("UNAVAILABLE")
    expect(Either.isLeft(refused) && refused.left.reason).toMatch(/stored on 2 of 3 nodes; a push needs 3; not on c: unreachable/)
    expect(Either.isLeft(refused) && refused.left.retryAfterSeconds).toBe(5)
    // two lost: a pull cannot be answered either
    f.down.add("b")
    expect(codeOf(await run(f.vault.pull("ns", "127.0.0.1", pullBody(id, second + 1))))).toBe("UNAVAILABLE")
  })

  it("refuses a push before any write when the membership lists too few live nodes", async () => {
    const f = fleet(["a", "b", "c"])
    f.inactive.add("b")
    const id = newIdentity()
    const refused = await run(f.vault.push("ns", undefined, pushBody(id, 1, bytes("x"))))
    expect(Either.isLeft(refused) && refused.left.reason).toMatch(/2 of the 3 nodes are live; a push needs 3/)
    for (const g of f.guardians.values()) expect(g.count("ns")).toBe(0)
    expect(await Effect.runPromise(f.vault.health)).toEqual({ status: "degraded", mode: "shared", guardians: 3, healthy: 2, threshold: 2, quorum: 3 })
  })

  it("keeps versions moving forward: an older one is a conflict, the same one again only with the same envelope", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 5, bytes("five")))))).toBe("ok")
    const older = await run(f.vault.push("ns", undefined, pushBody(id, 4, bytes("four"))))
    expect(codeOf(older)).toBe("CONFLICT")
    expect(Either.isLeft(older) && older.left.reason).toMatch(/version 4 is not newer than the version 5/)
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 5, bytes("other five")))))).toBe("CONFLICT")
    // a retried push (same version, same envelope) is idempotent: a new split replaces the old one
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 5, bytes("five")))))).toBe("ok")
    expect(text(await run(f.vault.pull("ns", undefined, pullBody(id))))).toBe("five")
  })

  it("never combines shares of two splits into garbage: the digest picks the shares that agree", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 1, bytes("one")))))).toBe("ok")
    // version 2 reaches a and b only (c hung): 503, yet a and b hold it
    f.down.add("c")
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 2, bytes("two")))))).toBe("UNAVAILABLE")
    // retried while a is hung: b and c take a second split of version 2; a keeps the first
    f.down.clear()
    f.down.add("a")
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 2, bytes("two")))))).toBe("UNAVAILABLE")
    f.down.clear()
    // a (first split) with b (second) interpolates to other bytes, without any error
    const held = (node: string) => {
      const store = shareStore(path.join(root, `fleet-${fleets}`, node))
      const share = store.read("ns", id.identity)!
      store.close()
      return share
    }
    expect(held("a").digest).toBe(held("b").digest)
    // (unless the two splits happened to give a and b the same x, 1 time in 255, which combine
    // refuses): never the envelope
    const naive = Either.try(() => Buffer.from(combine([held("a").share, held("b").share])).toString())
    expect(Either.getOrElse(naive, () => "refused: the same x")).not.toBe("two")
    // the digest refuses them, and another pair of the same version gives the envelope back
    const pulled = await run(f.vault.pull("ns", undefined, pullBody(id)))
    expect(text(pulled)).toBe("two")
    expect(Either.isRight(pulled) && pulled.right).toMatchObject({ version: 2, collected: 3, threshold: 2 })
  })

  it("refuses, rather than answer garbage, when no shares of a version combine to its digest", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 1, bytes("one")))))).toBe("ok")
    // a guardian that says it stored version 2 but keeps garbage: every pair of version 2 fails
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 2, bytes("two")))))).toBe("ok")
    for (const node of ["a", "b"]) {
      const store = shareStore(path.join(root, `fleet-${fleets}`, node))
      const held = store.read("ns", id.identity)!
      const share = new Uint8Array(held.share)
      share[0] = share[0]! ^ 0xff
      store.write("ns", id.identity, { ...held, share }, Date.now())
      store.close()
    }
    // only c's share of version 2 is sound, and nothing holds version 1 any more
    const pulled = await run(f.vault.pull("ns", undefined, pullBody(id)))
    expect(codeOf(pulled)).toBe("UNAVAILABLE")
    expect(Either.isLeft(pulled) && pulled.left.reason).toMatch(/3 shares answered; no version has enough that combine/)
  })

  it("tells a never-pushed identity (404) from one it cannot tell about (503)", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    // each pull signed for a second of its own (each signature is honoured once)
    const second = Math.floor(Date.now() / 1000) - 10
    expect(codeOf(await run(f.vault.pull("ns", undefined, pullBody(id, second))))).toBe("NOT_FOUND")
    // pushed under another namespace: not there either
    expect(codeOf(await run(f.vault.push("other", undefined, pushBody(id, 1, bytes("x")))))).toBe("ok")
    expect(codeOf(await run(f.vault.pull("ns", undefined, pullBody(id, second + 1))))).toBe("NOT_FOUND")
    // one answer of three: a push stood on all three, so one empty answer is enough to know
    f.down.add("b").add("c")
    expect(codeOf(await run(f.vault.pull("ns", undefined, pullBody(id, second + 2))))).toBe("NOT_FOUND")
  })

  it("honours a pull signature once and refuses stale, forged and mismatched requests", async () => {
    const f = fleet(["a", "b", "c"])
    const id = newIdentity()
    const other = newIdentity()
    expect(codeOf(await run(f.vault.push("ns", undefined, pushBody(id, 1, bytes("x")))))).toBe("ok")
    const once = pullBody(id)
    expect(codeOf(await run(f.vault.pull("ns", undefined, once)))).toBe("ok")
    const replayed = await run(f.vault.pull("ns", undefined, once))
    expect(codeOf(replayed)).toBe("SIGNATURE_INVALID")
    expect(Either.isLeft(replayed) && replayed.left.reason).toMatch(/used before/)
    expect(codeOf(await run(f.vault.pull("ns", undefined, pullBody(id, Math.floor(Date.now() / 1000) - 121))))).toBe("SIGNATURE_INVALID")
    expect(codeOf(await run(f.vault.pull("ns", undefined, pullBody(id, Math.floor(Date.now() / 1000) + 121))))).toBe("SIGNATURE_INVALID")
    // another key's signature over this identity's message
    const forged = { ...pullBody(other), identity: id.identity, pubkey: id.pubkey }
    expect(codeOf(await run(f.vault.pull("ns", undefined, forged)))).toBe("SIGNATURE_INVALID")
    // another key, claiming this identity: the identity is not its hash
    expect(codeOf(await run(f.vault.pull("ns", undefined, { ...pullBody(other), identity: id.identity })))).toBe("VALIDATION_FAILED")
    // a push whose envelope was swapped after signing
    const swapped = { ...pushBody(id, 2, bytes("mine")), envelope: Buffer.from("theirs").toString("base64") }
    expect(codeOf(await run(f.vault.push("ns", undefined, swapped)))).toBe("SIGNATURE_INVALID")
    // the identity point (small order) as a key: refused before any signature is looked at
    const small = "01" + "00".repeat(31)
    const smallId = (await import("node:crypto")).createHash("sha256").update(Buffer.from(small, "hex")).digest("hex")
    const smallOrder = { identity: smallId, timestamp: Math.floor(Date.now() / 1000), pubkey: small, signature: "01" + "00".repeat(63) }
    const answer = await run(f.vault.pull("ns", undefined, smallOrder))
    expect(codeOf(answer)).toBe("VALIDATION_FAILED")
    expect(Either.isLeft(answer) && answer.left.reason).toMatch(/small order/)
  })

  it("caps the envelope and charges the client network before the signature, the identity after it", async () => {
    const f = fleet(["a"], { maxEnvelopeBytes: 16, clientPushesPerMinute: 3, identityPushesPerHour: 2 })
    const id = newIdentity()
    expect(codeOf(await run(f.vault.push("ns", "192.0.2.1", pushBody(id, 1, new Uint8Array(17)))))).toBe("PAYLOAD_TOO_LARGE")
    expect(codeOf(await run(f.vault.push("ns", "192.0.2.1", { ...pushBody(id, 1, bytes("x")), envelope: "not base64!" })))).toBe("VALIDATION_FAILED")
    // the two refusals above spent the network's first two tokens; the identity's are untouched
    expect(codeOf(await run(f.vault.push("ns", "192.0.2.1", pushBody(id, 1, bytes("x")))))).toBe("ok")
    const limited = await run(f.vault.push("ns", "192.0.2.1", pushBody(id, 2, bytes("x"))))
    expect(codeOf(limited)).toBe("RATE_LIMITED")
    expect(Either.isLeft(limited) && limited.left.retryAfterSeconds).toBeGreaterThan(0)
    // another network: its own bucket, and the identity's second push of the hour
    expect(codeOf(await run(f.vault.push("ns", "198.51.100.1", pushBody(id, 2, bytes("x")))))).toBe("ok")
    expect(codeOf(await run(f.vault.push("ns", "198.51.100.1", pushBody(id, 3, bytes("x")))))).toBe("RATE_LIMITED")
    // one node: a copy, said plainly
    expect(await Effect.runPromise(f.vault.health)).toMatchObject({ status: "ok", mode: "local", threshold: 1, quorum: 1 })
  })
})

describe("a node that was stopped while a namespace was deleted", () => {
  it("drops that namespace's shares when it starts, and keeps those of namespaces that exist", async () => {
    const dir = path.join(root, "sweep")
    const settings = testSettings(dir)
    const store = shareStore(dir)
    const share = { version: 1, threshold: 1, digest: "ab".repeat(32), share: Uint8Array.of(1, 1) }
    store.write("kept", "id1", share, Date.now())
    store.write("gone", "id1", share, Date.now())
    store.write("gone", "id2", share, Date.now())
    store.close()
    // the registry first, with the namespace that still exists: the sweep runs as the vault starts
    const registry = registryLayer(settings).pipe(Layer.provide(PorticoConfig.layer(settings)))
    await Effect.runPromise(
      Effect.scoped(Effect.flatMap(RegistryStore, (r) => r.exec({ sql: "INSERT INTO namespaces (name, owner, created_at) VALUES ('kept', NULL, 0)" }))).pipe(
        Effect.provide(registry)
      )
    )
    const layer = Vault.Live.pipe(
      Layer.provide(Layer.mergeAll(Coordination.Test, Membership.Test, Sealer.Test)),
      Layer.provideMerge(registryLayer(settings)),
      Layer.provideMerge(PorticoConfig.layer(settings))
    )
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const vault = yield* Vault
          for (let i = 0; i < 50 && vault.guardian.count("gone") > 0; i++) yield* Effect.sleep("20 millis")
          expect(vault.guardian.count("gone")).toBe(0)
          expect(vault.guardian.count("kept")).toBe(1)
        })
      ).pipe(Effect.provide(layer))
    )
  })
})

describe("a guardian's writes of one turn", () => {
  /** `putSoon` as a promise of its outcome. */
  const putSoon = (guardian: Guardian, offer: Parameters<Guardian["put"]>[0], verified = false) =>
    new Promise<Awaited<ReturnType<Guardian["put"]>> | { outcome: "store failed" }>((resolve) => guardian.putSoon(offer, verified, resolve))
  const offerOf = (id: ReturnType<typeof newIdentity>, version: number, envelope: Uint8Array, share = Uint8Array.of(5, 6, 7)) => {
    const signed = pushBody(id, version, envelope)
    return { namespace: "ns", identity: id.identity, version, threshold: 2, digest: sha256(envelope), share, pubkey: id.pubkey, signature: signed.signature }
  }
  const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

  it("share one transaction, each decided as it would be alone after the ones before it", async () => {
    const store = shareStore(path.join(root, `batch-${++fleets}`))
    let batches = 0
    const counted = { ...store, writeMany: (...args: Parameters<typeof store.writeMany>) => (batches++, store.writeMany(...args)) }
    const guardian = makeGuardian(counted, Date.now, 16)
    const id = newIdentity()
    const other = newIdentity()
    const outcomes = await Promise.all([
      putSoon(guardian, offerOf(id, 2, bytes("two"))),
      // the same version of another envelope, after the first in the same transaction: a conflict
      putSoon(guardian, offerOf(id, 2, bytes("another"))),
      putSoon(guardian, offerOf(id, 1, bytes("one"))),
      putSoon(guardian, offerOf(other, 1, bytes("theirs"))),
      // refused before any write: a signature that does not verify, a share over the largest made
      putSoon(guardian, { ...offerOf(other, 3, bytes("x")), signature: "00".repeat(64) }),
      putSoon(guardian, offerOf(other, 4, bytes("y"), new Uint8Array(17).fill(1)))
    ])
    expect(outcomes.map((o) => o.outcome)).toEqual(["stored", "conflict", "conflict", "stored", "refused", "refused"])
    expect(batches).toBe(1)
    expect(guardian.count("ns")).toBe(2)
    // the next turn's writes are a transaction of their own
    expect((await putSoon(guardian, offerOf(id, 3, bytes("three")))).outcome).toBe("stored")
    expect(batches).toBe(2)
    store.close()
  })

  it("answer every write of a transaction that does not commit as its store failing, and write none", async () => {
    const store = shareStore(path.join(root, `batch-${++fleets}`))
    const failing = { ...store, writeMany: () => { throw new Error("disk full") } }
    const guardian = makeGuardian(failing)
    const id = newIdentity()
    const outcomes = await Promise.all([putSoon(guardian, offerOf(id, 1, bytes("a"))), putSoon(guardian, offerOf(newIdentity(), 1, bytes("b")))])
    expect(outcomes.map((o) => o.outcome)).toEqual(["store failed", "store failed"])
    expect(store.count("ns")).toBe(0)
    store.close()
  })
})
