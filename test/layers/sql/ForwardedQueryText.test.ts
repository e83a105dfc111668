/** The forwarded query's body, written directly, is exactly the canonical JSON of its encoded payload (what both ends MAC). */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { ForwardedQuery } from "../../../src/api/groups/InternalGroup.js"
import { forwardedPrincipal, type Principal } from "../../../src/domain/Principal.js"
import { canonicalJson } from "../../../src/layers/coordination/Coordination.js"
import { forwardedQueryText } from "../../../src/layers/sql/HomeNode.js"

const encode = Schema.encodeUnknownSync(ForwardedQuery)

const key: Principal = { namespace: "ns", subject: "key:1", method: "api_key", role: "developer", grants: [{ name: "storage", pattern: "a*" }, { name: "db:write", pattern: undefined }], keyId: "k1", sessionId: undefined, deviceId: undefined }
const session: Principal = { namespace: "ns", subject: "0xabc", method: "jwt", role: "owner", grants: [], keyId: undefined, sessionId: "s", deviceId: "d" }

describe("forwardedQueryText", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string | number | bigint | boolean | null>]> = [
    ["SELECT 1", []],
    ["SELECT ?, ?, ?", ["plain", 42, null]],
    ["SELECT ?", ["quotes \" and \\ and \n and \u0001 and é and 😀 and \u2028"]],
    ["SELECT ?, ?, ?, ?", [1.5, -0, 0.1 + 0.2, 1e-7]],
    ["SELECT ?, ?, ?", [2 ** 53 + 2, 3e18, -1.5e19]],
    ["SELECT ?, ?", [Infinity, -Infinity]],
    ["SELECT ?, ?", [12345678901234567890n > 2n ** 63n ? 2n ** 62n : 12345678901234567890n, -(2n ** 63n)]],
    ["SELECT ?", [true]]
  ]
  for (const caller of [key, session]) {
    for (const [query, params] of cases) {
      it(`${caller.method}: ${query} ${params.map(String).join(", ")}`, () => {
        const payload = { database_name: "reads", query, params }
        const expected = canonicalJson(encode({ ...payload, principal: forwardedPrincipal(caller) }))
        expect(forwardedQueryText(caller, payload)).toBe(expected)
      })
    }
  }
})
