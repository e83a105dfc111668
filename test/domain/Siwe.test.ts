import { secp256k1 } from "@noble/curves/secp256k1"
import { Effect, Either } from "effect"
import { Wallet } from "ethers"
import { calculateJwkThumbprint, exportJWK, generateKeyPair } from "jose"
import { SiweMessage } from "siwe"
import { beforeAll, describe, expect, it } from "vitest"
import {
  type ChallengeInput,
  isValidAddress,
  makeChallenge,
  newNonce,
  parseMessage,
  personalSignHash,
  recoverPersonalSign,
  statementFor,
  toChecksumAddress,
  verifySignIn
} from "../../src/domain/Siwe.js"

// Wallets signed with ethers: an implementation independent of the code under test.
const alice = new Wallet("0x" + "4c".repeat(32))
const mallory = new Wallet("0x" + "9a".repeat(32))
const NOW = Date.parse("2025-06-01T12:00:00.000Z")
const FIVE_MIN = 5 * 60_000
const DOMAIN = "gateway.example.com"

let deviceId = ""
let otherDeviceId = ""

beforeAll(async () => {
  // Real RFC 7638 thumbprints computed by jose, as a client would.
  const a = await generateKeyPair("ES256", { extractable: true })
  const b = await generateKeyPair("EdDSA", { extractable: true })
  deviceId = await calculateJwkThumbprint(await exportJWK(a.publicKey), "sha256")
  otherDeviceId = await calculateJwkThumbprint(await exportJWK(b.publicKey), "sha256")
})

const input = (over: Partial<ChallengeInput> = {}): ChallengeInput => ({
  domain: DOMAIN,
  wallet: alice.address.toLowerCase(),
  namespace: "acme-shop",
  uri: "https://gateway.example.com/v1/auth/verify",
  chainId: 1,
  nonce: "k3Jd9Q2mZx81Lp0aTTy4Rw",
  issuedAt: NOW,
  expirationTime: NOW + FIVE_MIN,
  ...over
})

const run = <A, E>(effect: Effect.Effect<A, E>): Either.Either<A, E> => Effect.runSync(Effect.either(effect))
const ok = <A, E>(effect: Effect.Effect<A, E>): A => Either.getOrThrow(run(effect))
const failTag = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>): string => {
  const result = run(effect)
  if (Either.isRight(result)) return "succeeded"
  return result.left._tag
}

const challenge = (over: Partial<ChallengeInput> = {}) => ok(makeChallenge(input(over)))
const verify = (message: string, signature: string, now = NOW, expectedDomain = DOMAIN) =>
  verifySignIn({ message, signature, expectedDomain, now })

/** Replaces the last byte (v) of a 0x-prefixed 65-byte signature. */
const withV = (sig: string, v: number) => sig.slice(0, 130) + v.toString(16).padStart(2, "0")

describe("EIP-55 addresses", () => {
  // Vectors from EIP-55 itself.
  const vectors = [
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    "0xde709f2102306220921060314715629080e2fb77",
    "0x27b1fdb04752bbc536007a920d24acb045561c26",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"
  ]
  it("checksums the EIP's vectors from any case", () => {
    for (const v of vectors) {
      expect(ok(toChecksumAddress(v.toLowerCase()))).toBe(v)
      expect(ok(toChecksumAddress("0x" + v.slice(2).toUpperCase()))).toBe(v)
      expect(ok(isValidAddress(v))).toBe(true)
    }
    expect(ok(toChecksumAddress(alice.address.toLowerCase()))).toBe(alice.address)
  })
  it("refuses a mixed-case address with a wrong checksum, accepts single-case ones", () => {
    const good = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    const bad = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"
    expect(ok(isValidAddress(bad))).toBe(false)
    expect(ok(isValidAddress(good.toLowerCase()))).toBe(true)
    expect(ok(isValidAddress("0x" + good.slice(2).toUpperCase()))).toBe(true)
    expect(ok(isValidAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe"))).toBe(false)
    expect(ok(isValidAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeG"))).toBe(false)
    const message = challenge().replace(alice.address, alice.address.slice(0, 41) + flipCase(alice.address.slice(41)))
    expect(new SiweMessageOrError(message).error).toBeDefined()
    expect(failTag(parseMessage(message))).toBe("SiweMessageInvalid")
    expect(failTag(makeChallenge(input({ wallet: bad })))).toBe("SiweMessageInvalid")
  })
})

const flipCase = (s: string) => (s === s.toLowerCase() ? s.toUpperCase() : s.toLowerCase())

/** The reference parser, with its throw caught so the test can compare outcomes. */
class SiweMessageOrError {
  readonly message: SiweMessage | undefined
  readonly error: unknown
  constructor(text: string) {
    let message: SiweMessage | undefined
    let error: unknown
    try {
      message = new SiweMessage(text)
    } catch (e) {
      error = e
    }
    this.message = message
    this.error = error
  }
}

describe("challenge text", () => {
  it("parses with the siwe reference parser, fields matching, and equals its own rendering", () => {
    for (const over of [{}, { deviceId }]) {
      const text = challenge(over)
      const ref = new SiweMessage(text)
      expect(ref.domain).toBe(DOMAIN)
      expect(ref.address).toBe(alice.address)
      expect(ref.statement).toBe("Sign in to Portico namespace acme-shop.")
      expect(ref.uri).toBe("https://gateway.example.com/v1/auth/verify")
      expect(ref.version).toBe("1")
      expect(ref.chainId).toBe(1)
      expect(ref.nonce).toBe("k3Jd9Q2mZx81Lp0aTTy4Rw")
      expect(Date.parse(ref.issuedAt ?? "")).toBe(NOW)
      expect(Date.parse(ref.expirationTime ?? "")).toBe(NOW + FIVE_MIN)
      expect(ref.resources).toEqual(
        "deviceId" in over
          ? ["urn:portico:namespace:acme-shop", `urn:portico:device:${deviceId}`]
          : ["urn:portico:namespace:acme-shop"]
      )
      // The reference library renders the same fields to the very same bytes.
      expect(new SiweMessage({ ...ref }).prepareMessage()).toBe(text)
      // And our parser reads back what we wrote.
      const mine = ok(parseMessage(text))
      expect(mine.namespace).toBe("acme-shop")
      expect(mine.deviceId).toBe("deviceId" in over ? deviceId : undefined)
      expect(mine.address).toBe(alice.address)
    }
  })
  it("has the exact EIP-4361 layout", () => {
    expect(challenge({ deviceId }).split("\n")).toEqual([
      "gateway.example.com wants you to sign in with your Ethereum account:",
      alice.address,
      "",
      "Sign in to Portico namespace acme-shop.",
      "",
      "URI: https://gateway.example.com/v1/auth/verify",
      "Version: 1",
      "Chain ID: 1",
      "Nonce: k3Jd9Q2mZx81Lp0aTTy4Rw",
      "Issued At: 2025-06-01T12:00:00.000Z",
      "Expiration Time: 2025-06-01T12:05:00.000Z",
      "Resources:",
      "- urn:portico:namespace:acme-shop",
      `- urn:portico:device:${deviceId}`
    ])
  })
  it("makes fresh alphanumeric nonces of 16+ characters", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 200; i++) {
      const n = newNonce()
      expect(n).toMatch(/^[A-Za-z0-9]{16,}$/)
      seen.add(n)
    }
    expect(seen.size).toBe(200)
    expect(new SiweMessage(challenge({ nonce: newNonce() })).nonce).toMatch(/^[A-Za-z0-9]+$/)
  })
  it("refuses inputs that would inject lines or break the grammar", () => {
    const cases: Array<Partial<ChallengeInput>> = [
      { domain: "evil.example\nURI: https://evil.example" },
      { domain: "gateway.example.com\r" },
      { domain: "user@gateway.example.com" },
      { domain: "" },
      { uri: "https://gateway.example.com/\nResources:" },
      { uri: "not a uri" },
      { namespace: "acme\n- urn:portico:namespace:other" },
      { namespace: "Acme" },
      { deviceId: deviceId + "\n- urn:x:y" },
      { deviceId: deviceId.slice(0, 42) },
      { nonce: "short1" },
      { nonce: "abcdefgh-ijk" },
      { chainId: 0 },
      { chainId: 1.5 },
      { wallet: "0x1234" },
      { expirationTime: NOW }
    ]
    for (const over of cases) expect(failTag(makeChallenge(input(over))), JSON.stringify(over)).toBe("SiweMessageInvalid")
  })
})

describe("sign-in verification", () => {
  it("accepts a valid sign-in without a device", async () => {
    const message = challenge()
    const signature = await alice.signMessage(message)
    expect(ok(verify(message, signature))).toEqual({
      wallet: alice.address.toLowerCase(),
      namespace: "acme-shop",
      deviceId: undefined,
      nonce: "k3Jd9Q2mZx81Lp0aTTy4Rw",
      expiresAt: NOW + FIVE_MIN
    })
  })
  it("accepts a valid sign-in with a device", async () => {
    const message = challenge({ deviceId })
    const signature = await alice.signMessage(message)
    const result = ok(verify(message, signature))
    expect(result.deviceId).toBe(deviceId)
    expect(result.wallet).toBe(alice.address.toLowerCase())
  })
  it("refuses a signature by another wallet", async () => {
    const message = challenge()
    expect(failTag(verify(message, await mallory.signMessage(message)))).toBe("SiweWalletMismatch")
    // The recovered signer is mallory: recovery itself is right, the binding refuses.
    expect(ok(recoverPersonalSign(message, await mallory.signMessage(message)))).toBe(mallory.address.toLowerCase())
  })
  it("refuses a message edited after signing", async () => {
    const message = challenge({ deviceId })
    const signature = await alice.signMessage(message)
    const nonceEdit = message.replace("Nonce: k3Jd9Q2mZx81Lp0aTTy4Rw", "Nonce: k3Jd9Q2mZx81Lp0aTTy4RX")
    const nsEdit = message.replaceAll("acme-shop", "acme-bank")
    const deviceEdit = message.replace(deviceId, otherDeviceId)
    for (const edited of [nonceEdit, nsEdit, deviceEdit]) {
      expect(edited).not.toBe(message)
      expect(ok(parseMessage(edited)).namespace).toMatch(/^acme-/)
      expect(failTag(verify(edited, signature))).toBe("SiweWalletMismatch")
    }
    // A statement that no longer names the namespace is refused, and the signature would not hold either.
    const statementEdit = message.replace(statementFor("acme-shop"), "Sign in to Portico namespace acme-bank.")
    expect(failTag(verify(statementEdit, signature))).toBe("SiweMessageInvalid")
    expect(ok(recoverPersonalSign(statementEdit, signature))).not.toBe(alice.address.toLowerCase())
    // Dropping the device resource turns a device-bound message into a plain one: not what was signed.
    const deviceDropped = message.split("\n").slice(0, -1).join("\n")
    expect(failTag(verify(deviceDropped, signature))).toBe("SiweWalletMismatch")
  })
  it("refuses an expired message, up to the last millisecond", async () => {
    const message = challenge()
    const signature = await alice.signMessage(message)
    expect(failTag(verify(message, signature, NOW + FIVE_MIN))).toBe("SiweExpired")
    expect(failTag(verify(message, signature, NOW + FIVE_MIN + 3_600_000))).toBe("SiweExpired")
    expect(Either.isRight(run(verify(message, signature, NOW + FIVE_MIN - 1)))).toBe(true)
  })
  it("refuses a message issued in the future beyond 60 s of skew", async () => {
    const message = challenge()
    const signature = await alice.signMessage(message)
    expect(failTag(verify(message, signature, NOW - 61_000))).toBe("SiweNotYetValid")
    expect(Either.isRight(run(verify(message, signature, NOW - 59_000)))).toBe(true)
  })
  it("honours Not Before and requires Expiration Time (messages rendered by the reference library)", async () => {
    const base = {
      domain: DOMAIN,
      address: alice.address,
      statement: statementFor("acme-shop"),
      uri: "https://gateway.example.com/v1/auth/verify",
      version: "1",
      chainId: 1,
      nonce: "Zq81mmPLa0fj3Ke2",
      issuedAt: new Date(NOW).toISOString(),
      resources: ["urn:portico:namespace:acme-shop"]
    }
    const withNbf = new SiweMessage({
      ...base,
      expirationTime: new Date(NOW + FIVE_MIN).toISOString(),
      notBefore: new Date(NOW + 60_000).toISOString(),
      requestId: "req-1"
    }).prepareMessage()
    const sig = await alice.signMessage(withNbf)
    expect(ok(parseMessage(withNbf)).requestId).toBe("req-1")
    expect(failTag(verify(withNbf, sig, NOW + 30_000))).toBe("SiweNotYetValid")
    expect(ok(verify(withNbf, sig, NOW + 60_000)).nonce).toBe("Zq81mmPLa0fj3Ke2")
    const noExpiry = new SiweMessage(base).prepareMessage()
    expect(failTag(verify(noExpiry, await alice.signMessage(noExpiry)))).toBe("SiweMessageInvalid")
  })
  it("refuses a message made for another host", async () => {
    const message = challenge()
    const signature = await alice.signMessage(message)
    expect(failTag(verify(message, signature, NOW, "evil.example.com"))).toBe("SiweDomainMismatch")
    expect(failTag(verify(message, signature, NOW, "gateway.example.com:8443"))).toBe("SiweDomainMismatch")
    const schemed = `https://${message}`
    expect(new SiweMessage(schemed).scheme).toBe("https")
    expect(failTag(verify(schemed, await alice.signMessage(schemed)))).toBe("SiweDomainMismatch")
  })
})

describe("personal_sign recovery", () => {
  it("accepts v as 27/28 and as 0/1", async () => {
    for (const text of ["a", "b", "c", "d", "e", "f"].map((n) => challenge({ nonce: `nonce000${n}` }))) {
      const sig = await alice.signMessage(text)
      const v = parseInt(sig.slice(130), 16)
      expect([27, 28]).toContain(v)
      expect(ok(verify(text, sig)).wallet).toBe(alice.address.toLowerCase())
      expect(ok(verify(text, withV(sig, v - 27))).wallet).toBe(alice.address.toLowerCase())
      expect(ok(verify(text, sig.slice(2))).wallet).toBe(alice.address.toLowerCase())
      // The other recovery bit yields another key, so v is really used.
      expect(ok(recoverPersonalSign(text, withV(sig, 55 - v)))).not.toBe(alice.address.toLowerCase())
    }
  })
  it("hashes the byte length, not the character count", async () => {
    const text = "héllo ✓ wallet"
    expect(ok(recoverPersonalSign(text, await alice.signMessage(text)))).toBe(alice.address.toLowerCase())
  })
  it("refuses the high-s twin of a valid signature (EIP-2)", async () => {
    const message = challenge()
    const sig = await alice.signMessage(message)
    const n = secp256k1.CURVE.n
    const s = BigInt("0x" + sig.slice(66, 130))
    const v = parseInt(sig.slice(130), 16)
    const highS = sig.slice(0, 66) + (n - s).toString(16).padStart(64, "0") + (55 - v).toString(16)
    // The twin is a mathematically valid signature by alice: only the EIP-2 rule refuses it.
    const twin = secp256k1.Signature.fromCompact(highS.slice(2, 130))
      .addRecoveryBit(28 - v)
      .recoverPublicKey(personalSignHash(message))
    expect(twin.equals(secp256k1.ProjectivePoint.fromHex(alice.signingKey.publicKey.slice(2)))).toBe(true)
    expect(failTag(recoverPersonalSign(message, highS))).toBe("SiweSignatureInvalid")
    expect(failTag(verify(message, highS))).toBe("SiweSignatureInvalid")
  })
  it("refuses malformed signatures", async () => {
    const message = challenge()
    const sig = await alice.signMessage(message)
    const n = secp256k1.CURVE.n.toString(16)
    const bad = [
      "",
      "0x",
      sig.slice(0, -2),
      sig + "00",
      sig.slice(0, 10) + "zz" + sig.slice(12),
      " " + sig,
      sig + "\n",
      withV(sig, 29),
      withV(sig, 2),
      "0x" + "00".repeat(32) + sig.slice(66),
      "0x" + n + sig.slice(66),
      sig.slice(0, 66) + "00".repeat(32) + sig.slice(130)
    ]
    for (const b of bad) expect(failTag(verify(message, b)), b).toBe("SiweSignatureInvalid")
  })
})

describe("strict parsing", () => {
  const base = () => challenge({ deviceId })
  const lines = () => base().split("\n")
  const nsLine = "- urn:portico:namespace:acme-shop"
  const devLine = () => `- urn:portico:device:${deviceId}`

  it("refuses CR and stray line feeds", () => {
    const bad = [
      base().replaceAll("\n", "\r\n"),
      base() + "\n",
      "\n" + base(),
      base().replace("Version: 1", "Version: 1\r"),
      base().replace("Nonce: ", "Nonce: \n"),
      base().replace("Chain ID: 1", "Chain ID: 1\nChain ID: 5"),
      base().replace("Version: 1", "Version: 1\nNonce: aaaaaaaaaaaa"),
      base().replace(statementFor("acme-shop"), statementFor("acme-shop") + "\nextra line"),
      base().replace("Expiration Time:", "Request ID: x\nExpiration Time:"),
      base().replace("Resources:", "Resources:\n"),
      base().replace("\n\nSign in", "\nSign in")
    ]
    for (const text of bad) expect(failTag(parseMessage(text)), JSON.stringify(text)).toBe("SiweMessageInvalid")
    const crlf = run(parseMessage(base().replaceAll("\n", "\r\n")))
    expect(Either.isLeft(crlf) && crlf.left.reason).toBe("the message contains a carriage return")
  })
  it("refuses missing or malformed required fields", () => {
    const drop = (prefix: string) => lines().filter((l) => !l.startsWith(prefix)).join("\n")
    const bad = [
      drop("URI: "),
      drop("Version: "),
      drop("Chain ID: "),
      drop("Nonce: "),
      drop("Issued At: "),
      drop("Resources:"),
      lines().slice(0, -2).join("\n"),
      base().replace("Version: 1", "Version: 2"),
      base().replace("Chain ID: 1", "Chain ID: one"),
      base().replace("Issued At: 2025-06-01T12:00:00.000Z", "Issued At: 2025-02-30T12:00:00.000Z"),
      base().replace("Issued At: 2025-06-01T12:00:00.000Z", "Issued At: yesterday"),
      base().replace("Expiration Time: 2025-06-01T12:05:00.000Z", "Expiration Time: 2025-06-01T25:05:00Z"),
      base().replace(" wants you", " would like you"),
      base().replace(alice.address, alice.address.slice(0, 40)),
      base().replace("Sign in", "Sign <in>"),
      base().replace("URI: https://", "URI: https ://")
    ]
    for (const text of bad) expect(failTag(parseMessage(text)), JSON.stringify(text)).toBe("SiweMessageInvalid")
  })
  it("refuses reordered, duplicated or foreign resources", () => {
    const head = lines().slice(0, -2).join("\n")
    const bad = [
      [devLine(), nsLine],
      [nsLine, nsLine],
      [nsLine, devLine(), devLine()],
      [nsLine, devLine(), `- urn:portico:device:${otherDeviceId}`],
      [nsLine, "- https://evil.example/"],
      ["- urn:portico:namespace:Acme"],
      [nsLine, `- urn:portico:device:${deviceId.slice(0, 42)}`],
      [nsLine, `- urn:portico:device:${deviceId}A`],
      [nsLine, `- urn:portico:device:${deviceId.slice(0, 42)}+`],
      [nsLine, `- urn:portico:device:${deviceId.slice(0, 42)}B`],
      [`-  urn:portico:namespace:acme-shop`],
      []
    ]
    for (const rs of bad) {
      const text = [head, ...rs].join("\n")
      expect(failTag(parseMessage(text)), JSON.stringify(rs)).toBe("SiweMessageInvalid")
    }
    // The control: the same assembly with the right list parses.
    expect(ok(parseMessage([head, nsLine, devLine()].join("\n"))).deviceId).toBe(deviceId)
  })
  it("accepts the other EIP-4361 statement forms and reads fields as written", () => {
    const noStatement = base().replace(`${statementFor("acme-shop")}\n\n`, "\n")
    expect(new SiweMessage(noStatement).statement).toBeUndefined()
    expect(ok(parseMessage(noStatement)).statement).toBeUndefined()
    const parsed = ok(parseMessage(base().replace("2025-06-01T12:00:00.000Z", "2025-06-01T14:00:00+02:00")))
    expect(parsed.issuedAtMs).toBe(NOW)
  })
})
