import { describe, expect, it } from "vitest"
import { canonicalCid } from "../../src/domain/ContentId.js"

const v1 = "bafkreigks6arfsq3xxfpvqrrwonchxcnu6do76auprhhfomao6c273sixm"
const v0 = "QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n"

describe("canonical CID text", () => {
  it("accepts a CIDv1 in lowercase base32 and a CIDv0 in base58btc", () => {
    expect(canonicalCid(v1)).toBe(v1)
    expect(canonicalCid(v0)).toBe(v0)
  })
  it("refuses other spellings of the same CID", () => {
    expect(canonicalCid(v1.toUpperCase())).toBeUndefined()
    // lowercase multibase prefix, uppercase body: the parser accepts it, the canonical form differs
    expect(canonicalCid("b" + v1.slice(1).toUpperCase())).toBeUndefined()
    // the same CIDv1 in base58btc (multibase z)
    expect(canonicalCid("zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA")).toBeUndefined()
  })
  it("refuses what does not parse, and overlong text before parsing it", () => {
    for (const bad of ["", "nope", "Qm123", v1.slice(0, -1), `${v1}/path`, "b".repeat(129)]) {
      expect(canonicalCid(bad), bad).toBeUndefined()
    }
  })
})
