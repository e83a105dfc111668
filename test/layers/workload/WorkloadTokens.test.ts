/**
 * Workload tokens over the services' test doubles (one registry file, one key ring), on the
 * TestClock: a minted token authenticates as its deployment (subject, role runtime, the record's
 * grants, `storage` reading too) and never as a session or the control plane; it lives one hour;
 * a grant change reaches it at renewal only; a deleted deployment's token is refused at once, on
 * both the waiting and the on-the-spot path, and cannot be renewed; only a workload renews; the
 * token file is written whole with mode 0600.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { asSession, grantStrings, isControlPlane, type Principal } from "../../../src/domain/Principal.js"
import { Authenticator } from "../../../src/layers/auth/Authenticator.js"
import { AuthenticatorTest } from "../../../src/layers/sessions/AuthenticatorTest.js"
import { DeploymentStore } from "../../../src/layers/deployments/DeploymentStore.js"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"
import { WORKLOAD_TOKEN_SECONDS, WorkloadTokens, writeTokenFile } from "../../../src/layers/workload/WorkloadTokens.js"

const start = Date.UTC(2026, 10, 28, 9, 0)

const create = (name: string) =>
  Effect.flatMap(DeploymentStore, (store) =>
    store.create({
      namespace: "shop",
      name,
      type: "nodejs",
      domain: `${name}-abc123.portico.test`,
      homeNode: "test-node",
      artifact: "v1"
    })
  )

describe("workload tokens", () => {
  it.layer(Layer.mergeAll(AuthenticatorTest, WorkloadTokens.Test, DeploymentStore.Test, Namespaces.Test))((it) => {
    it.effect("authenticate as the deployment with its grants, live one hour, renew with the grants of now", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(start)
        const record = yield* create("blog")
        const tokens = yield* WorkloadTokens
        const authenticator = yield* Authenticator
        const minted = yield* tokens.mint(record)
        expect(minted.expiresIn).toBe(WORKLOAD_TOKEN_SECONDS)
        expect(minted.expiresAt).toBe(start / 1000 + 3600)

        const caller = yield* authenticator.authenticate(minted.token)
        expect(caller).toMatchObject({ namespace: "shop", subject: `deployment:${record.id}`, method: "workload", role: "runtime" })
        expect(caller.keyId).toBeUndefined()
        expect(asSession(caller)).toBeUndefined()
        expect(isControlPlane(caller)).toBe(false)
        // the runtime profile of spec §4.8, and storage reading what it stores
        expect([...grantStrings(caller)].sort()).toEqual(["cache", "invoke", "proxy", "pubsub", "push:write", "storage", "storage-read", "webrtc"])
        // the on-the-spot path (SQLite reads on the spot) says the same
        const spot = authenticator.authenticateNow(minted.token, start)
        expect(spot !== undefined && Either.isRight(spot) ? spot.right.subject : spot).toBe(`deployment:${record.id}`)

        // a grant change: the token in hand keeps its grants, the renewed one has the new ones
        yield* Effect.flatMap(DeploymentStore, (s) => s.setGrants("shop", record.id, ["cache"]))
        expect(grantStrings(yield* authenticator.authenticate(minted.token))).toContain("storage")
        yield* TestClock.adjust(Duration.minutes(30))
        const renewed = yield* tokens.renew(caller)
        expect(renewed.expiresAt).toBe(start / 1000 + 1800 + 3600)
        expect(grantStrings(yield* authenticator.authenticate(renewed.token))).toEqual(["cache"])

        // the first token is over at its hour, the renewed one still stands
        yield* TestClock.adjust(Duration.minutes(30))
        expect(Either.isLeft(yield* Effect.either(authenticator.authenticate(minted.token)))).toBe(true)
        expect(Either.isRight(yield* Effect.either(authenticator.authenticate(renewed.token)))).toBe(true)
      })
    )

    it.effect("a deleted deployment's token is refused at once and cannot be renewed", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(start)
        const record = yield* create("gone")
        const tokens = yield* WorkloadTokens
        const authenticator = yield* Authenticator
        const minted = yield* tokens.mint(record)
        const caller = yield* authenticator.authenticate(minted.token)
        expect(yield* Effect.flatMap(DeploymentStore, (s) => s.remove("shop", record.id))).toBe(true)

        const refused = yield* Effect.either(authenticator.authenticate(minted.token))
        expect(Either.isLeft(refused) && refused.left._tag === "CredentialRejected" ? refused.left.reason : refused).toMatch(/deleted/)
        const spot = authenticator.authenticateNow(minted.token, start)
        expect(spot !== undefined && Either.isLeft(spot)).toBe(true)
        // a renewal that passed the gate before the delete reads the record again
        const renewal = yield* Effect.either(tokens.renew(caller))
        expect(Either.isLeft(renewal) && renewal.left._tag === "Refused" ? renewal.left.code : renewal).toBe("INVALID_TOKEN")
        // a deployment of the same name made again is another id: the old token stays refused
        yield* create("gone")
        expect(Either.isLeft(yield* Effect.either(authenticator.authenticate(minted.token)))).toBe(true)
      })
    )

    it.effect("only a workload renews: a session's or a key's principal is WORKLOAD_TOKEN_REQUIRED", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(start)
        const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("renewals", undefined, "test"))
        const authenticator = yield* Authenticator
        const owner = yield* authenticator.authenticate(created.ownerKey.apiKey)
        const exchanged = yield* authenticator.authenticate(yield* authenticator.exchange(created.ownerKey.record))
        const wallet: Principal = { ...owner, method: "jwt", subject: "0x" + "a".repeat(40), keyId: undefined, sessionId: "ses_1" }
        // a principal that says workload but names no deployment is refused as well
        const odd: Principal = { ...owner, method: "workload" }
        for (const caller of [owner, exchanged, wallet, odd]) {
          const answer = yield* Effect.either(Effect.flatMap(WorkloadTokens, (t) => t.renew(caller)))
          expect(Either.isLeft(answer) && answer.left._tag === "Refused" ? answer.left.code : answer).toBe("WORKLOAD_TOKEN_REQUIRED")
        }
      })
    )
  })

  it.effect("the token file is written whole, mode 0600, replacing the one before", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(path.join(tmpdir(), "portico-token-file-"))
      try {
        const file = path.join(dir, "token")
        yield* writeTokenFile(file, "first")
        yield* writeTokenFile(file, "second")
        expect(readFileSync(file, "utf8")).toBe("second\n")
        expect(statSync(file).mode & 0o777).toBe(0o600)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  )
})
