/**
 * The sign-in tables' rows are decoded with Schema: what the flows read is typed, and a row not
 * of its shape is a registry error (statement), never read as something else.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { registryLayer } from "../../../src/layers/registry/registryLayer.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { makeSessionRepository } from "../../../src/layers/sessions/SessionRepository.js"

const withStore = <A, E>(use: Effect.Effect<A, E, RegistryStore>) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-sessions-"))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const settings = testSettings(dir)
    return yield* use.pipe(Effect.provide(registryLayer(settings).pipe(Layer.provide(PorticoConfig.layer(settings)))))
  })

const wallet = "0x" + "ab".repeat(20)

describe("SessionRepository", () => {
  it.scoped("reads typed rows: a namespace's policy, a device, a session's standing", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* RegistryStore
        const repo = makeSessionRepository(store)
        yield* store.exec({ sql: "INSERT INTO namespaces (name, owner, created_at) VALUES ('shop', NULL, 1)" })
        expect(yield* repo.namespace("shop")).toEqual(Option.some({ devicePolicy: "optional", signIn: "members" }))
        expect(yield* repo.namespace("nope")).toEqual(Option.none())
        const device = { namespace: "shop", id: "dev1", wallet, publicJwk: "{}", label: "phone", createdAt: 5 }
        yield* repo.batch([repo.insertDevice(device, "pending"), ...repo.insertSession("ses_1", "shop", wallet, "dev1", "h1", 7)])
        expect(yield* repo.device("shop", "dev1")).toEqual(Option.some({ id: "dev1", wallet, publicJwk: "{}", status: "pending" }))
        expect(yield* repo.activeDevices("shop", wallet)).toBe(0)
        expect(yield* repo.standing("ses_1")).toEqual(Option.some({ endedAt: null, status: "pending", role: null, signIn: "members" }))
        expect(yield* repo.tokenSession("h1")).toEqual(
          Option.some({ usedAt: null, successor: null, id: "ses_1", namespace: "shop", wallet, deviceId: "dev1", refreshedAt: 7, endedAt: null })
        )
      })
    )
  )

  it.scoped("a row not of its shape is a StoreError, not a guess", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* RegistryStore
        const repo = makeSessionRepository(store)
        yield* store.exec({ sql: "INSERT INTO namespaces (name, owner, created_at, device_policy) VALUES ('odd', NULL, 1, 'strict')" })
        const read = yield* Effect.either(repo.namespace("odd"))
        expect(Either.isLeft(read) ? [read.left._tag, read.left.reason] : read).toEqual(["StoreError", "statement"])
      })
    )
  )
})
