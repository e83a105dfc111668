/**
 * Wallet sign-in messages: EIP-4361 (Sign-In with Ethereum) challenges, their strict parser, and
 * EIP-191 `personal_sign` verification over secp256k1. Pure: spending the nonce is the service's job.
 */
import { secp256k1 } from "@noble/curves/secp256k1"
import { keccak_256 } from "@noble/hashes/sha3"
import { bytesToHex, hexToBytes, randomBytes, utf8ToBytes } from "@noble/hashes/utils"
import { Data, Effect } from "effect"

/** The message is malformed, not what Portico issues, or its inputs would not make one. */
export class SiweMessageInvalid extends Data.TaggedError("SiweMessageInvalid")<{ readonly reason: string }> {}
/** The signature is malformed, high-s, or recovers no key. */
export class SiweSignatureInvalid extends Data.TaggedError("SiweSignatureInvalid")<{ readonly reason: string }> {}
/** The message was made for another host. */
export class SiweDomainMismatch extends Data.TaggedError("SiweDomainMismatch")<{ readonly reason: string }> {}
/** The message's `Expiration Time` has passed. */
export class SiweExpired extends Data.TaggedError("SiweExpired")<{ readonly reason: string }> {}
/** The message is not valid yet (`Issued At` in the future, or `Not Before` not reached). */
export class SiweNotYetValid extends Data.TaggedError("SiweNotYetValid")<{ readonly reason: string }> {}
/** The signature was made by another wallet than the one the message names. */
export class SiweWalletMismatch extends Data.TaggedError("SiweWalletMismatch")<{ readonly reason: string }> {}

export type SiweError =
  | SiweMessageInvalid
  | SiweSignatureInvalid
  | SiweDomainMismatch
  | SiweExpired
  | SiweNotYetValid
  | SiweWalletMismatch

/** Inputs of a challenge; times are epoch milliseconds. */
export interface ChallengeInput {
  readonly domain: string
  readonly wallet: string
  readonly namespace: string
  readonly deviceId?: string | undefined
  readonly uri: string
  readonly chainId: number
  readonly nonce: string
  readonly issuedAt: number
  readonly expirationTime: number
}

/** A parsed message; times are kept as written and as epoch milliseconds. */
export interface ParsedSiwe {
  readonly scheme?: string | undefined
  readonly domain: string
  /** As written (EIP-55 checksummed or single-case). */
  readonly address: string
  readonly statement?: string | undefined
  readonly uri: string
  readonly version: "1"
  readonly chainId: number
  readonly nonce: string
  readonly issuedAt: string
  readonly issuedAtMs: number
  readonly expirationTime?: string | undefined
  readonly expirationTimeMs?: number | undefined
  readonly notBefore?: string | undefined
  readonly notBeforeMs?: number | undefined
  readonly requestId?: string | undefined
  readonly resources: ReadonlyArray<string>
  readonly namespace: string
  readonly deviceId?: string | undefined
}

/** What a verified sign-in yields; `expiresAt` is epoch milliseconds. */
export interface VerifiedSignIn {
  readonly wallet: string
  readonly namespace: string
  readonly deviceId?: string | undefined
  readonly nonce: string
  readonly expiresAt: number
}

const HEADER_SUFFIX = " wants you to sign in with your Ethereum account:"
export const NAMESPACE_URN_PREFIX = "urn:portico:namespace:"
export const DEVICE_URN_PREFIX = "urn:portico:device:"
/** Clock skew tolerated on `Issued At`. */
export const ISSUED_AT_SKEW_MS = 60_000
/** Larger than any message we issue; bounds the work done on hostile input. */
export const MAX_MESSAGE_BYTES = 4096
const MAX_NONCE_CHARS = 128
const NONCE_CHARS = 22
const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Grammar pieces (RFC 3986 / RFC 3339 as EIP-4361 uses them).
const PCT = "%[0-9A-Fa-f]{2}"
const SUB_DELIMS = "!$&'()*+,;="
const UNRESERVED = "A-Za-z0-9\\-._~"
const regName = `(?:[${UNRESERVED}${SUB_DELIMS}]|${PCT})+`
// EIP-4361 forbids userinfo in the domain, so the authority is host[:port] only.
const hostRe = `(?:\\[[0-9A-Fa-f:.]+\\]|${regName})`
const domainRe = new RegExp(`^${hostRe}(?::[0-9]{1,5})?$`)
const schemeRe = /^[A-Za-z][A-Za-z0-9+.-]*$/
// A structural URI check: scheme, then only characters RFC 3986 allows, percent-escapes well formed.
const uriRe = new RegExp(`^[A-Za-z][A-Za-z0-9+.-]*:(?:[${UNRESERVED}${SUB_DELIMS}:/?#\\[\\]@]|${PCT})*$`)
const statementRe = new RegExp(`^[${UNRESERVED}${SUB_DELIMS}:/?#\\[\\]@ ]*$`)
const requestIdRe = new RegExp(`^(?:[${UNRESERVED}${SUB_DELIMS}:@]|${PCT})*$`)
const nonceRe = new RegExp(`^[A-Za-z0-9]{8,${MAX_NONCE_CHARS}}$`)
const addressRe = /^0x[0-9a-fA-F]{40}$/
const chainIdRe = /^[0-9]{1,15}$/
// Same rule as `NamespaceName` in Names.ts, kept as a regex so this module stays Schema-free.
const namespaceRe = /^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/
// A SHA-256 thumbprint is 32 bytes: 43 base64url characters whose last one carries two zero bits,
// so only the canonical encoding is accepted (one id, one spelling).
const deviceIdRe = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/
const dateTimeRe = /^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$/
// Only printable ASCII and LF can occur in a message the grammar accepts.
const allowedCharsRe = /^[\x20-\x7e\n]*$/

const invalid = (reason: string) => new SiweMessageInvalid({ reason })

/** Statement of a Portico challenge: it names the namespace, so the wallet shows where it signs in. */
export const statementFor = (namespace: string): string => `Sign in to Portico namespace ${namespace}.`

/** A fresh nonce: 22 random alphanumerics (about 131 bits), as EIP-4361 wants alphanumeric. */
export const newNonce = (): string => {
  let out = ""
  while (out.length < NONCE_CHARS) {
    for (const byte of randomBytes(32)) {
      // 248 = 4 * 62: rejecting higher bytes keeps every character equally likely.
      if (byte < 248 && out.length < NONCE_CHARS) out += ALPHANUMERIC.charAt(byte % 62)
    }
  }
  return out
}

/** EIP-55 mixed-case checksum form of a 20-byte hex address (any case in). */
export const toChecksumAddress = (address: string): Effect.Effect<string, SiweMessageInvalid> => {
  if (!addressRe.test(address)) return Effect.fail(invalid("an address is 0x followed by 40 hex characters"))
  const lower = address.slice(2).toLowerCase()
  const hash = bytesToHex(keccak_256(utf8ToBytes(lower)))
  let out = "0x"
  for (let i = 0; i < lower.length; i++) {
    const c = lower.charAt(i)
    out += parseInt(hash.charAt(i), 16) >= 8 ? c.toUpperCase() : c
  }
  return Effect.succeed(out)
}

/** Whether a well-formed address's casing is single-case (no checksum) or the exact EIP-55 form. */
export const hasValidChecksum = (address: string): boolean => {
  const body = address.slice(2)
  if (body === body.toLowerCase() || body === body.toUpperCase()) return true
  const lower = body.toLowerCase()
  const hash = bytesToHex(keccak_256(utf8ToBytes(lower)))
  for (let i = 0; i < lower.length; i++) {
    const c = body.charAt(i)
    if (c !== (parseInt(hash.charAt(i), 16) >= 8 ? c.toUpperCase() : c.toLowerCase())) return false
  }
  return true
}

/** True when the address is well formed and, if mixed-case, carries a correct EIP-55 checksum. */
export const isValidAddress = (address: string): Effect.Effect<boolean> =>
  toChecksumAddress(address).pipe(
    Effect.map((sum) => {
      const body = address.slice(2)
      // Single-case addresses carry no checksum (EIP-55); mixed case must match it exactly.
      if (body === body.toLowerCase() || body === body.toUpperCase()) return true
      return sum === address
    }),
    Effect.orElseSucceed(() => false)
  )

const daysInMonth = (year: number, month: number): number => {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28
  return [4, 6, 9, 11].includes(month) ? 30 : 31
}

/** RFC 3339 `date-time` to epoch milliseconds, refusing out-of-range parts. */
const parseDateTime = (field: string, text: string): Effect.Effect<number, SiweMessageInvalid> => {
  const m = dateTimeRe.exec(text)
  if (m === null) return Effect.fail(invalid(`${field} is not an RFC 3339 date-time`))
  const [, ys, mos, ds, hs, mis, ss, frac, offset] = m
  const year = Number(ys)
  const month = Number(mos)
  const day = Number(ds)
  const hour = Number(hs)
  const minute = Number(mis)
  const second = Number(ss)
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) {
    return Effect.fail(invalid(`${field} has an out-of-range part`))
  }
  let offsetMinutes = 0
  if (offset !== undefined && offset !== "Z" && offset !== "z") {
    const oh = Number(offset.slice(1, 3))
    const om = Number(offset.slice(4, 6))
    if (oh > 23 || om > 59) return Effect.fail(invalid(`${field} has an out-of-range offset`))
    offsetMinutes = (offset.startsWith("-") ? -1 : 1) * (oh * 60 + om)
  }
  const ms = frac === undefined ? 0 : Number(frac.slice(1, 4).padEnd(3, "0"))
  // A leap second (":60") rolls into the next minute, which is as close as epoch time gets.
  return Effect.succeed(Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMinutes * 60_000)
}

/** Reads `<title><value>` from a line, or nothing when the line has another title. */
const field = (line: string | undefined, title: string): string | undefined =>
  line !== undefined && line.startsWith(title) ? line.slice(title.length) : undefined

/**
 * Parses a sign-in message strictly by the EIP-4361 ABNF, then holds it to what Portico issues:
 * resources are exactly the namespace URN, optionally followed by one device URN.
 */
export const parseMessage = (text: string): Effect.Effect<ParsedSiwe, SiweMessageInvalid> =>
  Effect.gen(function* () {
    if (utf8ToBytes(text).length > MAX_MESSAGE_BYTES) return yield* invalid("the message is too long")
    if (text.includes("\r")) return yield* invalid("the message contains a carriage return")
    if (!allowedCharsRe.test(text)) return yield* invalid("the message contains a character outside printable ASCII")
    const lines = text.split("\n")
    let i = 0
    const next = (): string | undefined => lines[i++]

    const header = next()
    if (header === undefined || !header.endsWith(HEADER_SUFFIX)) {
      return yield* invalid("the first line is not a sign-in request")
    }
    let authority = header.slice(0, header.length - HEADER_SUFFIX.length)
    let scheme: string | undefined
    const sep = authority.indexOf("://")
    if (sep >= 0) {
      scheme = authority.slice(0, sep)
      authority = authority.slice(sep + 3)
      if (!schemeRe.test(scheme)) return yield* invalid("the scheme is malformed")
    }
    if (!domainRe.test(authority)) return yield* invalid("the domain is not host[:port]")

    const address = next()
    if (address === undefined || !addressRe.test(address)) {
      return yield* invalid("the second line is not an address")
    }
    if (!(yield* isValidAddress(address))) return yield* invalid("the address fails its EIP-55 checksum")

    if (next() !== "") return yield* invalid("a blank line must follow the address")
    // `[ statement LF ] LF`: either a statement line then a blank, an empty statement (two blanks),
    // or no statement at all (one blank).
    let statement: string | undefined
    const afterBlank = lines[i]
    if (afterBlank === "") {
      i++
      if (lines[i] === "") {
        i++
        statement = ""
      }
    } else {
      const s = next()
      if (s === undefined || !statementRe.test(s)) {
        return yield* invalid("the statement is missing or holds characters EIP-4361 does not allow")
      }
      statement = s
      if (next() !== "") return yield* invalid("a blank line must follow the statement")
    }

    const uri = field(next(), "URI: ")
    if (uri === undefined || !uriRe.test(uri)) return yield* invalid("URI is missing or malformed")
    if (field(next(), "Version: ") !== "1") return yield* invalid("Version must be 1")
    const chain = field(next(), "Chain ID: ")
    if (chain === undefined || !chainIdRe.test(chain)) return yield* invalid("Chain ID is missing or malformed")
    const nonce = field(next(), "Nonce: ")
    if (nonce === undefined || !nonceRe.test(nonce)) {
      return yield* invalid(`Nonce must be 8-${MAX_NONCE_CHARS} alphanumeric characters`)
    }
    const issuedAt = field(next(), "Issued At: ")
    if (issuedAt === undefined) return yield* invalid("Issued At is missing")
    const issuedAtMs = yield* parseDateTime("Issued At", issuedAt)

    // The optional fields come in the ABNF's order, each at most once.
    const expirationTime = field(lines[i], "Expiration Time: ")
    if (expirationTime !== undefined) i++
    const expirationTimeMs =
      expirationTime === undefined ? undefined : yield* parseDateTime("Expiration Time", expirationTime)
    const notBefore = field(lines[i], "Not Before: ")
    if (notBefore !== undefined) i++
    const notBeforeMs = notBefore === undefined ? undefined : yield* parseDateTime("Not Before", notBefore)
    const requestId = field(lines[i], "Request ID: ")
    if (requestId !== undefined) {
      i++
      if (!requestIdRe.test(requestId)) return yield* invalid("Request ID is malformed")
    }
    if (lines[i] !== "Resources:") return yield* invalid("Resources are missing or a line is out of place")
    i++
    const resources: Array<string> = []
    while (i < lines.length) {
      const r = field(next(), "- ")
      if (r === undefined || !uriRe.test(r)) return yield* invalid("a line after Resources is not a resource")
      resources.push(r)
    }

    const [first, second, ...rest] = resources
    if (first === undefined || !first.startsWith(NAMESPACE_URN_PREFIX)) {
      return yield* invalid("the first resource must be the namespace URN")
    }
    const namespace = first.slice(NAMESPACE_URN_PREFIX.length)
    if (!namespaceRe.test(namespace)) return yield* invalid("the namespace URN names no valid namespace")
    let deviceId: string | undefined
    if (second !== undefined) {
      if (!second.startsWith(DEVICE_URN_PREFIX)) return yield* invalid("the second resource must be a device URN")
      deviceId = second.slice(DEVICE_URN_PREFIX.length)
      if (!deviceIdRe.test(deviceId)) {
        return yield* invalid("the device URN names no RFC 7638 SHA-256 thumbprint (43 base64url characters)")
      }
    }
    if (rest.length > 0) return yield* invalid("resources are the namespace URN and at most one device URN")

    return {
      scheme,
      domain: authority,
      address,
      statement,
      uri,
      version: "1",
      chainId: Number(chain),
      nonce,
      issuedAt,
      issuedAtMs,
      expirationTime,
      expirationTimeMs,
      notBefore,
      notBeforeMs,
      requestId,
      resources,
      namespace,
      deviceId
    } satisfies ParsedSiwe
  })

/**
 * Builds the challenge text for a wallet. Every input is checked against its own grammar first,
 * and the result is parsed back, so no input can smuggle a line into the message.
 */
export const makeChallenge = (input: ChallengeInput): Effect.Effect<string, SiweMessageInvalid> =>
  Effect.gen(function* () {
    if (!domainRe.test(input.domain)) return yield* invalid("the domain is not host[:port]")
    if (!uriRe.test(input.uri)) return yield* invalid("the URI is malformed")
    if (!namespaceRe.test(input.namespace)) return yield* invalid("the namespace is not a namespace name")
    if (input.deviceId !== undefined && !deviceIdRe.test(input.deviceId)) {
      return yield* invalid("the device id is not an RFC 7638 SHA-256 thumbprint")
    }
    if (!nonceRe.test(input.nonce)) return yield* invalid("the nonce must be 8 or more alphanumerics")
    if (!Number.isSafeInteger(input.chainId) || input.chainId < 1) return yield* invalid("the chain id is not a positive integer")
    if (!Number.isFinite(input.issuedAt) || !Number.isFinite(input.expirationTime) || input.expirationTime <= input.issuedAt) {
      return yield* invalid("the expiration time must come after the issue time")
    }
    if (!(yield* isValidAddress(input.wallet))) return yield* invalid("the wallet is not a valid address")
    const address = yield* toChecksumAddress(input.wallet)
    const issuedAt = yield* Effect.try({
      try: () => new Date(input.issuedAt).toISOString(),
      catch: () => invalid("the issue time is out of range")
    })
    const expirationTime = yield* Effect.try({
      try: () => new Date(input.expirationTime).toISOString(),
      catch: () => invalid("the expiration time is out of range")
    })
    const resources = [`- ${NAMESPACE_URN_PREFIX}${input.namespace}`]
    if (input.deviceId !== undefined) resources.push(`- ${DEVICE_URN_PREFIX}${input.deviceId}`)
    const text = [
      `${input.domain}${HEADER_SUFFIX}`,
      address,
      "",
      statementFor(input.namespace),
      "",
      `URI: ${input.uri}`,
      "Version: 1",
      `Chain ID: ${input.chainId}`,
      `Nonce: ${input.nonce}`,
      `Issued At: ${issuedAt}`,
      `Expiration Time: ${expirationTime}`,
      "Resources:",
      ...resources
    ].join("\n")
    const back = yield* parseMessage(text)
    if (
      back.domain !== input.domain ||
      back.address.toLowerCase() !== input.wallet.toLowerCase() ||
      back.namespace !== input.namespace ||
      back.deviceId !== input.deviceId ||
      back.nonce !== input.nonce
    ) {
      return yield* invalid("the challenge does not read back as built")
    }
    return text
  })

/** The EIP-191 `personal_sign` digest of a message: keccak256 of the prefixed UTF-8 bytes. */
export const personalSignHash = (message: string): Uint8Array => {
  const body = utf8ToBytes(message)
  const prefix = utf8ToBytes(`\x19Ethereum Signed Message:\n${body.length}`)
  const all = new Uint8Array(prefix.length + body.length)
  all.set(prefix, 0)
  all.set(body, prefix.length)
  return keccak_256(all)
}

const badSignature = (reason: string) => new SiweSignatureInvalid({ reason })

/** Recovers the lowercase address that `personal_sign`ed the message with a 65-byte r||s||v hex signature. */
export const recoverPersonalSign = (
  message: string,
  signatureHex: string
): Effect.Effect<string, SiweSignatureInvalid> =>
  Effect.gen(function* () {
    const hex = signatureHex.startsWith("0x") ? signatureHex.slice(2) : signatureHex
    if (!/^[0-9a-fA-F]{130}$/.test(hex)) return yield* badSignature("a signature is 65 bytes of hex")
    const bytes = hexToBytes(hex)
    const v = bytes[64]
    // Wallets write v as 27/28 (legacy) or 0/1 (raw recovery bit); anything else names no key.
    const bit = v === 27 || v === 28 ? v - 27 : v === 0 || v === 1 ? v : undefined
    if (bit === undefined) return yield* badSignature("v must be 27, 28, 0 or 1")
    const sig = yield* Effect.try({
      try: () => secp256k1.Signature.fromCompact(bytes.subarray(0, 64)),
      catch: () => badSignature("r or s is out of range")
    })
    // EIP-2: the high-s twin of a signature is refused so a signature has one spelling.
    if (sig.hasHighS()) return yield* badSignature("s is in the upper half of the curve order")
    const digest = personalSignHash(message)
    const point = yield* Effect.try({
      try: () => sig.addRecoveryBit(bit).recoverPublicKey(digest),
      catch: () => badSignature("the signature recovers no public key")
    })
    const uncompressed = point.toRawBytes(false)
    return `0x${bytesToHex(keccak_256(uncompressed.subarray(1)).subarray(12))}`
  })

/** Parameters of a sign-in check; `now` is epoch milliseconds (from `Clock`). */
export interface VerifySignInInput {
  readonly message: string
  readonly signature: string
  readonly expectedDomain: string
  readonly now: number
}

/**
 * Checks a signed challenge: grammar, host, statement, validity window and signer. Does not spend
 * the nonce; the caller must, exactly once.
 */
export const verifySignIn = (input: VerifySignInInput): Effect.Effect<VerifiedSignIn, SiweError> =>
  Effect.gen(function* () {
    const parsed = yield* parseMessage(input.message)
    // Portico issues scheme-less messages; a scheme names an origin we never bound.
    if (parsed.scheme !== undefined) {
      return yield* new SiweDomainMismatch({ reason: "the message names a scheme; Portico issues none" })
    }
    if (parsed.domain.toLowerCase() !== input.expectedDomain.toLowerCase()) {
      return yield* new SiweDomainMismatch({ reason: "the message was made for another host" })
    }
    // The statement is what the wallet shows the user; it must name the namespace actually granted.
    if (parsed.statement !== statementFor(parsed.namespace)) {
      return yield* invalid("the statement does not name the namespace of the resources")
    }
    if (parsed.expirationTimeMs === undefined) return yield* invalid("Expiration Time is required")
    if (parsed.expirationTimeMs <= parsed.issuedAtMs) return yield* invalid("Expiration Time precedes Issued At")
    if (parsed.issuedAtMs > input.now + ISSUED_AT_SKEW_MS) {
      return yield* new SiweNotYetValid({ reason: "Issued At is in the future" })
    }
    if (parsed.notBeforeMs !== undefined && input.now < parsed.notBeforeMs) {
      return yield* new SiweNotYetValid({ reason: "Not Before has not been reached" })
    }
    if (input.now >= parsed.expirationTimeMs) return yield* new SiweExpired({ reason: "the message has expired" })
    const signer = yield* recoverPersonalSign(input.message, input.signature)
    const wallet = parsed.address.toLowerCase()
    if (signer !== wallet) {
      return yield* new SiweWalletMismatch({ reason: "the signature is not the message's wallet's" })
    }
    return {
      wallet,
      namespace: parsed.namespace,
      deviceId: parsed.deviceId,
      nonce: parsed.nonce,
      expiresAt: parsed.expirationTimeMs
    } satisfies VerifiedSignIn
  })
