/**
 * `portico serve --join <invite>`: before it serves, a new node asks the node named in its invite
 * to admit it (docs/cluster.md, "Joining"; the protocol is src/domain/NodeJoin.ts). What comes back,
 * sealed to a key made for this one call, is what the node needs to run as one of the cluster's:
 * the root secret (kept as `<data dir>/secret.key`, as an unjoined node keeps its own) and the
 * registry's and Redis's addresses (kept as `<data dir>/cluster.json`, which the configuration
 * reads beneath the environment). Both files are 0600.
 *
 * A data directory that already joined is not joined again (its invite is left unspent), so a
 * node's start command can keep `--join`. One that holds a root secret of its own is refused
 * before anything is sent: it belongs to another cluster, or to a node that ran alone.
 */
import { Effect } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { decodeInvite, inviteIdOf, type JoinClaim, newSealKey, openAnswer, proofOf, signClaim } from "../domain/NodeJoin.js"
import { loadNodeKey } from "../layers/config/NodeKey.js"
import { JOINED_FILE } from "../layers/config/PorticoConfig.js"
import type { JoinedSettings } from "../layers/nodes/NodeInvites.js"
import { UsageError } from "./failure.js"

/** How long the admitting node has to answer. */
const JOIN_TIMEOUT_MS = 15_000

export class JoinFailed extends Error {}

/** What happened: `joined` now, or `already` (this data directory joined before). */
export type JoinOutcome = { readonly kind: "joined"; readonly by: string } | { readonly kind: "already" }

export const joinCluster = (inviteText: string, dataDir: string, nodeId: string): Effect.Effect<JoinOutcome, UsageError | JoinFailed> =>
  Effect.gen(function* () {
    const invite = decodeInvite(inviteText)
    if (invite === undefined) return yield* Effect.fail(new UsageError({ message: "--join takes an invite (pjoin_…) from POST /v1/node/enroll" }))
    if (existsSync(path.join(dataDir, JOINED_FILE))) return { kind: "already" as const }
    if (process.env["PORTICO_SECRET"] !== undefined) {
      return yield* Effect.fail(new UsageError({ message: "PORTICO_SECRET is set: a joining node takes the cluster's root secret from its invite; unset it" }))
    }
    if (existsSync(path.join(dataDir, "secret.key"))) {
      return yield* Effect.fail(
        new JoinFailed(`${dataDir} holds a root secret of its own (secret.key): join with an empty data directory`)
      )
    }
    const key = loadNodeKey(dataDir)
    const seal = newSealKey()
    const claim: JoinClaim = {
      invite_id: inviteIdOf(invite.token),
      node_id: nodeId,
      public_key: key.publicKey,
      seal_key: seal.public,
      iat: Math.floor(Date.now() / 1000)
    }
    const body = JSON.stringify({ ...claim, proof: proofOf(invite.token, claim), signature: signClaim(key.privateKey, claim) })
    const response = yield* Effect.tryPromise({
      try: () =>
        fetch(`${invite.url}/v1/internal/join`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: AbortSignal.timeout(JOIN_TIMEOUT_MS)
        }),
      catch: (e) => new JoinFailed(`the node at ${invite.url} did not answer the join: ${e instanceof Error ? e.message : String(e)}`)
    })
    const answer = (yield* Effect.tryPromise({ try: () => response.json(), catch: () => new JoinFailed(`the node at ${invite.url} did not answer with JSON (${response.status})`) })) as {
      node?: string
      seal_from?: string
      sealed?: string
      error?: string
      hint?: string
    }
    if (response.status !== 200 || typeof answer.seal_from !== "string" || typeof answer.sealed !== "string") {
      return yield* Effect.fail(new JoinFailed(`the join was refused (${response.status}): ${answer.error ?? "no reason given"}${answer.hint === undefined ? "" : `; ${answer.hint}`}`))
    }
    const opened = openAnswer(invite.token, claim, seal.secret, { seal_from: answer.seal_from, sealed: answer.sealed })
    if (opened === undefined) return yield* Effect.fail(new JoinFailed("the join's answer does not open with this invite: it was not sealed by the invite's node"))
    const settings = JSON.parse(Buffer.from(opened).toString("utf8")) as JoinedSettings
    writeFileSync(path.join(dataDir, "secret.key"), settings.secret + "\n", { flag: "wx", mode: 0o600 })
    const joined = { registry: settings.registry, ...(settings.redis_url === undefined ? {} : { redis_url: settings.redis_url }) }
    writeFileSync(path.join(dataDir, JOINED_FILE), JSON.stringify(joined, null, 2) + "\n", { flag: "wx", mode: 0o600 })
    return { kind: "joined" as const, by: answer.node ?? "" }
  })
