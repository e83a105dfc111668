import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { makeSealer, safeEqual } from "../../../src/layers/secrets/Sealer.js"

const sealer = makeSealer(new Uint8Array(32).fill(1))
const text = new TextEncoder().encode("p8 key material")

describe("Sealer", () => {
  it("round-trips for the same purpose and owner", async () => {
    const sealed = sealer.seal("push-credentials", "acme/ios_push", text)
    expect(sealed.startsWith("v1.")).toBe(true)
    expect(sealed).not.toContain("p8 key")
    const opened = await Effect.runPromise(sealer.open("push-credentials", "acme/ios_push", sealed))
    expect(new TextDecoder().decode(opened)).toBe("p8 key material")
  })
  it("refuses another owner, another purpose, another root and a flipped bit", async () => {
    const sealed = sealer.seal("push-credentials", "acme/ios_push", text)
    const fails = async (e: Effect.Effect<unknown, unknown>) => expect(Exit.isFailure(await Effect.runPromiseExit(e))).toBe(true)
    await fails(sealer.open("push-credentials", "other/ios_push", sealed))
    await fails(sealer.open("deployment-env", "acme/ios_push", sealed))
    await fails(makeSealer(new Uint8Array(32).fill(2)).open("push-credentials", "acme/ios_push", sealed))
    const raw = Buffer.from(sealed.slice(3), "base64url")
    raw[20] = (raw[20] ?? 0) ^ 1
    await fails(sealer.open("push-credentials", "acme/ios_push", "v1." + raw.toString("base64url")))
    await fails(sealer.open("push-credentials", "acme/ios_push", "v9.abc"))
  })
  it("hashes per purpose and compares in constant time", () => {
    expect(sealer.hash("api-key-hash", "x")).toBe(sealer.hash("api-key-hash", "x"))
    expect(sealer.hash("api-key-hash", "x")).not.toBe(sealer.hash("refresh-token-hash", "x"))
    expect(safeEqual("abc", "abc")).toBe(true)
    expect(safeEqual("abc", "abd")).toBe(false)
    expect(safeEqual("abc", "abcd")).toBe(false)
  })
})
