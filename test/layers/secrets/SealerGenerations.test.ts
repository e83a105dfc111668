import { Effect, Exit } from "effect"
import { mkdtempSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { readLaterRootsSync, writeLaterRoots } from "../../../src/layers/secrets/RootFile.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"

const root0 = new Uint8Array(32).fill(1)
const root1 = new Uint8Array(32).fill(2)
const root2 = new Uint8Array(32).fill(3)
const text = new TextEncoder().encode("function secret")
const open = (s: ReturnType<typeof makeSealer>, sealed: string) =>
  Effect.runPromise(Effect.map(s.open("function-secret", "acme/f/K", sealed), (b) => new TextDecoder().decode(b)))

describe("Sealer generations", () => {
  it("seals under the newest generation and opens every one it holds", async () => {
    const sealer = makeSealer(root0)
    const before = sealer.seal("function-secret", "acme/f/K", text)
    expect(before.startsWith("v1.")).toBe(true)
    expect(sealer.generationOf(before)).toBe(0)
    await Effect.runPromise(sealer.adopt(1, root1))
    expect(sealer.generation()).toBe(1)
    const after = sealer.seal("function-secret", "acme/f/K", text)
    expect(after.startsWith("v2.1.")).toBe(true)
    expect(sealer.generationOf(after)).toBe(1)
    expect(await open(sealer, before)).toBe("function secret")
    expect(await open(sealer, after)).toBe("function secret")
    // a node still on generation 0 cannot open generation 1's values
    expect(Exit.isFailure(await Effect.runPromiseExit(makeSealer(root0).open("function-secret", "acme/f/K", after)))).toBe(true)
    // the same roots in another sealer open both
    expect(await open(makeSealer([root0, root1]), after)).toBe("function secret")
  })
  it("keeps keyed hashes on generation 0 and MACs per generation", async () => {
    const sealer = makeSealer(root0)
    const hash = sealer.hash("api-key-hash", "k:s")
    await Effect.runPromise(sealer.adopt(1, root1))
    expect(sealer.hash("api-key-hash", "k:s")).toBe(hash)
    expect(sealer.hashAt(0, "coordination-mac-v2", "x")).toBe(makeSealer(root0).hash("coordination-mac-v2", "x"))
    expect(sealer.hashAt(1, "coordination-mac-v2", "x")).not.toBe(sealer.hashAt(0, "coordination-mac-v2", "x"))
    expect(sealer.hashAt(2, "coordination-mac-v2", "x")).toBeUndefined()
  })
  it("adopts only the next generation; one already held is a no-op", async () => {
    const sealer = makeSealer(root0)
    expect(Exit.isFailure(await Effect.runPromiseExit(sealer.adopt(2, root2)))).toBe(true)
    await Effect.runPromise(sealer.adopt(1, root1))
    await Effect.runPromise(sealer.adopt(1, root2))
    expect(sealer.hashAt(1, "coordination-mac", "x")).toBe(makeSealer([root0, root1]).hashAt(1, "coordination-mac", "x"))
  })
  it("persists later generations 0600 before taking them", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "portico-roots-"))
    const sealer = makeSealer(root0, (later) => writeLaterRoots(dir, later))
    await Effect.runPromise(sealer.adopt(1, root1))
    await Effect.runPromise(sealer.adopt(2, root2))
    expect(statSync(path.join(dir, "secret.keys")).mode & 0o777).toBe(0o600)
    expect(readLaterRootsSync(dir).map((r) => Buffer.from(r).toString("hex"))).toEqual([root1, root2].map((r) => Buffer.from(r).toString("hex")))
    expect(JSON.parse(readFileSync(path.join(dir, "secret.keys"), "utf8")).roots[1].generation).toBe(2)
    const refusing = makeSealer(root0, () => {
      throw new Error("disk full")
    })
    expect(Exit.isFailure(await Effect.runPromiseExit(refusing.adopt(1, root1)))).toBe(true)
    expect(refusing.generation()).toBe(0)
  })
})
