/**
 * Device keys against an independent client: keys made and signatures produced by Node's crypto
 * (WebCrypto ECDSA gives r||s, crypto.sign gives DER), thumbprints expected from jose.
 */
import { ed25519 } from "@noble/curves/ed25519"
import { Effect, Either } from "effect"
import { calculateJwkThumbprint } from "jose"
import { createHash, generateKeyPairSync, sign as nodeSign, webcrypto, type KeyObject } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  assertDeviceId,
  decodeBase64Url,
  type DeviceKey,
  DeviceKeyInvalid,
  DeviceSignatureInvalid,
  parseDeviceKey,
  verifyDeviceSignature
} from "../../src/domain/DeviceKey.js"

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))
const b64u = (bytes: Uint8Array | Buffer): string => Buffer.from(bytes).toString("base64url")
const fromHex = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex, "hex"))

// P-256 group order, to turn a signature into its high-S twin.
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n

const parsed = async (jwk: unknown): Promise<DeviceKey> => {
  const result = await run(parseDeviceKey(jwk))
  if (Either.isLeft(result)) expect.fail(`expected a valid key, got: ${result.left.reason}`)
  return result.right
}

const refusedKey = async (jwk: unknown): Promise<DeviceKeyInvalid> => {
  const result = await run(parseDeviceKey(jwk))
  if (Either.isRight(result)) expect.fail("expected the key to be refused")
  expect(result.left).toBeInstanceOf(DeviceKeyInvalid)
  expect(result.left.code).toBe("DEVICE_KEY_INVALID")
  expect(result.left.status).toBe(400)
  return result.left
}

const verifies = async (key: DeviceKey, message: string | Uint8Array, sig: string): Promise<boolean> => {
  const result = await run(verifyDeviceSignature(key, message, sig))
  if (Either.isLeft(result)) {
    expect(result.left).toBeInstanceOf(DeviceSignatureInvalid)
    expect(result.left.code).toBe("DEVICE_SIGNATURE_INVALID")
    expect(result.left.status).toBe(401)
    return false
  }
  return true
}

const nodeP256 = () => {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
  return { privateKey, jwk: publicKey.export({ format: "jwk" }) }
}
const nodeEd25519 = () => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519")
  return { privateKey, jwk: publicKey.export({ format: "jwk" }) }
}
const webP256 = async () => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = await webcrypto.subtle.exportKey("jwk", pair.publicKey)
  const signRaw = async (message: string): Promise<Uint8Array> =>
    new Uint8Array(
      await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(message))
    )
  return { jwk, signRaw }
}
const derSign = (privateKey: KeyObject, message: string): Buffer => nodeSign("sha256", Buffer.from(message), privateKey)
const edSign = (privateKey: KeyObject, message: string): Buffer => nodeSign(null, Buffer.from(message), privateKey)

const MESSAGE = "example.org wants you to sign in with your Ethereum account:\nline two"

describe("parseDeviceKey", () => {
  it("accepts a WebCrypto P-256 JWK (with key_ops and ext) and computes the jose thumbprint", async () => {
    const { jwk } = await webP256()
    expect(jwk.key_ops).toBeDefined()
    const key = await parsed(jwk)
    expect(key.alg).toBe("ES256")
    expect(key.id).toBe(await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0]))
    expect(key.id).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(key.jwk).toEqual({ kty: "EC", crv: "P-256", x: jwk.x, y: jwk.y })
    expect(key.publicKey.length).toBe(65)
  })

  it("accepts a Node Ed25519 JWK and computes the jose thumbprint", async () => {
    const { jwk } = nodeEd25519()
    const key = await parsed({ ...jwk, alg: "EdDSA", use: "sig", kid: "k1" })
    expect(key.alg).toBe("EdDSA")
    expect(key.id).toBe(await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0]))
    expect(key.jwk).toEqual({ kty: "OKP", crv: "Ed25519", x: jwk.x })
  })

  it("ignores tolerated members in the id: same key, same id", async () => {
    const { jwk } = nodeP256()
    const plain = await parsed(jwk)
    const decorated = await parsed({ ...jwk, alg: "ES256", use: "sig", kid: "anything", key_ops: ["verify"], ext: true })
    expect(decorated.id).toBe(plain.id)
  })

  it("refuses private JWKs", async () => {
    const p = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" })
    expect(p.d).toBeDefined()
    expect((await refusedKey(p)).reason).toMatch(/private/)
    const e = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" })
    expect((await refusedKey(e)).reason).toMatch(/private/)
  })

  it("refuses other key types, curves and shapes", async () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" })
    await refusedKey(rsa)
    await refusedKey(generateKeyPairSync("ec", { namedCurve: "P-384" }).publicKey.export({ format: "jwk" }))
    await refusedKey(generateKeyPairSync("ec", { namedCurve: "secp256k1" }).publicKey.export({ format: "jwk" }))
    await refusedKey(generateKeyPairSync("x25519").publicKey.export({ format: "jwk" }))
    const { jwk: ec } = nodeP256()
    const { jwk: ed } = nodeEd25519()
    await refusedKey({ ...ec, kty: "ec" })
    await refusedKey({ ...ec, crv: "p-256" })
    await refusedKey({ ...ec, kty: "OKP" })
    await refusedKey({ ...ed, kty: "EC" })
    await refusedKey({ ...ed, crv: "Ed448" })
    await refusedKey({ kty: "EC", crv: "P-256", x: ec.x })
    await refusedKey({ kty: "OKP", crv: "Ed25519" })
    await refusedKey({ ...ed, y: ec.y })
    await refusedKey({ ...ec, foo: 1 })
    await refusedKey({ ...ec, x: 5 })
    for (const bad of [null, undefined, "key", 42, [ec], {}]) await refusedKey(bad)
  })

  it("refuses coordinates of the wrong length or spelling", async () => {
    const { jwk: ec } = nodeP256()
    const { jwk: ed } = nodeEd25519()
    const x = decodeBase64Url(String(ec.x)) ?? new Uint8Array()
    await refusedKey({ ...ec, x: b64u(x.subarray(1)) })
    await refusedKey({ ...ec, x: b64u(Buffer.concat([Buffer.from([0]), x])) })
    await refusedKey({ ...ec, x: `${String(ec.x)}=` })
    await refusedKey({ ...ec, x: Buffer.from(x).toString("base64") + "+/" })
    const edx = decodeBase64Url(String(ed.x)) ?? new Uint8Array()
    await refusedKey({ ...ed, x: b64u(edx.subarray(0, 31)) })
    await refusedKey({ ...ed, x: b64u(Buffer.concat([edx, Buffer.from([0])])) })
    // Same bytes, but the last character carries non-zero unused bits: a second spelling.
    const s = String(ed.x)
    const last = s.charAt(42)
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    const twin = s.slice(0, 42) + alphabet.charAt(alphabet.indexOf(last) + 1)
    expect(Buffer.from(twin, "base64url").equals(Buffer.from(s, "base64url"))).toBe(true)
    await refusedKey({ ...ed, x: twin })
  })

  it("refuses a P-256 point that is not on the curve", async () => {
    const { jwk } = nodeP256()
    const y = decodeBase64Url(String(jwk.y)) ?? new Uint8Array()
    const flipped = Uint8Array.from(y)
    flipped[31] = (flipped[31] ?? 0) ^ 1
    expect((await refusedKey({ ...jwk, y: b64u(flipped) })).reason).toMatch(/curve/)
    await refusedKey({ ...jwk, x: b64u(new Uint8Array(32)), y: b64u(new Uint8Array(32)) })
    // x = y = p (out of the field) is refused, too.
    const p = fromHex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")
    await refusedKey({ ...jwk, x: b64u(p), y: b64u(p) })
  })

  // The 14 small-order encodings: the 8 points of order dividing 8 in canonical form, then the six
  // non-canonical spellings (y >= p, or x = 0 with the sign bit set). Little-endian hex, as in
  // libsodium's blocklist (which masks the sign bit) and "Taming the many EdDSAs" (Chalkias et al.).
  // The third column is the rule expected to refuse each one, so every layer is exercised.
  const SMALL_ORDER: ReadonlyArray<readonly [string, string, RegExp]> = [
    ["0100000000000000000000000000000000000000000000000000000000000000", "identity (order 1)", /small order/],
    ["ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "y = p-1 (order 2)", /small order/],
    ["0000000000000000000000000000000000000000000000000000000000000000", "y = 0, x even (order 4)", /small order/],
    ["0000000000000000000000000000000000000000000000000000000000000080", "y = 0, x odd (order 4)", /small order/],
    ["26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", "order 8", /small order/],
    ["26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", "order 8, x odd", /small order/],
    ["c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", "order 8", /small order/],
    ["c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", "order 8, x odd", /small order/],
    ["0100000000000000000000000000000000000000000000000000000000000080", "identity, x = -0 (non-canonical)", /not a point/],
    ["ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "y = p-1, x = -0 (non-canonical)", /not a point/],
    ["edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "y = p = 0 (non-canonical)", /canonical/],
    ["edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "y = p = 0, x odd (non-canonical)", /canonical/],
    ["eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "y = p+1 = 1 (non-canonical)", /canonical/],
    ["eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "y = p+1 = 1, x = -0 (non-canonical)", /canonical/]
  ]

  it("has a table of 14 distinct encodings that all decode (leniently) to small-order points", () => {
    expect(new Set(SMALL_ORDER.map(([hex]) => hex)).size).toBe(14)
    for (const [hex, label] of SMALL_ORDER) {
      // zip215 decoding accepts non-canonical spellings, so every entry is checked as a point.
      const point = ed25519.Point.fromBytes(fromHex(hex), true)
      expect(point.isSmallOrder(), label).toBe(true)
    }
    // Eight distinct points, as the torsion subgroup has.
    const points = new Set(SMALL_ORDER.map(([hex]) => ed25519.Point.fromBytes(fromHex(hex), true).toHex()))
    expect(points.size).toBe(8)
  })

  it.each(SMALL_ORDER)("refuses the small-order Ed25519 encoding %s (%s)", async (hex, _label, rule) => {
    expect((await refusedKey({ kty: "OKP", crv: "Ed25519", x: b64u(fromHex(hex)) })).reason).toMatch(rule)
  })

  it("refuses an honest Ed25519 key with a torsion component added, and accepts the key itself", async () => {
    const { jwk } = nodeEd25519()
    await parsed(jwk)
    const honest = ed25519.Point.fromBytes(decodeBase64Url(String(jwk.x)) ?? new Uint8Array(), false)
    const torsion = ed25519.Point.fromBytes(fromHex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), false)
    const mixed = honest.add(torsion)
    expect(mixed.isSmallOrder()).toBe(false)
    await refusedKey({ ...jwk, x: b64u(mixed.toBytes()) })
  })

  it("refuses a non-canonical y even when the point is not small order", async () => {
    // y = p + 3 spells y = 3, a point on the curve that is not of small order.
    const bytes = fromHex("f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
    expect(ed25519.Point.fromBytes(bytes, true).isSmallOrder()).toBe(false)
    expect((await refusedKey({ kty: "OKP", crv: "Ed25519", x: b64u(bytes) })).reason).toMatch(/canonical/)
  })

  it("checks the id the caller named", async () => {
    const key = await parsed(nodeEd25519().jwk)
    expect(Either.isRight(await run(assertDeviceId(key, key.id)))).toBe(true)
    const other = await parsed(nodeEd25519().jwk)
    const result = await run(assertDeviceId(key, other.id))
    expect(Either.isLeft(result) && result.left.code).toBe("DEVICE_KEY_INVALID")
  })
})

describe("verifyDeviceSignature: ES256", () => {
  it("accepts WebCrypto r||s signatures", async () => {
    const device = await webP256()
    const key = await parsed(device.jwk)
    const sig = await device.signRaw(MESSAGE)
    expect(sig.length).toBe(64)
    expect(await verifies(key, MESSAGE, b64u(sig))).toBe(true)
    expect(await verifies(key, new TextEncoder().encode(MESSAGE), b64u(sig))).toBe(true)
  })

  it("accepts Node DER signatures", async () => {
    const { privateKey, jwk } = nodeP256()
    const key = await parsed(jwk)
    for (let i = 0; i < 16; i++) {
      const der = derSign(privateKey, `${MESSAGE} ${i}`)
      expect(der[0]).toBe(0x30)
      expect(await verifies(key, `${MESSAGE} ${i}`, b64u(der))).toBe(true)
    }
  })

  it("accepts both low-S and high-S forms of the same signature", async () => {
    const device = await webP256()
    const key = await parsed(device.jwk)
    const sig = await device.signRaw(MESSAGE)
    const s = BigInt(`0x${Buffer.from(sig.subarray(32)).toString("hex")}`)
    const twin = Buffer.concat([sig.subarray(0, 32), Buffer.from((P256_N - s).toString(16).padStart(64, "0"), "hex")])
    expect(await verifies(key, MESSAGE, b64u(sig))).toBe(true)
    expect(await verifies(key, MESSAGE, b64u(twin))).toBe(true)
    expect(await verifies(key, "another message", b64u(twin))).toBe(false)
  })

  it("refuses the wrong key and the wrong message", async () => {
    const a = await webP256()
    const b = await webP256()
    const sig = b64u(await a.signRaw(MESSAGE))
    expect(await verifies(await parsed(b.jwk), MESSAGE, sig)).toBe(false)
    expect(await verifies(await parsed(a.jwk), `${MESSAGE}.`, sig)).toBe(false)
    expect(await verifies(await parsed(a.jwk), "", sig)).toBe(false)
  })

  it("refuses every single-bit flip of an r||s and a DER signature", async () => {
    const device = await webP256()
    const key = await parsed(device.jwk)
    const raw = await device.signRaw(MESSAGE)
    for (let bit = 0; bit < raw.length * 8; bit += 7) {
      const flipped = Uint8Array.from(raw)
      flipped[bit >> 3] = (flipped[bit >> 3] ?? 0) ^ (1 << (bit & 7))
      expect(await verifies(key, MESSAGE, b64u(flipped)), `raw bit ${bit}`).toBe(false)
    }
    const { privateKey, jwk } = nodeP256()
    const derKey = await parsed(jwk)
    const der = derSign(privateKey, MESSAGE)
    for (let bit = 0; bit < der.length * 8; bit += 5) {
      const flipped = Buffer.from(der)
      flipped[bit >> 3] = (flipped[bit >> 3] ?? 0) ^ (1 << (bit & 7))
      expect(await verifies(derKey, MESSAGE, b64u(flipped)), `der bit ${bit}`).toBe(false)
    }
  })

  it("refuses DER with trailing bytes, non-minimal lengths or padded integers", async () => {
    const { privateKey, jwk } = nodeP256()
    const key = await parsed(jwk)
    const der = derSign(privateKey, MESSAGE)
    expect(await verifies(key, MESSAGE, b64u(der))).toBe(true)
    expect(await verifies(key, MESSAGE, b64u(Buffer.concat([der, Buffer.from([0])])))).toBe(false)
    expect(await verifies(key, MESSAGE, b64u(Buffer.concat([der, Buffer.from([0x30, 0x00])])))).toBe(false)
    // SEQUENCE length in long form (0x81 len) where the short form fits: not DER.
    const longForm = Buffer.concat([Buffer.from([0x30, 0x81, der[1] ?? 0]), der.subarray(2)])
    expect(await verifies(key, MESSAGE, b64u(longForm))).toBe(false)
    // An extra 0x00 before r where none is needed.
    const rLen = der[3] ?? 0
    const r = der.subarray(4, 4 + rLen)
    const rest = der.subarray(4 + rLen)
    const padded = Buffer.concat([Buffer.from([0x30, (der[1] ?? 0) + 1, 0x02, rLen + 1, 0x00]), r, rest])
    expect(await verifies(key, MESSAGE, b64u(padded))).toBe(false)
    // Bytes after s inside the SEQUENCE.
    const inner = Buffer.concat([Buffer.from([0x30, (der[1] ?? 0) + 1]), der.subarray(2), Buffer.from([0])])
    expect(await verifies(key, MESSAGE, b64u(inner))).toBe(false)
  })

  it("refuses malformed base64url and wrong lengths", async () => {
    const device = await webP256()
    const key = await parsed(device.jwk)
    const sig = await device.signRaw(MESSAGE)
    const good = b64u(sig)
    expect(await verifies(key, MESSAGE, good)).toBe(true)
    expect(await verifies(key, MESSAGE, `${good}=`)).toBe(false)
    // Standard base64 pads 64 bytes with "=" (and may use + and /): never accepted.
    expect(await verifies(key, MESSAGE, Buffer.from(sig).toString("base64"))).toBe(false)
    expect(await verifies(key, MESSAGE, `${good.slice(0, 10)}*${good.slice(11)}`)).toBe(false)
    expect(await verifies(key, MESSAGE, ` ${good}`)).toBe(false)
    expect(await verifies(key, MESSAGE, "")).toBe(false)
    expect(await verifies(key, MESSAGE, b64u(sig.subarray(0, 63)))).toBe(false)
    expect(await verifies(key, MESSAGE, b64u(Buffer.concat([sig, Buffer.from([0])])))).toBe(false)
    expect(await verifies(key, MESSAGE, "A".repeat(4000))).toBe(false)
  })
})

describe("verifyDeviceSignature: Ed25519", () => {
  it("accepts Node Ed25519 signatures", async () => {
    const { privateKey, jwk } = nodeEd25519()
    const key = await parsed(jwk)
    expect(await verifies(key, MESSAGE, b64u(edSign(privateKey, MESSAGE)))).toBe(true)
  })

  it("refuses the wrong key, the wrong message and bit flips", async () => {
    const a = nodeEd25519()
    const b = nodeEd25519()
    const sig = edSign(a.privateKey, MESSAGE)
    expect(await verifies(await parsed(b.jwk), MESSAGE, b64u(sig))).toBe(false)
    expect(await verifies(await parsed(a.jwk), `${MESSAGE} `, b64u(sig))).toBe(false)
    const key = await parsed(a.jwk)
    for (let bit = 0; bit < 512; bit += 3) {
      const flipped = Buffer.from(sig)
      flipped[bit >> 3] = (flipped[bit >> 3] ?? 0) ^ (1 << (bit & 7))
      expect(await verifies(key, MESSAGE, b64u(flipped)), `bit ${bit}`).toBe(false)
    }
  })

  it("refuses a non-canonical S (S + L), which lenient verifiers would accept", async () => {
    const { privateKey, jwk } = nodeEd25519()
    const key = await parsed(jwk)
    const sig = edSign(privateKey, MESSAGE)
    const L = 2n ** 252n + 27742317777372353535851937790883648493n
    const s = BigInt(`0x${Buffer.from(sig.subarray(32)).reverse().toString("hex")}`)
    const bumped = Buffer.from((s + L).toString(16).padStart(64, "0"), "hex").reverse()
    const malleated = Buffer.concat([sig.subarray(0, 32), bumped])
    expect(await verifies(key, MESSAGE, b64u(sig))).toBe(true)
    expect(await verifies(key, MESSAGE, b64u(malleated))).toBe(false)
  })

  it("refuses a signature whose R is spelled non-canonically (strict RFC 8032, not ZIP 215)", async () => {
    // Forge-free vector made with the private scalar: R = identity, S = k*a, so S*B = R + k*A holds.
    // Spelled canonically (y = 1) it verifies; spelled as y = p + 1 only ZIP 215 verifiers accept it.
    const { privateKey, jwk } = nodeEd25519()
    const key = await parsed(jwk)
    const seed = decodeBase64Url(String(privateKey.export({ format: "jwk" }).d)) ?? new Uint8Array()
    const { scalar, pointBytes } = ed25519.utils.getExtendedPublicKey(seed)
    expect(Buffer.from(pointBytes).equals(Buffer.from(key.publicKey))).toBe(true)
    const L = 2n ** 252n + 27742317777372353535851937790883648493n
    const le = (n: bigint): Buffer => Buffer.from(n.toString(16).padStart(64, "0"), "hex").reverse()
    const IDENTITY = "0100000000000000000000000000000000000000000000000000000000000000"
    const IDENTITY_AS_P_PLUS_1 = "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
    // k is hashed over `hashedR`, the signature carries `sentR`.
    const withR = (sentR: string, hashedR: string): Buffer => {
      const h = createHash("sha512").update(Buffer.from(hashedR, "hex")).update(pointBytes).update(MESSAGE).digest()
      const k = BigInt(`0x${Buffer.from(h).reverse().toString("hex")}`) % L
      return Buffer.concat([Buffer.from(sentR, "hex"), le((k * scalar) % L)])
    }
    const canonical = withR(IDENTITY, IDENTITY)
    expect(await verifies(key, MESSAGE, b64u(canonical))).toBe(true)
    // ZIP 215 hashes R as sent; some lenient verifiers (noble among them) hash it re-encoded.
    const variants = [withR(IDENTITY_AS_P_PLUS_1, IDENTITY_AS_P_PLUS_1), withR(IDENTITY_AS_P_PLUS_1, IDENTITY)]
    const lenient = variants.filter((sig) => ed25519.verify(sig, Buffer.from(MESSAGE), pointBytes, { zip215: true }))
    expect(lenient.length).toBeGreaterThan(0)
    for (const sig of variants) expect(await verifies(key, MESSAGE, b64u(sig))).toBe(false)
  })

  it("refuses signatures of the wrong length and a P-256 signature", async () => {
    const { privateKey, jwk } = nodeEd25519()
    const key = await parsed(jwk)
    const sig = edSign(privateKey, MESSAGE)
    expect(await verifies(key, MESSAGE, b64u(sig.subarray(0, 63)))).toBe(false)
    expect(await verifies(key, MESSAGE, b64u(Buffer.concat([sig, Buffer.from([0])])))).toBe(false)
    const p = nodeP256()
    expect(await verifies(key, MESSAGE, b64u(derSign(p.privateKey, MESSAGE)))).toBe(false)
  })
})
