import { Effect } from "effect"
import { decodeJwt, decodeProtectedHeader } from "jose"
import { describe, expect, it } from "vitest"
import { makeProviderTokens } from "../../src/layers/push/ProviderToken.js"
import { makeP8Key } from "../support/apnsStandIn.js"

const key = { teamId: "TEAM123456", keyId: "ABCDE12345", p8Key: makeP8Key() }
const minutes = (n: number) => n * 60_000

describe("ProviderTokens", () => {
  it("mints an ES256 token with kid, iss and iat, once for concurrent callers", async () => {
    const clock = 1_800_000_000_000
    const tokens = makeProviderTokens({ now: () => clock })
    const all = await Effect.runPromise(Effect.all(Array.from({ length: 20 }, () => tokens.current(key)), { concurrency: "unbounded" }))
    expect(new Set(all).size).toBe(1)
    expect(tokens.minted()).toBe(1)
    expect(decodeProtectedHeader(all[0]!)).toEqual({ alg: "ES256", kid: "ABCDE12345" })
    expect(decodeJwt(all[0]!)).toEqual({ iss: "TEAM123456", iat: 1_800_000_000 })
  })

  it("clamps the lifetime to 20-50 minutes", async () => {
    let clock = 0
    const short = makeProviderTokens({ lifetimeMs: minutes(1), now: () => clock })
    const first = await Effect.runPromise(short.current(key))
    clock = minutes(19)
    expect(await Effect.runPromise(short.current(key))).toBe(first)
    clock = minutes(20)
    expect(await Effect.runPromise(short.current(key))).not.toBe(first)
    clock = 0
    const long = makeProviderTokens({ lifetimeMs: minutes(90), now: () => clock })
    const kept = await Effect.runPromise(long.current(key))
    clock = minutes(50)
    expect(await Effect.runPromise(long.current(key))).not.toBe(kept)
  })

  it("drops a refused token only once it is 20 minutes old, and a new key gets its own token", async () => {
    let clock = 0
    const tokens = makeProviderTokens({ now: () => clock })
    const first = await Effect.runPromise(tokens.current(key))
    clock = minutes(5)
    tokens.refused(key, first)
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(await Effect.runPromise(tokens.current(key))).toBe(first)
    clock = minutes(25)
    tokens.refused(key, first)
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(await Effect.runPromise(tokens.current(key))).not.toBe(first)
    expect(tokens.minted()).toBe(2)
    await Effect.runPromise(tokens.current({ ...key, p8Key: makeP8Key() }))
    expect(tokens.minted()).toBe(3)
  })

  it("fails, without throwing, for a key that cannot sign", async () => {
    const tokens = makeProviderTokens()
    const exit = await Effect.runPromiseExit(tokens.current({ ...key, p8Key: "not a key" }))
    expect(exit._tag).toBe("Failure")
  })
})
