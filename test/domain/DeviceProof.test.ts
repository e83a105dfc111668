/**
 * Device proofs against an independent client: the proof message is built here from the spec's
 * wording, signed with Node's crypto (WebCrypto r||s, crypto.sign DER, Ed25519), and the nonce
 * key's hash is recomputed with node:crypto.
 */
import { Effect, Either, Schema } from "effect"
import { createHash, generateKeyPairSync, sign as nodeSign, webcrypto, type KeyObject } from "node:crypto"
import { describe, expect, it } from "vitest"
import { type DeviceKey, parseDeviceKey } from "../../src/domain/DeviceKey.js"
import {
  checkProof,
  type CheckProofInput,
  decodeProofJson,
  WrittenProof,
  DeviceProof,
  type DeviceProofAction,
  DeviceProofInvalid,
  proofMessage,
  proofNonceExpiresAt,
  proofNonceKey
} from "../../src/domain/DeviceProof.js"
import { parseStrictJson } from "../../src/domain/StrictJson.js"

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))
const b64u = (bytes: Uint8Array | Buffer): string => Buffer.from(bytes).toString("base64url")

const NOW_S = 1_760_000_000
const NOW = NOW_S * 1000
const NS = "acme-prod"
const REFRESH = "dv1_3q2-9fKx_refresh_token_value"
const ID = "Zr1x_-Kq0pLm9sT2uV"

/** The signed text exactly as spec §2.5 describes it, written independently of the module. */
const specMessage = (action: string, namespace: string, binding: string, iat: number, id: string): string =>
  `portico-device-proof-v1\n${action}\n${namespace}\n${binding}\n${iat}\n${id}`

interface Device {
  readonly key: DeviceKey
  readonly sign: (message: string) => Promise<string>
}

const asKey = async (jwk: unknown): Promise<DeviceKey> => {
  const result = await run(parseDeviceKey(jwk))
  if (Either.isLeft(result)) expect.fail(result.left.reason)
  return result.right
}

const webP256Device = async (): Promise<Device> => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const key = await asKey(await webcrypto.subtle.exportKey("jwk", pair.publicKey))
  return {
    key,
    sign: async (message) =>
      b64u(
        new Uint8Array(
          await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(message))
        )
      )
  }
}
const nodeDevice = async (type: "p256-der" | "ed25519"): Promise<Device> => {
  const { privateKey, publicKey }: { privateKey: KeyObject; publicKey: KeyObject } =
    type === "ed25519" ? generateKeyPairSync("ed25519") : generateKeyPairSync("ec", { namedCurve: "P-256" })
  const key = await asKey(publicKey.export({ format: "jwk" }))
  const digest = type === "ed25519" ? null : "sha256"
  return { key, sign: async (message) => b64u(nodeSign(digest, Buffer.from(message), privateKey)) }
}

const makeProof = async (
  device: Device,
  action: string,
  namespace: string,
  binding: string,
  iat: number,
  id: string = ID
) => ({ iat, id, sig: await device.sign(specMessage(action, namespace, binding, iat, id)) })

const check = (device: Device, proof: unknown, over: Partial<CheckProofInput> = {}) =>
  run(checkProof({ proof, action: "refresh", namespace: NS, binding: REFRESH, key: device.key, now: NOW, ...over }))

const expectRefused = async (
  result: Either.Either<unknown, DeviceProofInvalid>,
  kind: DeviceProofInvalid["kind"]
): Promise<void> => {
  if (Either.isRight(result)) expect.fail(`expected refusal (${kind})`)
  expect(result.left).toBeInstanceOf(DeviceProofInvalid)
  expect(result.left.kind).toBe(kind)
  expect(result.left.code).toBe("DEVICE_PROOF_INVALID")
  expect(result.left.status).toBe(401)
}

describe("proofMessage", () => {
  it("joins label, action, namespace, binding, iat and id by LF without a trailing newline", async () => {
    const result = await run(proofMessage("approve", NS, "WDJB-MJHT", NOW_S, ID))
    expect(result).toEqual(Either.right(specMessage("approve", NS, "WDJB-MJHT", NOW_S, ID)))
    expect(Either.isRight(result) && result.right.endsWith("\n")).toBe(false)
    expect(Either.isRight(result) && result.right.split("\n")).toEqual([
      "portico-device-proof-v1",
      "approve",
      NS,
      "WDJB-MJHT",
      String(NOW_S),
      ID
    ])
  })

  it.each([
    ["namespace", (s: string) => proofMessage("refresh", s, REFRESH, NOW_S, ID)],
    ["binding", (s: string) => proofMessage("refresh", NS, s, NOW_S, ID)],
    ["id", (s: string) => proofMessage("refresh", NS, REFRESH, NOW_S, s)]
  ])("refuses a line feed or carriage return in the %s", async (_name, build) => {
    await expectRefused(await run(build("a\nb")), "malformed")
    await expectRefused(await run(build("a\rb")), "malformed")
    await expectRefused(await run(build("ab\n")), "malformed")
    await expectRefused(await run(build("")), "malformed")
    expect(Either.isRight(await run(build("ab")))).toBe(true)
  })

  it("refuses an unknown action and a non-integer iat", async () => {
    await expectRefused(await run(proofMessage("login" as DeviceProofAction, NS, REFRESH, NOW_S, ID)), "malformed")
    await expectRefused(await run(proofMessage("refresh", NS, REFRESH, 1.5, ID)), "malformed")
    await expectRefused(await run(proofMessage("refresh", NS, REFRESH, -1, ID)), "malformed")
  })
})

describe("checkProof", () => {
  it.each([
    ["WebCrypto P-256 (r||s)", webP256Device],
    ["Node P-256 (DER)", () => nodeDevice("p256-der")],
    ["Node Ed25519", () => nodeDevice("ed25519")]
  ])("accepts a fresh proof from %s, for every action", async (_name, make) => {
    const device = await make()
    const actions: ReadonlyArray<DeviceProofAction> = ["refresh", "approve", "claim", "revoke", "end-session"]
    for (const action of actions) {
      const proof = await makeProof(device, action, NS, REFRESH, NOW_S)
      const result = await check(device, proof, { action })
      expect(Either.isRight(result), action).toBe(true)
      if (Either.isRight(result)) {
        expect(result.right.proof).toEqual(proof)
        expect(result.right.nonceKey).toBe(proofNonceKey(action, NS, REFRESH, ID))
      }
    }
  })

  it("accepts iat exactly 60 s away either way and refuses 61 s", async () => {
    const device = await nodeDevice("ed25519")
    for (const offset of [-60, 60, 0, -1, 1]) {
      const result = await check(device, await makeProof(device, "refresh", NS, REFRESH, NOW_S + offset))
      expect(Either.isRight(result), `offset ${offset}`).toBe(true)
    }
    for (const offset of [-61, 61, -3600, 3600]) {
      await expectRefused(await check(device, await makeProof(device, "refresh", NS, REFRESH, NOW_S + offset)), "stale")
    }
    // Sub-second clock: 60.5 s after iat is past the window.
    await expectRefused(
      await check(device, await makeProof(device, "refresh", NS, REFRESH, NOW_S - 60), { now: NOW + 500 }),
      "stale"
    )
  })

  it("refuses a proof for another action, binding, namespace, id or iat", async () => {
    const device = await webP256Device()
    const proof = await makeProof(device, "refresh", NS, REFRESH, NOW_S)
    expect(Either.isRight(await check(device, proof))).toBe(true)
    await expectRefused(await check(device, proof, { action: "revoke" }), "bad_signature")
    await expectRefused(await check(device, proof, { binding: `${REFRESH}x` }), "bad_signature")
    await expectRefused(await check(device, proof, { namespace: "acme-staging" }), "bad_signature")
    await expectRefused(await check(device, { ...proof, id: `${ID}x` }), "bad_signature")
    await expectRefused(await check(device, { ...proof, iat: NOW_S + 1 }), "bad_signature")
  })

  it("refuses a proof signed by another device or over another label", async () => {
    const a = await nodeDevice("ed25519")
    const b = await nodeDevice("ed25519")
    await expectRefused(await check(b, await makeProof(a, "refresh", NS, REFRESH, NOW_S)), "bad_signature")
    const wrongLabel = {
      iat: NOW_S,
      id: ID,
      sig: await a.sign(`svc-device-proof-v1\nrefresh\n${NS}\n${REFRESH}\n${NOW_S}\n${ID}`)
    }
    await expectRefused(await check(a, wrongLabel), "bad_signature")
    const trailing = { iat: NOW_S, id: ID, sig: await a.sign(`${specMessage("refresh", NS, REFRESH, NOW_S, ID)}\n`) }
    await expectRefused(await check(a, trailing), "bad_signature")
  })

  it("refuses a proof whose binding contains a line feed", async () => {
    const device = await nodeDevice("ed25519")
    const proof = await makeProof(device, "refresh", NS, "a\nb", NOW_S)
    await expectRefused(await check(device, proof, { binding: "a\nb" }), "malformed")
  })

  it("refuses ids that are too short, too long or have other characters", async () => {
    const device = await nodeDevice("ed25519")
    for (const id of ["a".repeat(16), "Z".repeat(128), "0123456789_-abcdEF"]) {
      expect(Either.isRight(await check(device, await makeProof(device, "refresh", NS, REFRESH, NOW_S, id))), id).toBe(true)
    }
    for (const id of ["a".repeat(15), "a".repeat(129), "abcdefghijklmnop.", "abcdefghijklmnop+", "abcdefgh ijklmnop", "abcdefghijklmnopé", ""]) {
      await expectRefused(await check(device, await makeProof(device, "refresh", NS, REFRESH, NOW_S, id)), "malformed")
    }
  })

  it("refuses malformed proofs", async () => {
    const device = await nodeDevice("ed25519")
    const proof = await makeProof(device, "refresh", NS, REFRESH, NOW_S)
    const bad: ReadonlyArray<unknown> = [
      null,
      "proof",
      [proof],
      { ...proof, extra: 1 },
      { iat: proof.iat, id: proof.id },
      { iat: proof.iat, sig: proof.sig },
      { id: proof.id, sig: proof.sig },
      { ...proof, iat: String(proof.iat) },
      { ...proof, iat: proof.iat + 0.5 },
      { ...proof, iat: -1 },
      { ...proof, sig: `${proof.sig}=` },
      { ...proof, sig: proof.sig.replace(/-/g, "+").replace(/_/g, "/") + "+" },
      { ...proof, sig: "" },
      { ...proof, sig: "A".repeat(500) }
    ]
    for (const value of bad) await expectRefused(await check(device, value), "malformed")
  })

  it("refuses bit flips of the proof signature", async () => {
    const device = await webP256Device()
    const proof = await makeProof(device, "claim", NS, "device-code-123", NOW_S)
    expect(Either.isRight(await check(device, proof, { action: "claim", binding: "device-code-123" }))).toBe(true)
    const raw = Buffer.from(proof.sig, "base64url")
    for (let bit = 0; bit < raw.length * 8; bit += 11) {
      const flipped = Buffer.from(raw)
      flipped[bit >> 3] = (flipped[bit >> 3] ?? 0) ^ (1 << (bit & 7))
      const result = await check(device, { ...proof, sig: b64u(flipped) }, { action: "claim", binding: "device-code-123" })
      await expectRefused(result, "bad_signature")
    }
  })

  it("refuses unknown members even through the schema's default decoding", () => {
    const decode = Schema.decodeUnknownEither(DeviceProof)
    expect(Either.isRight(decode({ iat: NOW_S, id: ID, sig: "AAAA" }))).toBe(true)
    expect(Either.isLeft(decode({ iat: NOW_S, id: ID, sig: "AAAA", alg: "none" }))).toBe(true)
  })
})

describe("proof nonce key", () => {
  it("is action:sha256hex(namespace LF binding):id, never holding the raw binding", () => {
    const key = proofNonceKey("refresh", NS, REFRESH, ID)
    const hash = createHash("sha256").update(`${NS}\n${REFRESH}`, "utf8").digest("hex")
    expect(key).toBe(`refresh:${hash}:${ID}`)
    expect(key).not.toContain(REFRESH)
  })

  it("differs per action, binding, namespace and id", () => {
    const base = proofNonceKey("refresh", NS, REFRESH, ID)
    expect(proofNonceKey("revoke", NS, REFRESH, ID)).not.toBe(base)
    expect(proofNonceKey("refresh", NS, `${REFRESH}2`, ID)).not.toBe(base)
    expect(proofNonceKey("refresh", "other-ns", REFRESH, ID)).not.toBe(base)
    expect(proofNonceKey("refresh", NS, REFRESH, `${ID}2`)).not.toBe(base)
  })

  it("must be kept until the proof can no longer be fresh", async () => {
    const device = await nodeDevice("ed25519")
    const iat = NOW_S
    const until = proofNonceExpiresAt(iat)
    // Still fresh one millisecond before the nonce may be forgotten, stale right after.
    const lastFresh = (iat + 60) * 1000
    expect(until).toBeGreaterThan(lastFresh)
    const proof = await makeProof(device, "refresh", NS, REFRESH, iat)
    expect(Either.isRight(await check(device, proof, { now: lastFresh }))).toBe(true)
    await expectRefused(await check(device, proof, { now: until }), "stale")
  })
})

describe("strict JSON", () => {
  const parse = (text: string) => run(parseStrictJson(text))

  it("parses what JSON.parse parses when keys are unique", async () => {
    for (const text of [
      '{"iat":1760000000,"id":"Zr1x_-Kq0pLm9sT2uV","sig":"AAAA"}',
      ' { "a" : [1, -2.5e3, true, false, null, "x\\"y\\u00e9"], "b": {"a": {"a": []}} } ',
      "[]",
      '"text"',
      "0",
      '{"a":1,"A":2,"a ":3}'
    ]) {
      expect(await parse(text)).toEqual(Either.right(JSON.parse(text)))
    }
  })

  it.each([
    ['{"iat":1,"iat":2}', "top level"],
    ['{"i\\u0061t":1,"iat":2}', "escaped spelling of the same key"],
    ['{"a\\/b":1,"a/b":2}', "escaped solidus"],
    ['{"outer":{"k":1,"k":1}}', "nested object"],
    ['[{"ok":1},{"k":1,"x":2,"k":3}]', "object inside an array"],
    ['{"a":{"b":[{"c":{"d":1,"d":2}}]}}', "deep"]
  ])("refuses duplicate keys: %s (%s)", async (text) => {
    const result = await parse(text)
    expect(Either.isLeft(result) && result.left.reason).toMatch(/duplicate key/)
  })

  it("refuses text that is not JSON or breaks the limits", async () => {
    for (const text of [
      "",
      "{",
      '{"a":1,}',
      "[1,]",
      "{'a':1}",
      '{"a":01}',
      '{"a":1} x',
      '{"a":NaN}',
      '{"a":"\u0001"}',
      '{"a":"\\x41"}',
      '{"a" 1}',
      "tru",
      "-",
      "1.",
      '{"a":1}{"b":2}'
    ]) {
      expect(Either.isLeft(await parse(text)), JSON.stringify(text)).toBe(true)
    }
    expect(Either.isLeft(await parse(`${"[".repeat(40)}${"]".repeat(40)}`))).toBe(true)
    expect(Either.isRight(await parse(`${"[".repeat(10)}${"]".repeat(10)}`))).toBe(true)
    expect(Either.isLeft(await run(parseStrictJson('"abc"', { maxChars: 4, maxDepth: 4 })))).toBe(true)
  })

  it("reads a proof from JSON text, refusing duplicates and unknown members", async () => {
    const ok = await run(decodeProofJson(`{"iat":${NOW_S},"id":"${ID}","sig":"AAAA"}`))
    expect(ok).toEqual(Either.right({ iat: NOW_S, id: ID, sig: "AAAA" }))
    await expectRefused(await run(decodeProofJson(`{"iat":${NOW_S},"id":"${ID}","sig":"AAAA","iat":${NOW_S}}`)), "malformed")
    await expectRefused(await run(decodeProofJson(`{"iat":${NOW_S},"id":"${ID}","id":"${ID}x","sig":"AAAA"}`)), "malformed")
    await expectRefused(await run(decodeProofJson(`{"iat":${NOW_S},"id":"${ID}","sig":"AAAA","x":1}`)), "malformed")
    await expectRefused(await run(decodeProofJson(`{"iat":${NOW_S},"id":"${ID}"}`)), "malformed")
    // the refusal names the member and its problem on one line, never the schema's tree
    const short = await run(decodeProofJson(`{"iat":${NOW_S},"id":"aaaaaaaaaaaaaaa","sig":"AAAA"}`))
    if (Either.isRight(short)) expect.fail("a 15-character id was taken")
    expect(short.left.reason).toMatch(/^the device proof is malformed: id: /)
    expect(short.left.reason).not.toMatch(/\n|DeviceProof|refinement/)
  })

  it("takes only an integer literal for iat, though JSON.parse reads other spellings as the same integer", async () => {
    const device = await nodeDevice("p256-der")
    const proof = await makeProof(device, "refresh", NS, REFRESH, NOW_S)
    const text = (iat: string) => `{"iat":${iat},"id":"${proof.id}","sig":"${proof.sig}"}`
    expect(Either.isRight(await run(decodeProofJson(text(String(NOW_S)))))).toBe(true)
    for (const iat of [`${NOW_S / 1e9}e9`, `${NOW_S}.000`, `${NOW_S}.0`, `${NOW_S}E0`, `${NOW_S}e+0`, `${NOW_S * 10}e-1`]) {
      expect(JSON.parse(text(iat)).iat, iat).toBe(NOW_S)
      await expectRefused(await run(decodeProofJson(text(iat))), "malformed")
      // as a request body brings it: the decoded value with iat's source text
      await expectRefused(await check(device, new WrittenProof(JSON.parse(text(iat)), iat)), "malformed")
    }
    // written as an integer, the same proof passes both ways
    expect(Either.isRight(await check(device, new WrittenProof(proof, String(NOW_S))))).toBe(true)
    expect(Either.isRight(await check(device, proof))).toBe(true)
  })

  it("feeds checkProof end to end from JSON text", async () => {
    const device = await nodeDevice("p256-der")
    const proof = await makeProof(device, "end-session", NS, "sess_42", NOW_S)
    const decoded = await run(decodeProofJson(JSON.stringify(proof)))
    expect(Either.isRight(decoded)).toBe(true)
    if (Either.isRight(decoded)) {
      const result = await check(device, decoded.right, { action: "end-session", binding: "sess_42" })
      expect(Either.isRight(result)).toBe(true)
    }
  })
})
