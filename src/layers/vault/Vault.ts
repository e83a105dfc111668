/**
 * The secret vault (docs/vault.md): a client's envelope (ciphertext it made) split with Shamir's
 * scheme across the cluster's nodes, one share per node, each held by that node's guardian in its
 * own store. A push stands once a quorum stored its share; a pull combines the newest version that
 * enough guardians hold and checks it against the digest stored with every share, so shares of two
 * different splits never come back as silent garbage.
 */
import { Context, Effect, Layer } from "effect"
import { clientNetwork } from "../../domain/ClientNetwork.js"
import type { VaultCode } from "../../domain/Errors.js"
import { combine, split } from "../../domain/Shamir.js"
import { TokenBuckets } from "../../domain/TokenBuckets.js"
import { canonicalBase64, isFresh, PULL_WINDOW_SECONDS, pullMessage, pushMessage, sha256Hex, sharingOf, signatureProblem } from "../../domain/VaultRules.js"
import { Membership } from "../cluster/Membership.js"
import { PorticoConfig, type PorticoSettings } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { type GetOutcome, type Guardian, makeGuardian } from "./Guardian.js"
import { type GuardianCalls, makeGuardianCalls } from "./GuardianCalls.js"
import { type ShareStore, shareStore } from "./ShareStore.js"

export interface PushInput {
  readonly identity: string
  readonly version: number
  readonly envelope: string
  readonly pubkey: string
  readonly signature: string
}

export interface PullInput {
  readonly identity: string
  readonly timestamp: number
  readonly pubkey: string
  readonly signature: string
}

export type Mode = "local" | "shared"

export interface PushDone {
  readonly mode: Mode
  readonly acks: number
  readonly total: number
  readonly quorum: number
  readonly threshold: number
}

export interface PullDone {
  readonly version: number
  readonly envelope: Uint8Array
  readonly collected: number
  readonly threshold: number
}

export interface HealthView {
  readonly status: "ok" | "degraded" | "unavailable"
  readonly mode: Mode
  readonly guardians: number
  readonly healthy: number
  readonly threshold: number
  readonly quorum: number
}

export interface StatusView {
  readonly mode: Mode
  readonly threshold: number
  readonly quorum: number
  readonly guardians: ReadonlyArray<{ readonly node: string; readonly reachable: boolean; readonly shares: number | null }>
}

export interface VaultService {
  /** This node's guardian, which the internal routes answer through. */
  readonly guardian: Guardian
  /** `client` is the caller's address: its network is charged before the signature is checked. */
  readonly push: (namespace: string, client: string | undefined, input: PushInput) => Effect.Effect<PushDone, Refused<VaultCode>>
  readonly pull: (namespace: string, client: string | undefined, input: PullInput) => Effect.Effect<PullDone, Refused<VaultCode>>
  readonly health: Effect.Effect<HealthView, Refused<VaultCode>>
  readonly status: (namespace: string) => Effect.Effect<StatusView, Refused<VaultCode>>
  /** Removes a deleted namespace's shares from every node that may hold some; fails naming those that did not confirm. */
  readonly dropNamespace: (namespace: string) => Effect.Effect<void, string>
}

/** Subsets of one version tried before the next older version is: enough for every 2-of-3 to 4-of-7 mix. */
const SUBSETS_TRIED = 64
const RETRY_AFTER_SECONDS = 5

const modeOf = (members: number): Mode => (members === 1 ? "local" : "shared")

/** The `size`-element subsets of `items`, at most `limit` of them. */
const subsets = <A,>(items: ReadonlyArray<A>, size: number, limit: number): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  const pick = (start: number, chosen: Array<A>) => {
    if (out.length >= limit) return
    if (chosen.length === size) return void out.push([...chosen])
    for (let i = start; i <= items.length - (size - chosen.length); i++) pick(i + 1, [...chosen, items[i]!])
  }
  pick(0, [])
  return out
}

type Found = Extract<GetOutcome, { outcome: "found" }>

/** The newest version whose shares combine to its digest, trying other subsets of a version whose first does not. */
const recombine = (found: ReadonlyArray<Found>): PullDone | undefined => {
  const groups = new Map<string, Array<Found>>()
  for (const share of found) {
    const key = `${share.version}:${share.digest}:${share.threshold}:${share.share.length}`
    groups.set(key, [...(groups.get(key) ?? []), share])
  }
  const newestFirst = [...groups.values()].sort((a, b) => b[0]!.version - a[0]!.version)
  for (const group of newestFirst) {
    const { version, threshold, digest } = group[0]!
    if (group.length < threshold) continue
    for (const subset of subsets(group, threshold, SUBSETS_TRIED)) {
      let envelope: Uint8Array
      try {
        envelope = combine(subset.map((s) => s.share))
      } catch {
        continue // two shares with the same x: not of one split
      }
      if (sha256Hex(envelope) === digest) return { version, envelope, collected: group.length, threshold }
      envelope.fill(0)
    }
  }
  return undefined
}

export const makeVault = (deps: {
  readonly settings: PorticoSettings
  readonly guardian: Guardian
  readonly calls: GuardianCalls
}): VaultService => {
  const { settings, guardian, calls } = deps
  const limits = settings.vault
  const buckets = new TokenBuckets()
  const perMinute = (n: number) => ({ rps: n / 60, burst: n })
  const perHour = (n: number) => ({ rps: n / 3600, burst: n })
  const charge = (key: string, limit: { rps: number; burst: number }, what: string) =>
    Effect.suspend(() => {
      const decision = buckets.take(key, limit, Date.now())
      return decision.allowed
        ? Effect.void
        : Effect.fail(refuse("RATE_LIMITED", `too many vault ${what}`, `retry after ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds))
    })
  const signed = (request: { identity: string; pubkey: string; signature: string }, message: string) =>
    Effect.suspend((): Effect.Effect<void, Refused<"SIGNATURE_INVALID" | "VALIDATION_FAILED">> => {
      const problem = signatureProblem(request, message)
      if (problem === undefined) return Effect.void
      return problem.field === "signature"
        ? Effect.fail(refuse("SIGNATURE_INVALID", problem.reason, "sign the exact message the route names with the key of pubkey"))
        : Effect.fail(refuse("VALIDATION_FAILED", problem.reason, "pubkey is the raw Ed25519 public key in hex; identity is its SHA-256 in hex"))
    })
  const unavailable = (reason: string, hint: string) => refuse("UNAVAILABLE", reason, hint, RETRY_AFTER_SECONDS)

  const push: VaultService["push"] = (namespace, client, input) =>
    Effect.gen(function* () {
      yield* charge(`push:${clientNetwork(client)}`, perMinute(limits.clientPushesPerMinute), "pushes from your network")
      const envelope = canonicalBase64(input.envelope)
      if (envelope === undefined || envelope.length === 0) {
        return yield* refuse("VALIDATION_FAILED", "envelope is not canonical, non-empty base64", "standard alphabet with = padding, as btoa() writes it")
      }
      if (envelope.length > limits.maxEnvelopeBytes) {
        return yield* refuse("PAYLOAD_TOO_LARGE", `the envelope is ${envelope.length} bytes; the vault holds at most ${limits.maxEnvelopeBytes}`, "back up a smaller secret")
      }
      const digest = sha256Hex(envelope)
      yield* signed(input, pushMessage(input.identity, input.version, digest))
      yield* charge(`push:${namespace}:${input.identity}`, perHour(limits.identityPushesPerHour), "pushes of this identity")
      const members = yield* calls.members
      const { threshold, quorum } = sharingOf(members.all.length)
      if (members.live.length < quorum) {
        return yield* unavailable(
          `${members.live.length} of the ${members.all.length} nodes are live; a push needs ${quorum}`,
          "retry once the nodes are back, or retire a lost node (POST /v1/node/leave)"
        )
      }
      const shares = split(envelope, members.all.length, threshold)
      envelope.fill(0)
      const outcomes = yield* Effect.forEach(
        members.live,
        (node) => {
          const share = shares[members.all.indexOf(node)]!
          return calls.put(node, { namespace, identity: input.identity, version: input.version, threshold, digest, share, pubkey: input.pubkey, signature: input.signature })
        },
        { concurrency: "unbounded" }
      )
      for (const share of shares) share.fill(0)
      const acks = outcomes.filter((o) => o.outcome === "stored").length
      if (acks >= quorum) return { mode: modeOf(members.all.length), acks, total: members.all.length, quorum, threshold }
      const held = outcomes.flatMap((o) => (o.outcome === "conflict" ? [o.version] : []))
      if (held.length > 0) {
        return yield* refuse(
          "CONFLICT",
          `version ${input.version} is not newer than the version ${Math.max(...held)} the vault holds for this identity (version_conflict)`,
          "pull the newest version, then push with a higher version; the same version again only with the same envelope"
        )
      }
      // generic reasons only ("unreachable", "answered 500"); a guardian's refusal says no more
      const missed = members.live.flatMap((node, i) => {
        const o = outcomes[i]!
        return o.outcome === "stored" ? [] : [`${node}: ${o.outcome === "failed" ? o.reason : "refused"}`]
      })
      return yield* unavailable(
        `stored on ${acks} of ${members.all.length} nodes; a push needs ${quorum}; not on ${missed.join(", ")}`,
        "retry the same push: with the same version and envelope it is idempotent"
      )
    })

  const pull: VaultService["pull"] = (namespace, client, input) =>
    Effect.gen(function* () {
      yield* charge(`pull:${clientNetwork(client)}`, perMinute(limits.clientPullsPerMinute), "pulls from your network")
      yield* signed(input, pullMessage(input.identity, input.timestamp))
      if (!isFresh(input.timestamp, Date.now())) {
        return yield* refuse("SIGNATURE_INVALID", `timestamp is more than ${PULL_WINDOW_SECONDS} s from the gateway's clock`, "sign a new pull with the current Unix time in seconds")
      }
      yield* charge(`pull:${namespace}:${input.identity}`, perHour(limits.identityPullsPerHour), "pulls of this identity")
      const members = yield* calls.members
      const outcomes = yield* Effect.forEach(members.live, (node) => calls.get(node, { namespace, ...input }), { concurrency: "unbounded" })
      const found = outcomes.flatMap((o) => (o.outcome === "found" ? [o] : []))
      const done = recombine(found)
      for (const share of found) share.share.fill(0)
      if (done !== undefined) return done
      if (outcomes.some((o) => o.outcome === "refused" && o.replayed)) {
        return yield* refuse("SIGNATURE_INVALID", "this pull signature was used before", "sign a new pull with the current time: each signature is honoured once")
      }
      const { quorum } = sharingOf(members.all.length)
      const answered = outcomes.filter((o) => o.outcome === "found" || o.outcome === "none").length
      // a push stood on `quorum` nodes, so more answers than the rest of the nodes means one of them would have had it
      if (found.length === 0 && answered > members.all.length - quorum) {
        return yield* refuse("NOT_FOUND", "the vault holds nothing for this identity in this namespace", "push it first")
      }
      return yield* unavailable(
        found.length === 0
          ? `${answered} of the ${members.all.length} nodes answered; too few to tell whether this identity is held`
          : `${found.length} shares answered; no version has enough that combine to the envelope it was pushed with`,
        "retry once the nodes are back"
      )
    })

  const health = Effect.map(calls.members, (members): HealthView => {
    const { threshold, quorum } = sharingOf(members.all.length)
    const healthy = members.live.length
    return {
      status: healthy >= quorum ? "ok" : healthy >= threshold ? "degraded" : "unavailable",
      mode: modeOf(members.all.length),
      guardians: members.all.length,
      healthy,
      threshold,
      quorum
    }
  })

  const status: VaultService["status"] = (namespace) =>
    Effect.gen(function* () {
      const members = yield* calls.members
      const { threshold, quorum } = sharingOf(members.all.length)
      const guardians = yield* Effect.forEach(
        members.all,
        (node) => Effect.map(calls.count(node, namespace), (shares) => ({ node, reachable: shares !== null, shares })),
        { concurrency: "unbounded" }
      )
      return { mode: modeOf(members.all.length), threshold, quorum, guardians }
    })

  return { guardian, push, pull, health, status, dropNamespace: calls.dropEverywhere }
}

/**
 * Drops the shares of namespaces the registry no longer has, once at start: a node that was
 * stopped while a namespace was deleted was not asked to drop its shares (the deletion asks the
 * nodes that did not stop cleanly; GuardianCalls.ts), and does it here. A registry that does not
 * answer leaves the shares for the next start.
 */
const sweepGone = (store: ShareStore, registry: RegistryStore["Type"]) =>
  Effect.gen(function* () {
    const held = yield* Effect.try(() => store.namespaces())
    const present = new Set<string>()
    // a few hundred names a statement: well under either engine's limit on parameters
    for (let i = 0; i < held.length; i += 500) {
      const some = held.slice(i, i + 500)
      const rows = yield* registry.query({ sql: `SELECT name FROM namespaces WHERE name IN (${some.map(() => "?").join(", ")})`, params: some })
      for (const row of rows) present.add(String(row["name"]))
    }
    for (const namespace of held) {
      if (!present.has(namespace)) {
        const dropped = yield* Effect.try(() => store.drop(namespace))
        yield* Effect.logInfo(`vault: dropped ${dropped} shares of ${namespace}, deleted while this node was stopped`)
      }
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`vault: the sweep of deleted namespaces' shares did not run: ${String(e)}`)))

export class Vault extends Context.Tag("portico/Vault")<Vault, VaultService>() {
  static readonly Live = Layer.scoped(
    Vault,
    Effect.gen(function* () {
      const settings = yield* PorticoConfig
      const store = shareStore(settings.dataDir)
      yield* Effect.addFinalizer(() => Effect.sync(() => store.close()))
      // a share is the envelope's length plus its x byte
      const guardian = makeGuardian(store, Date.now, settings.vault.maxEnvelopeBytes + 1)
      yield* Effect.forkScoped(sweepGone(store, yield* RegistryStore))
      const coordination = yield* Coordination
      const calls = makeGuardianCalls({
        self: settings.nodeId,
        guardian,
        membership: yield* Membership,
        internal: internalClient(coordination),
        coordination,
        timeoutMs: settings.vault.guardianTimeoutMs
      })
      return makeVault({ settings, guardian, calls })
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Vault.Live.pipe(Layer.provide(Layer.mergeAll(Coordination.Test, Membership.Test, PorticoConfig.Test, SqliteRegistryStore.Test)))
  )
}
