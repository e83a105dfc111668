/**
 * NamespaceBackups over its test doubles: the restore key is derived from the root secret (the
 * same for the same secret, another for another), and a body that is no archive sealed to it is
 * refused 400, nothing written, with the transfer slot given back.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Stream } from "effect"
import { parseGrant } from "../../../src/domain/Grants.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { NamespaceBackups } from "../../../src/layers/namespaces/backup/NamespaceBackups.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { publicKeyOf } from "../../../src/layers/namespaces/backup/SealedStream.js"

const owner: Principal = {
  namespace: "shop",
  subject: "key:k1",
  method: "api_key",
  role: "owner",
  grants: [parseGrant("db:write")!],
  keyId: "k1",
  sessionId: undefined,
  deviceId: undefined
}

describe("NamespaceBackups", () => {
  it.effect("derives the restore key from the root secret", () =>
    Effect.gen(function* () {
      const backups = yield* NamespaceBackups
      const secret = Buffer.from(makeSealer(new Uint8Array(32).fill(7)).hash("namespace-restore-key", "x25519/v1"), "base64url")
      expect(Buffer.from(backups.restoreKey)).toEqual(Buffer.from(publicKeyOf(secret)))
      const other = Buffer.from(makeSealer(new Uint8Array(32).fill(8)).hash("namespace-restore-key", "x25519/v1"), "base64url")
      expect(Buffer.from(backups.restoreKey)).not.toEqual(Buffer.from(publicKeyOf(other)))
    }).pipe(Effect.provide(NamespaceBackups.Test))
  )

  it.effect("refuses a body that is no sealed archive, and frees the slot", () =>
    Effect.gen(function* () {
      const backups = yield* NamespaceBackups
      const store = yield* RegistryStore
      yield* store.exec({ sql: "INSERT INTO namespaces (name, owner, created_at) VALUES ('shop', NULL, 0)" })
      // twice: the second finds the slot free again
      for (let i = 0; i < 2; i++) {
        const refused = yield* Effect.either(backups.restore(owner, Stream.make(new Uint8Array(100).fill(1))))
        expect(Either.isLeft(refused) ? refused.left.code : refused).toBe("BAD_REQUEST")
      }
      const written = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM local_databases WHERE namespace = 'shop'" })
      expect(written).toEqual([{ n: 0 }])
    }).pipe(Effect.provide(Layer.merge(NamespaceBackups.Test, SqliteRegistryStore.Test)))
  )
})
