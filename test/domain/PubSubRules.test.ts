import { describe, expect, it } from "vitest"
import { parseGrant } from "../../src/domain/Grants.js"
import type { Principal } from "../../src/domain/Principal.js"
import { base64Bytes, isReserved, isTopic, parseMemberMeta, parseResumePoint, reachesTopic } from "../../src/domain/PubSubRules.js"

const caller = (...grants: Array<string>): Principal => ({
  namespace: "ns",
  subject: "key:1",
  method: "api_key",
  role: "custom",
  grants: grants.map((g) => parseGrant(g)!),
  keyId: "1",
  sessionId: undefined,
  deviceId: undefined
})

describe("pub/sub rules", () => {
  it("names topics: letters, digits and . _ ~ : / @ + = -, 1-256 characters", () => {
    for (const ok of ["a", "rooms/lobby", "user:0xabc@x", "a.b_c~d+e=f-g", "x".repeat(256), "_portico/webrtc/r1"]) expect(isTopic(ok), ok).toBe(true)
    for (const bad of ["", "x".repeat(257), "has space", "a*", "a,b", "é", "a\nb", "a?b", "#"]) expect(isTopic(bad), bad).toBe(false)
    expect(isReserved("_portico/x")).toBe(true)
    expect(isReserved("_portico")).toBe(false)
    expect(isReserved("portico/x")).toBe(false)
  })

  it("reads only canonical base64, and its decoded size", () => {
    expect(base64Bytes("")).toBe(0)
    expect(base64Bytes(Buffer.from("hello").toString("base64"))).toBe(5)
    expect(base64Bytes(Buffer.from("hell").toString("base64"))).toBe(4)
    expect(base64Bytes(Buffer.from("hel").toString("base64"))).toBe(3)
    for (const bad of ["QQ", "QR==", "QUI", "QUJ=", "aGVsbG8", "a-b_", "aGVs bG8=", "====", "QQ==="]) expect(base64Bytes(bad), bad).toBeUndefined()
    for (let n = 0; n < 40; n++) {
      const text = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37) & 0xff)).toString("base64")
      expect(base64Bytes(text)).toBe(n)
    }
  })

  it("narrows by topic: pubsub:topic=<glob>, whole pubsub reaches every topic, other grants none", () => {
    expect(reachesTopic(caller("pubsub"), "anything")).toBe(true)
    expect(reachesTopic(caller("pubsub:topic=rooms/*"), "rooms/a/b")).toBe(true)
    expect(reachesTopic(caller("pubsub:topic=rooms/*"), "room")).toBe(false)
    expect(reachesTopic(caller("pubsub:topic=user/0xabc"), "user/0xabc")).toBe(true)
    expect(reachesTopic(caller("pubsub:topic=user/0xabc"), "user/0xabcd")).toBe(false)
    expect(reachesTopic(caller("pubsub:topic=a*", "pubsub:topic=b*"), "b1")).toBe(true)
    expect(reachesTopic(caller("cache"), "a")).toBe(false)
    expect(parseGrant("pubsub:key=x/*")).toBeUndefined()
    expect(parseGrant("cache:topic=x/*")).toBeUndefined()
    expect(parseGrant("storage:topic=x")).toBeUndefined()
    expect(parseGrant("pubsub:topic=a b")).toBeUndefined()
    expect(parseGrant("pubsub:topic=room1")).toEqual({ name: "pubsub", pattern: "room1" })
  })

  it("reads resume points <topic>,<epoch>,<offset>", () => {
    expect(parseResumePoint("rooms/a,AbC-_9,42")).toEqual({ topic: "rooms/a", epoch: "AbC-_9", offset: 42 })
    expect(parseResumePoint("t,e,0")).toEqual({ topic: "t", epoch: "e", offset: 0 })
    for (const bad of ["t,e", "t,e,1,2", "t,,1", ",e,1", "t,e,-1", "t,e,01", "t,e,1.5", "t,e,99999999999999999", "t e,e,1", "t,e!,1"]) {
      expect(parseResumePoint(bad), bad).toBeUndefined()
    }
  })

  it("keeps member metadata that is a JSON object of at most 1024 bytes", () => {
    expect(parseMemberMeta('{"a":1}')).toBe('{"a":1}')
    expect(parseMemberMeta(' { "a" : [1, 2] } ')).toBe('{"a":[1,2]}')
    for (const bad of ["[1]", "1", "null", '"s"', "{", `{"a":"${"x".repeat(1020)}"}`]) expect(parseMemberMeta(bad), bad.slice(0, 20)).toBeUndefined()
  })
})
