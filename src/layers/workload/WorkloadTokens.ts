/**
 * Workload tokens (spec §4.8, §5.12): the short-lived access token a deployed app finds in the
 * file `PORTICO_TOKEN_FILE` names and renews at `POST /v1/auth/renew`. It is an access token of
 * the one key ring, signed like a session's, with the deployment's id as the `dep` claim, subject
 * `deployment:<id>`, role `runtime`, and the deployment's grants as the record held them when it
 * was minted: a grant change reaches the app at its next renewal. The authenticator reads the
 * deployment's row on every request (WorkloadLiveness), so a deleted deployment's token is
 * refused at once; a renewal reads the record again for the grants it writes into the new token.
 *
 * The deployment runtime mints the first token with `mint` and writes it with `writeTokenFile`.
 */
import { Clock, Context, Effect, Either, Layer } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { WorkloadCode } from "../../domain/Errors.js"
import { parseGrant } from "../../domain/Grants.js"
import { type Principal, WORKLOAD_SUBJECT, workloadDeployment } from "../../domain/Principal.js"
import { WorkloadLiveness } from "../auth/Authenticator.js"
import { refuse, type Refused } from "../Refused.js"
import { RegistryStore, type Row, type Statement, StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"
import { KeyRing } from "../tokens/KeyRing.js"

/**
 * A workload token lives one hour: long enough that an app renewing at half-life rides out a
 * gateway restart or a short registry outage, short enough that a stolen token file is worth
 * little (deletion revokes at once anyway, see above).
 */
export const WORKLOAD_TOKEN_SECONDS = 60 * 60

/** What a token is minted for: the deployment record's own fields. */
export interface WorkloadDeployment {
  readonly namespace: string
  readonly id: string
  readonly name: string
  readonly grants: ReadonlyArray<string>
}

export interface WorkloadToken {
  readonly token: string
  /** Seconds the token lives from now (the answer's `expires_in`). */
  readonly expiresIn: number
  /** Unix seconds. */
  readonly expiresAt: number
}

/** A renewal by anything but a standing deployment's workload token. */
export type WorkloadRefused = Refused<WorkloadCode>

export interface WorkloadTokensService {
  /** A fresh token for the deployment, carrying its grants as given (the record's, at this moment). */
  readonly mint: (deployment: WorkloadDeployment) => Effect.Effect<WorkloadToken>
  /**
   * A fresh token for the calling workload's own deployment, with the grants the record holds
   * now. INVALID_TOKEN when the deployment is gone; WORKLOAD_TOKEN_REQUIRED for any other caller.
   */
  readonly renew: (caller: Principal) => Effect.Effect<WorkloadToken, WorkloadRefused | StoreError>
}

const standing = (namespace: string, id: string): Statement => ({
  sql: "SELECT name, grants FROM deployments WHERE id = ? AND namespace = ?",
  params: [id, namespace]
})

/** Only grants the token format knows: a record's grants passed the deployment rules already. */
const knownGrants = (grants: ReadonlyArray<string>): ReadonlyArray<string> => grants.filter((g) => parseGrant(g) !== undefined)

const grantsOfRow = (row: Row): Effect.Effect<ReadonlyArray<string>, StoreError> =>
  Effect.try({
    try: () => {
      const parsed: unknown = JSON.parse(String(row["grants"]))
      if (!Array.isArray(parsed) || !parsed.every((g) => typeof g === "string")) throw new Error("not a list of strings")
      return parsed as ReadonlyArray<string>
    },
    catch: () => new StoreError({ reason: "statement", detail: "a deployment's grants column is damaged" })
  })

export class WorkloadTokens extends Context.Tag("portico/WorkloadTokens")<WorkloadTokens, WorkloadTokensService>() {
  static readonly Live = Layer.effect(
    WorkloadTokens,
    Effect.gen(function* () {
      const ring = yield* KeyRing
      const store = yield* RegistryStore
      const mint = (deployment: WorkloadDeployment) =>
        Effect.gen(function* () {
          const token = yield* ring.sign(
            {
              sub: WORKLOAD_SUBJECT + deployment.id,
              ns: deployment.namespace,
              role: "runtime",
              grants: knownGrants(deployment.grants),
              dep: deployment.id
            },
            WORKLOAD_TOKEN_SECONDS
          )
          const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          return { token, expiresIn: WORKLOAD_TOKEN_SECONDS, expiresAt: now + WORKLOAD_TOKEN_SECONDS }
        })
      return {
        mint,
        renew: (caller) =>
          Effect.gen(function* () {
            const id = workloadDeployment(caller)
            if (id === undefined) {
              return yield* Effect.fail(refuse("WORKLOAD_TOKEN_REQUIRED", "only a deployed app's workload token can be renewed"))
            }
            // read again here: the gate saw the row, but a delete may have landed since
            const [row] = yield* store.query(standing(caller.namespace, id))
            if (row === undefined) {
              return yield* Effect.fail(refuse("INVALID_TOKEN", "the deployment of this workload token was deleted"))
            }
            const grants = yield* grantsOfRow(row)
            return yield* mint({ namespace: caller.namespace, id, name: String(row["name"]), grants })
          })
      }
    })
  )

  /**
   * The authenticator's check that a workload token's deployment still stands: one read by primary
   * key, on the spot where the registry reads on the spot (SQLite), so the fast lane keeps it.
   */
  static readonly Liveness = Layer.effect(
    WorkloadLiveness,
    Effect.map(RegistryStore, (store) => {
      const queryNow = store.queryNow
      return {
        stands: (namespace, id) => Effect.map(store.query(standing(namespace, id)), (rows) => rows.length > 0),
        standsNow:
          queryNow === undefined ? undefined : (namespace, id) => Either.map(queryNow(standing(namespace, id)), (rows) => rows.length > 0)
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    WorkloadTokens.Live.pipe(Layer.provide(Layer.mergeAll(KeyRing.Test, SqliteRegistryStore.Test, Sealer.Test)))
  )

  static readonly LivenessTest = Layer.suspend(() => WorkloadTokens.Liveness.pipe(Layer.provide(SqliteRegistryStore.Test)))
}

/**
 * Writes a token where the app reads it: the file is replaced whole (a temporary file in the same
 * directory, renamed over it), created with mode 0600 and owned by `uid`/`gid` when given (the
 * deployment's own identity; the gateway must run as root to hand a file to another uid). An app
 * reading the file mid-write sees the old token or the new one, never a torn one.
 */
export const writeTokenFile = (
  file: string,
  token: string,
  owner?: { readonly uid: number; readonly gid: number }
): Effect.Effect<void, Error> =>
  Effect.tryPromise({
    try: async () => {
      const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now()}.tmp`)
      const handle = await fs.open(temporary, "wx", 0o600)
      try {
        await handle.writeFile(token + "\n", "utf8")
        await handle.chmod(0o600)
        if (owner !== undefined) await handle.chown(owner.uid, owner.gid)
        await handle.sync()
      } finally {
        await handle.close()
      }
      try {
        await fs.rename(temporary, file)
      } catch (e) {
        await fs.rm(temporary, { force: true })
        throw e
      }
    },
    catch: (e) => (e instanceof Error ? e : new Error(String(e)))
  })
