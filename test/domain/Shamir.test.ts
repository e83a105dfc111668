import { randomBytes } from "node:crypto"
import { combine as oracleCombine, split as oracleSplit } from "shamir-secret-sharing"
import { describe, expect, it } from "vitest"
import { combine, gfMul, split } from "../../src/domain/Shamir.js"

const bytes = (n: number) => new Uint8Array(randomBytes(n))

describe("Shamir over GF(2^8)", () => {
  it("multiplies in the AES field: known products and the field's laws", () => {
    // FIPS-197 §4.2: {57}·{83} = {c1}, {57}·{13} = {fe}
    expect(gfMul(0x57, 0x83)).toBe(0xc1)
    expect(gfMul(0x57, 0x13)).toBe(0xfe)
    for (let a = 1; a < 256; a++) {
      expect(gfMul(a, 1)).toBe(a)
      expect(gfMul(a, 0)).toBe(0)
    }
  })

  it("gives the secret back from any threshold-sized subset", () => {
    const secret = bytes(1000)
    const shares = split(secret, 5, 3)
    expect(shares).toHaveLength(5)
    for (const subset of [[0, 1, 2], [0, 2, 4], [1, 3, 4], [4, 3, 2, 1]]) {
      expect(Buffer.from(combine(subset.map((i) => shares[i]!)))).toEqual(Buffer.from(secret))
    }
    // too few shares interpolate to other bytes, silently (the vault checks a digest)
    expect(Buffer.from(combine([shares[0]!, shares[1]!]))).not.toEqual(Buffer.from(secret))
  })

  it("agrees with the audited shamir-secret-sharing package both ways", async () => {
    for (const [n, k] of [[2, 2], [3, 2], [5, 3], [7, 4]] as const) {
      const secret = bytes(257)
      const ours = split(secret, n, k)
      expect(Buffer.from(await oracleCombine(ours.slice(n - k).map((s) => new Uint8Array(s))))).toEqual(Buffer.from(secret))
      const theirs = await oracleSplit(secret, n, k)
      expect(Buffer.from(combine(theirs.slice(0, k)))).toEqual(Buffer.from(secret))
    }
  })

  it("holds a fixed vector: two shares of a known polynomial", () => {
    // y = secret + 0x02·x at x = 1 and x = 3, byte by byte: 0x41 ^ 0x02 = 0x43; 0x41 ^ 0x06 = 0x47
    expect(Array.from(combine([Uint8Array.of(0x43, 1), Uint8Array.of(0x47, 3)]))).toEqual([0x41])
  })

  it("threshold 1 copies; bad inputs are refused", () => {
    const secret = bytes(16)
    for (const share of split(secret, 1, 1)) expect(Buffer.from(share.subarray(0, 16))).toEqual(Buffer.from(secret))
    expect(() => split(secret, 2, 3)).toThrow(RangeError)
    expect(() => split(secret, 256, 2)).toThrow(RangeError)
    expect(() => split(new Uint8Array(0), 3, 2)).toThrow(RangeError)
    const [a, b] = split(secret, 2, 2)
    expect(() => combine([a!, a!])).toThrow(/same x/)
    expect(() => combine([a!, b!.subarray(1)])).toThrow(/length/)
  })

  it("splits and combines an envelope at the vault's 512 KiB cap", () => {
    const secret = bytes(512 * 1024)
    const shares = split(secret, 3, 2)
    expect(Buffer.from(combine([shares[2]!, shares[0]!])).equals(secret)).toBe(true)
  })
})
