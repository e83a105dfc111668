/**
 * The console's choice of encoding for its hashed files (src/api/ConsolePage.ts): what the request's
 * Accept-Encoding allows, brotli before gzip, a coding listed with q=0 refused, `*` for the rest.
 */
import { describe, expect, it } from "vitest"
import { acceptedEncoding } from "../../src/api/ConsolePage.js"

const both = { br: true, gzip: true }

describe("acceptedEncoding", () => {
  it.each([
    [undefined, both, undefined],
    ["", both, undefined],
    ["identity", both, undefined],
    ["gzip, deflate, br", both, "br"],
    ["GZIP, BR", both, "br"],
    ["gzip, deflate, br", { br: false, gzip: true }, "gzip"],
    ["br;q=0, gzip", both, "gzip"],
    ["br; q=0.0, gzip;q=0", both, undefined],
    ["*", both, "br"],
    ["*, br;q=0", both, "gzip"],
    ["*;q=0", both, undefined],
    ["gzip;q=0.5", { br: true, gzip: false }, undefined],
    ["br;q=nonsense, gzip", both, "gzip"]
  ] as const)("%j with %j offered gives %j", (header, offered, expected) => {
    expect(acceptedEncoding(header, offered)).toBe(expected)
  })
})
