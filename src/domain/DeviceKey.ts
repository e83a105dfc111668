/**
 * Device keys (spec §2.5): strict parsing of a device's public JWK (ECDSA P-256 or Ed25519), its
 * device id (RFC 7638 thumbprint, computed here and never taken from the client), and verification
 * of a device signature. Pure: no storage, no HTTP; the service maps the errors to spec §7 codes.
 */
import { ed25519 } from "@noble/curves/ed25519"
import { p256 } from "@noble/curves/nist"
import { Data, Effect } from "effect"
import { calculateJwkThumbprint } from "jose"

/** Not a P-256 or Ed25519 public JWK, or not the device the caller named: 400 `DEVICE_KEY_INVALID`. */
export class DeviceKeyInvalid extends Data.TaggedError("DeviceKeyInvalid")<{ readonly reason: string }> {
  get code(): "DEVICE_KEY_INVALID" {
    return "DEVICE_KEY_INVALID"
  }
  get status(): 400 {
    return 400
  }
}

/** The device signature is malformed or does not verify: 401 `DEVICE_SIGNATURE_INVALID`. */
export class DeviceSignatureInvalid extends Data.TaggedError("DeviceSignatureInvalid")<{ readonly reason: string }> {
  get code(): "DEVICE_SIGNATURE_INVALID" {
    return "DEVICE_SIGNATURE_INVALID"
  }
  get status(): 401 {
    return 401
  }
}

/** The canonical public members of a device JWK: exactly what the thumbprint covers. */
export type DevicePublicJwk =
  | { readonly kty: "EC"; readonly crv: "P-256"; readonly x: string; readonly y: string }
  | { readonly kty: "OKP"; readonly crv: "Ed25519"; readonly x: string }

/** JWS algorithm name of a device key. */
export type DeviceAlg = "ES256" | "EdDSA"

/** A parsed, validated device key. */
export interface DeviceKey {
  /** RFC 7638 SHA-256 thumbprint, base64url (43 characters). */
  readonly id: string
  readonly alg: DeviceAlg
  /** Canonical members only; store and echo this, never the client's original object. */
  readonly jwk: DevicePublicJwk
  /** P-256: 65-byte SEC1 uncompressed point; Ed25519: the 32-byte encoding. */
  readonly publicKey: Uint8Array
}

// Members a JWK exporter (WebCrypto, jose, Node) may add; they carry no key material, so they are
// accepted and dropped rather than refused, which would break ordinary client libraries.
const IGNORED_MEMBERS: ReadonlySet<string> = new Set(["alg", "use", "kid", "key_ops", "ext"])
// Private or symmetric key material of any JWK type: named so the refusal says what is wrong.
const PRIVATE_MEMBERS: ReadonlySet<string> = new Set(["d", "p", "q", "dp", "dq", "qi", "oth", "k"])

const BASE64URL_RE = /^[A-Za-z0-9_-]*$/

/**
 * Strict base64url: no padding, no foreign characters, and canonical (the unused trailing bits are
 * zero), so every byte string has exactly one accepted spelling.
 */
export const decodeBase64Url = (text: string): Uint8Array | undefined => {
  if (!BASE64URL_RE.test(text) || text.length % 4 === 1) return undefined
  const bytes = Buffer.from(text, "base64url")
  if (bytes.toString("base64url") !== text) return undefined
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

/** base64url without padding. */
export const encodeBase64Url = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64url")

const keyInvalid = (reason: string) => new DeviceKeyInvalid({ reason })
const signatureInvalid = (reason: string) => new DeviceSignatureInvalid({ reason })

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The coordinate named `member`, decoded and exactly 32 bytes long. */
const coordinate = (jwk: Readonly<Record<string, unknown>>, member: string): Effect.Effect<Uint8Array, DeviceKeyInvalid> => {
  const value = jwk[member]
  if (typeof value !== "string") return Effect.fail(keyInvalid(`"${member}" must be a base64url string`))
  const bytes = decodeBase64Url(value)
  if (bytes === undefined) return Effect.fail(keyInvalid(`"${member}" is not canonical base64url without padding`))
  if (bytes.length !== 32) return Effect.fail(keyInvalid(`"${member}" must encode exactly 32 bytes`))
  return Effect.succeed(bytes)
}

// Field prime of edwards25519, 2^255 - 19.
const ED25519_P = (1n << 255n) - 19n

/** Little-endian y of an Ed25519 encoding, the x sign bit (bit 255) cleared. */
const ed25519Y = (encoded: Uint8Array): bigint => {
  let y = 0n
  for (let i = encoded.length - 1; i >= 0; i--) y = (y << 8n) | BigInt(encoded[i] ?? 0)
  return y & ((1n << 255n) - 1n)
}

/**
 * Ed25519 public key checks. A small-order key lets anyone forge: under the identity point the
 * signature (R = identity, S = 0) verifies for every message. All 14 small-order encodings are
 * refused by three rules: a non-canonical y (y >= p: four encodings of y = 0 and y = 1) outright,
 * x = 0 with the sign bit set (two encodings) by RFC 8032 strict decoding, and the 8 canonical
 * small-order points by multiplying by the cofactor. Mixed-order keys (a torsion component added
 * to an honest key) are refused too: no honest key generator makes one, and refusing them means
 * cofactored and cofactorless verifiers agree on every signature we accept.
 */
export const ed25519KeyProblem = (encoded: Uint8Array): string | undefined => {
  if (encoded.length !== 32) return "an Ed25519 key is 32 bytes"
  if (ed25519Y(encoded) >= ED25519_P) return "Ed25519 key is not canonically encoded (y >= p)"
  let point: ReturnType<typeof ed25519.Point.fromBytes>
  try {
    point = ed25519.Point.fromBytes(encoded, false)
  } catch {
    return "Ed25519 key is not a point on the curve"
  }
  if (point.isSmallOrder()) return "Ed25519 key has small order"
  if (!point.isTorsionFree()) return "Ed25519 key is not in the prime-order subgroup"
  return undefined
}

const checkEd25519 = (encoded: Uint8Array): Effect.Effect<void, DeviceKeyInvalid> => {
  const problem = ed25519KeyProblem(encoded)
  return problem === undefined ? Effect.void : Effect.fail(keyInvalid(problem))
}

/** P-256 public point 0x04||x||y, refused unless on the curve (noble checks the equation and x, y < p). */
const checkP256 = (x: Uint8Array, y: Uint8Array): Effect.Effect<Uint8Array, DeviceKeyInvalid> => {
  const sec1 = new Uint8Array(65)
  sec1[0] = 0x04
  sec1.set(x, 1)
  sec1.set(y, 33)
  return Effect.try({
    try: () => {
      const point = p256.Point.fromBytes(sec1)
      // fromBytes validates today; asserting again keeps the guarantee if that ever changes.
      point.assertValidity()
      return sec1
    },
    catch: () => keyInvalid("P-256 key is not a point on the curve")
  })
}

/** RFC 7638 thumbprint (SHA-256, base64url) of the canonical members, computed by jose. */
export const thumbprint = (jwk: DevicePublicJwk): Effect.Effect<string, DeviceKeyInvalid> =>
  Effect.tryPromise({
    try: () =>
      calculateJwkThumbprint(
        jwk.kty === "EC" ? { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y } : { kty: jwk.kty, crv: jwk.crv, x: jwk.x },
        "sha256"
      ),
    catch: () => keyInvalid("the key thumbprint could not be computed")
  })

/**
 * Parses a device public JWK strictly: `{kty: "EC", crv: "P-256", x, y}` or
 * `{kty: "OKP", crv: "Ed25519", x}`, plus only the ignored members alg/use/kid/key_ops/ext.
 */
export const parseDeviceKey = (input: unknown): Effect.Effect<DeviceKey, DeviceKeyInvalid> =>
  Effect.gen(function* () {
    if (!isRecord(input)) return yield* keyInvalid("the device key must be a JWK object")
    const { kty, crv } = input
    for (const member of Object.keys(input)) {
      if (PRIVATE_MEMBERS.has(member)) return yield* keyInvalid(`a private key member ("${member}") was sent; send the public key only`)
    }
    const allowed: ReadonlyArray<string> =
      kty === "EC" && crv === "P-256" ? ["kty", "crv", "x", "y"] : kty === "OKP" && crv === "Ed25519" ? ["kty", "crv", "x"] : []
    if (allowed.length === 0) return yield* keyInvalid('the device key must be an EC P-256 or OKP Ed25519 public JWK')
    for (const member of Object.keys(input)) {
      if (!allowed.includes(member) && !IGNORED_MEMBERS.has(member)) {
        return yield* keyInvalid(`unexpected JWK member "${member}"`)
      }
    }
    const x = yield* coordinate(input, "x")
    if (kty === "EC") {
      const y = yield* coordinate(input, "y")
      const publicKey = yield* checkP256(x, y)
      const jwk: DevicePublicJwk = { kty: "EC", crv: "P-256", x: encodeBase64Url(x), y: encodeBase64Url(y) }
      return { id: yield* thumbprint(jwk), alg: "ES256" as const, jwk, publicKey }
    }
    yield* checkEd25519(x)
    const jwk: DevicePublicJwk = { kty: "OKP", crv: "Ed25519", x: encodeBase64Url(x) }
    return { id: yield* thumbprint(jwk), alg: "EdDSA" as const, jwk, publicKey: x }
  })

/** Refuses a key whose thumbprint is not the device id named elsewhere (the sign-in message). */
export const assertDeviceId = (key: DeviceKey, expectedId: string): Effect.Effect<void, DeviceKeyInvalid> =>
  key.id === expectedId ? Effect.void : Effect.fail(keyInvalid("the device key is not the device named in the message"))

// Size of the P-256 r||s form; DER of the same pair is 8 to 72 bytes.
const P256_COMPACT_BYTES = 64
const P256_DER_MIN_BYTES = 8
const P256_DER_MAX_BYTES = 72
/** Longest base64url signature worth decoding (72 bytes of DER); bounds the work on hostile input. */
export const MAX_SIGNATURE_CHARS = 96

/**
 * Strict DER ECDSA-Sig-Value to r||s. noble's parser refuses trailing bytes after the SEQUENCE and
 * after `s`, non-minimal and indefinite lengths, negative integers and needless leading zeros;
 * its Signature constructor then refuses r or s outside [1, n-1].
 */
const derToCompact = (der: Uint8Array): Effect.Effect<Uint8Array | undefined> =>
  Effect.try(() => p256.Signature.fromBytes(der, "der").toBytes("compact")).pipe(Effect.orElseSucceed(() => undefined))

const toBytes = (message: string | Uint8Array): Uint8Array =>
  typeof message === "string" ? new TextEncoder().encode(message) : message

/**
 * ES256 verification. High-S signatures are accepted: WebCrypto and Node's crypto.sign emit S in
 * either half and browsers offer no way to normalise, so refusing high S would fail about half of
 * honest devices. The malleability this allows is harmless here because nothing keys on signature
 * bytes: sign-ins spend the message nonce and proofs spend their `id`.
 */
const verifyP256 = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const candidates: Array<Uint8Array> = []
    if (signature.length === P256_COMPACT_BYTES) candidates.push(signature)
    // A 64-byte DER signature exists (short r and s), so at that length both readings are tried;
    // either one is a valid (r, s) for the key, so trying both admits no forgery.
    if (signature.length >= P256_DER_MIN_BYTES && signature.length <= P256_DER_MAX_BYTES) {
      const compact = yield* derToCompact(signature)
      if (compact !== undefined) candidates.push(compact)
    }
    for (const compact of candidates) {
      const ok = yield* Effect.try(() =>
        p256.verify(compact, message, publicKey, { prehash: true, lowS: false, format: "compact" })
      ).pipe(Effect.orElseSucceed(() => false))
      if (ok) return true
    }
    return false
  })

/** Ed25519 by strict RFC 8032 rules (zip215 off): canonical R and A, S < L, no small-order A. */
const verifyEd25519 = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Effect.Effect<boolean> =>
  signature.length !== 64
    ? Effect.succeed(false)
    : Effect.try(() => ed25519.verify(signature, message, publicKey, { zip215: false })).pipe(
        Effect.orElseSucceed(() => false)
      )

/**
 * Verifies a device signature (base64url) over the message bytes (a string is taken as UTF-8):
 * ES256 as 64-byte r||s or strict DER, Ed25519 as 64 bytes.
 */
export const verifyDeviceSignature = (
  key: DeviceKey,
  message: string | Uint8Array,
  signature: string
): Effect.Effect<void, DeviceSignatureInvalid> => {
  if (signature.length > MAX_SIGNATURE_CHARS) return Effect.fail(signatureInvalid("the device signature is too long"))
  const bytes = decodeBase64Url(signature)
  if (bytes === undefined) return Effect.fail(signatureInvalid("the device signature is not canonical base64url"))
  const data = toBytes(message)
  const verify = key.alg === "ES256" ? verifyP256 : verifyEd25519
  return Effect.flatMap(verify(key.publicKey, data, bytes), (ok) =>
    ok ? Effect.void : Effect.fail(signatureInvalid("the device signature does not verify"))
  )
}
