import { Either, Schema } from "effect"
import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import { KeyRequest, MgetRequest, PutRequest, ScanRequest } from "../../src/api/groups/CacheGroup.js"
import { StatementRequest } from "../../src/api/groups/SqlGroup.js"
import { ForwardedQuery } from "../../src/api/groups/InternalGroup.js"
import { decoderOf, fastCheck } from "../../src/domain/FastDecode.js"
import { strict } from "../../src/api/Wire.js"

// values a hostile or careless client sends: strings with lone surrogates and control
// characters, empty and long strings, every JSON type, nested members
const text = fc.oneof(
  fc.string(),
  fc.constantFrom("", "\uD800", "a\uDC00b", "\u0000", "x".repeat(70), "hot", "\u{1F600}")
)
const leaf = fc.oneof(
  text,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  // integers past 2^53 arrive as bigint (ExactJson.ts), some past 64 bits
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n })
)
const value = fc.oneof(leaf, fc.array(leaf, { maxLength: 3 }), fc.dictionary(text, leaf, { maxKeys: 2 }))
const names = ["dmap", "key", "value", "ttl", "keys", "match", "sql", "args", "extra", "__proto__"]
const payload = fc.oneof(
  fc.dictionary(fc.constantFrom(...names), value, { maxKeys: 5 }),
  // mostly well-formed payloads, so acceptance is exercised as much as refusal
  fc.record({ dmap: text, key: text }),
  fc.record({ dmap: text, key: text, value, ttl: fc.option(text, { nil: undefined }) }, { requiredKeys: ["dmap", "key", "value"] }),
  fc.record({ dmap: text, keys: fc.array(text, { maxLength: 4 }) }),
  fc.record({ sql: text, args: fc.array(leaf, { maxLength: 4 }) }, { requiredKeys: ["sql"] }),
  value
)

const agrees = <A, I>(schema: Schema.Schema<A, I>, inputs: fc.Arbitrary<unknown> = payload) => {
  const reference = Schema.decodeUnknownEither(schema)
  const fast = fastCheck(schema)
  const decode = decoderOf(schema)
  expect(fast).toBeDefined()
  fc.assert(
    fc.property(inputs, (input) => {
      const expected = reference(input)
      const accepted = fast?.(input)
      if (Either.isRight(expected)) {
        // the compiled check accepts everything the schema accepts, with the same output
        expect(accepted).toEqual({ value: expected.right })
      } else {
        expect(accepted).toBeUndefined()
      }
      // and the decoder answers as the schema does, issue included
      expect(decode(input)).toEqual(expected)
    }),
    { numRuns: 3000 }
  )
}

describe("FastDecode", () => {
  it("agrees with the schema on the cache payloads", () => {
    agrees(KeyRequest)
    agrees(PutRequest)
    agrees(MgetRequest)
    agrees(ScanRequest)
  })

  it("agrees with the schema on SQL statements: text, scalar and 64-bit integer arguments", () => {
    agrees(StatementRequest)
  })

  it("agrees with the schema on a forwarded query: its caller's role a union of literal unions, grants nested", () => {
    const optionalText = fc.option(text, { nil: undefined })
    const principal = fc.oneof(
      value,
      fc.record(
        {
          namespace: text,
          subject: text,
          method: fc.constantFrom("jwt", "api_key", "workload", "key"),
          role: fc.constantFrom("owner", "admin", "developer", "runtime", "reader", "user", "custom", "root", 1),
          grants: fc.oneof(fc.array(fc.record({ name: fc.constantFrom("db:write", "storage", "webrtc", "all"), pattern: optionalText }, { requiredKeys: ["name"] }), { maxLength: 3 }), value),
          keyId: optionalText,
          sessionId: optionalText,
          deviceId: optionalText,
          extra: leaf
        },
        { requiredKeys: ["namespace", "subject", "method", "role", "grants"] }
      )
    )
    const forwarded = fc.oneof(
      payload,
      fc.record(
        { database_name: fc.oneof(text, fc.constantFrom("reads", "app_db-1")), query: text, params: fc.oneof(fc.array(leaf, { maxLength: 4 }), leaf), principal, extra: leaf },
        { requiredKeys: ["database_name", "query", "params", "principal"] }
      )
    )
    agrees(ForwardedQuery, forwarded)
  })

  it("models literals, numbers, booleans and exact optional members", () => {
    agrees(strict(Schema.Struct({ dmap: Schema.Literal("a", "b"), key: Schema.optional(Schema.Number), value: Schema.Boolean })))
    // a required member that takes undefined: missing, it is refused only under `exact`
    agrees(strict(Schema.Struct({ dmap: Schema.Unknown, key: Schema.optional(Schema.String) })))
    agrees(Schema.Struct({ dmap: Schema.Unknown, key: Schema.optional(Schema.String) }).annotations({ parseOptions: { exact: true, onExcessProperty: "error" } }))
  })

  it("declines what it does not model, and the schema then decides", () => {
    // a non-strict struct drops excess members from its output; a transformation changes values
    expect(fastCheck(Schema.Struct({ a: Schema.String }))).toBeUndefined()
    expect(fastCheck(strict(Schema.Struct({ a: Schema.NumberFromString })))).toBeUndefined()
    expect(fastCheck(strict(Schema.Struct({ a: Schema.Union(Schema.String, Schema.Struct({ b: Schema.String })) })))).toBeUndefined()
    const decode = decoderOf(Schema.Struct({ a: Schema.NumberFromString }))
    expect(decode({ a: "1", b: 2 })).toEqual(Either.right({ a: 1 }))
  })
})
