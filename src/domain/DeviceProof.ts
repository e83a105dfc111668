/**
 * Device proofs (spec §2.5, §5.8-9): the `{iat, id, sig}` object a device-bound session sends to
 * refresh, approve, claim, revoke or end a session, the exact bytes it signs, its freshness check,
 * and the nonce key under which the service spends its `id`. Pure: spending the nonce is the
 * service's job.
 */
import { sha256 } from "@noble/hashes/sha2"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils"
import { Data, Effect, Either, ParseResult, Schema } from "effect"
import { type DeviceKey, MAX_SIGNATURE_CHARS, verifyDeviceSignature } from "./DeviceKey.js"
import { memberSource, parseStrictJson } from "./StrictJson.js"

/** First line of every signed proof: binds the signature to this purpose and version. */
export const PROOF_LABEL = "portico-device-proof-v1"
/** How far `iat` may be from the gateway clock, either way. */
export const PROOF_SKEW_SECONDS = 60

/** What a proof authorises; each has its own binding (spec §2.5). */
export const DeviceProofAction = Schema.Literal("refresh", "approve", "claim", "revoke", "end-session")
export type DeviceProofAction = typeof DeviceProofAction.Type

/** The wire proof. Unknown members are refused so a signed object has a single meaning. */
export const DeviceProof = Schema.Struct({
  iat: Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER)).annotations({
    description: "Issued at, integer Unix seconds"
  }),
  id: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{16,128}$/)).annotations({
    description: "Random proof id, 16-128 characters of [A-Za-z0-9_-]; spent once"
  }),
  sig: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/), Schema.maxLength(MAX_SIGNATURE_CHARS)).annotations({
    description: "Device signature over the proof message, base64url"
  })
}).annotations({
  identifier: "DeviceProof",
  parseOptions: { onExcessProperty: "error" }
})
export type DeviceProof = typeof DeviceProof.Type

/** Why a proof was refused; all map to 401 `DEVICE_PROOF_INVALID`. */
export type DeviceProofFailure = "malformed" | "stale" | "bad_signature"

/** The proof is malformed, stale, or not signed by the device: 401 `DEVICE_PROOF_INVALID`. */
export class DeviceProofInvalid extends Data.TaggedError("DeviceProofInvalid")<{
  readonly kind: DeviceProofFailure
  readonly reason: string
}> {
  get code(): "DEVICE_PROOF_INVALID" {
    return "DEVICE_PROOF_INVALID"
  }
  get status(): 401 {
    return 401
  }
}

/** The text is not JSON, is too deep or too long, or repeats a key within one object. */

const malformed = (reason: string) => new DeviceProofInvalid({ kind: "malformed", reason })

const ACTIONS: ReadonlySet<string> = new Set(DeviceProofAction.literals)

/**
 * The signed bytes' text: label, action, namespace, binding, iat, id joined by "\n", no trailing
 * newline. A field holding CR or LF could shift the lines and make one message read as another,
 * so such fields are refused rather than escaped.
 */
export const proofMessage = (
  action: DeviceProofAction,
  namespace: string,
  binding: string,
  iat: number,
  id: string
): Effect.Effect<string, DeviceProofInvalid> => {
  if (!ACTIONS.has(action)) return Effect.fail(malformed("unknown proof action"))
  if (!Number.isSafeInteger(iat) || iat < 0) return Effect.fail(malformed("iat must be a non-negative integer"))
  for (const [name, value] of [["namespace", namespace], ["binding", binding], ["id", id]] as const) {
    if (value.length === 0) return Effect.fail(malformed(`the proof ${name} is empty`))
    if (value.includes("\n") || value.includes("\r")) {
      return Effect.fail(malformed(`the proof ${name} contains a line break`))
    }
  }
  return Effect.succeed([PROOF_LABEL, action, namespace, binding, String(iat), id].join("\n"))
}

/**
 * Key under which the service spends a proof id: one use per action per credential. The binding is
 * hashed (with the namespace, so equal short codes of two namespaces never collide) so that a
 * refresh token never lands raw in the nonce table.
 */
export const proofNonceKey = (action: DeviceProofAction, namespace: string, binding: string, id: string): string =>
  `${action}:${bytesToHex(sha256(utf8ToBytes(`${namespace}\n${binding}`)))}:${id}`

/**
 * Epoch milliseconds until which a spent id must be remembered: after it the proof is stale anyway,
 * so a replay is refused by the clock. One second of margin covers rounding of `now`.
 */
export const proofNonceExpiresAt = (iat: number): number => (iat + PROOF_SKEW_SECONDS + 1) * 1000

/** A proof that passed every check, with the nonce key the service must spend before acting. */
export interface CheckedProof {
  readonly proof: DeviceProof
  readonly nonceKey: string
  /** Epoch milliseconds: keep the spent nonce at least this long. */
  readonly nonceExpiresAt: number
}

export interface CheckProofInput {
  /** The proof as received (decoded here, so raw JSON values are fine). */
  readonly proof: unknown
  readonly action: DeviceProofAction
  readonly namespace: string
  /** refresh token, user code, device code, device id or session id, by action (spec §2.5). */
  readonly binding: string
  /** The key of the device the credential is bound to. */
  readonly key: DeviceKey
  /** Gateway clock, epoch milliseconds (Clock.currentTimeMillis). */
  readonly now: number
}

const decodeProof = Schema.decodeUnknownEither(DeviceProof, { onExcessProperty: "error" })

/** JSON's integer literal: digits with an optional minus, no fraction, no exponent. */
const INTEGER_LITERAL = /^-?(?:0|[1-9][0-9]*)$/

/** A schema refusal as the API writes one (docs/api.md, "Errors"): `member: problem`, one per issue, never the schema's tree. */
const issueLines = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .slice(0, 3)
    .map((issue) => {
      const at = issue.path.map(String).join(".")
      const message = issue.message.split("\n")[0] ?? issue.message
      return at === "" ? message : `${at}: ${message}`
    })
    .join("; ")

/**
 * A proof as it came in a request body, with the source text of its `iat` member. JSON.parse
 * reads `1.795667006e9` and `1795667006.000` as the integer 1795667006, so the decoded value
 * alone cannot say how `iat` was written, and the rule is that only an integer literal is an
 * integer (docs/auth.md). `iatSource` is undefined when the body has no such member (the
 * decode then refuses the proof anyway).
 */
export class WrittenProof {
  constructor(
    readonly value: unknown,
    readonly iatSource: string | undefined
  ) {}
}

/** Decodes a proof, raw or as written; an `iat` not written as an integer literal is malformed. */
const decodeWritten = (proof: unknown): Either.Either<DeviceProof, DeviceProofInvalid> => {
  const written = proof instanceof WrittenProof ? proof : undefined
  if (written?.iatSource !== undefined && !INTEGER_LITERAL.test(written.iatSource)) {
    return Either.left(malformed(`the device proof is malformed: iat must be written as an integer literal, not ${written.iatSource.slice(0, 32)}`))
  }
  const decoded = decodeProof(written === undefined ? proof : written.value)
  return Either.isLeft(decoded)
    ? Either.left(malformed(`the device proof is malformed: ${issueLines(decoded.left)}`))
    : Either.right(decoded.right)
}

/** Checks shape, freshness (|now - iat| <= 60 s) and the device signature over `proofMessage`. */
export const checkProof = (input: CheckProofInput): Effect.Effect<CheckedProof, DeviceProofInvalid> =>
  Effect.gen(function* () {
    const proof = yield* decodeWritten(input.proof)
    const iatMs = proof.iat * 1000
    const skewMs = PROOF_SKEW_SECONDS * 1000
    if (iatMs < input.now - skewMs) return yield* new DeviceProofInvalid({ kind: "stale", reason: "the device proof is too old" })
    if (iatMs > input.now + skewMs) {
      return yield* new DeviceProofInvalid({ kind: "stale", reason: "the device proof is issued in the future" })
    }
    const message = yield* proofMessage(input.action, input.namespace, input.binding, proof.iat, proof.id)
    yield* verifyDeviceSignature(input.key, message, proof.sig).pipe(
      Effect.mapError(() => new DeviceProofInvalid({ kind: "bad_signature", reason: "the device proof is not signed by this device" }))
    )
    return {
      proof,
      nonceKey: proofNonceKey(input.action, input.namespace, input.binding, proof.id),
      nonceExpiresAt: proofNonceExpiresAt(proof.iat)
    }
  })

// ---------------------------------------------------------------------------------------------
// Strict JSON: JSON.parse keeps the last of repeated keys, so `{"iat":1,"iat":2}` would mean one
// thing to us and maybe another to a client library or proxy. This scanner walks the RFC 8259
// grammar once, compares keys after unescaping (so "a" and "\u0061" are the same key), and only
// then hands the text to JSON.parse.

const PROOF_LIMITS = { maxChars: 4096, maxDepth: 4 }

/** Reads a proof from JSON text strictly (no repeated keys, no unknown members, `iat` an integer literal). */
export const decodeProofJson = (text: string): Effect.Effect<DeviceProof, DeviceProofInvalid> =>
  parseStrictJson(text, PROOF_LIMITS).pipe(
    Effect.mapError((e) => malformed(`the device proof is not strict JSON: ${e.reason}`)),
    Effect.flatMap((value) => decodeWritten(new WrittenProof(value, memberSource(text, "iat", PROOF_LIMITS))))
  )
