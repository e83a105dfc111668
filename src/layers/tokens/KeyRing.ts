/**
 * The signing key ring for access tokens: Ed25519 (EdDSA) keys with a `kid`, kept in the registry
 * sealed at rest so every gateway on one registry signs and verifies alike, published as a JWKS.
 */
import { Clock, Context, Data, Effect, Layer } from "effect"
import * as jose from "jose"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { Sealer, type SealError } from "../secrets/Sealer.js"
import { parseStrictJson } from "../../domain/StrictJson.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export class TokenInvalid extends Data.TaggedError("TokenInvalid")<{ readonly reason: string }> {}

export interface AccessClaims {
  readonly sub: string
  readonly ns: string
  readonly role: string
  readonly grants: ReadonlyArray<string>
  readonly sid?: string
  readonly did?: string
  /** The API key a token was exchanged from. */
  readonly key?: string
  /** The deployment a workload token was minted for (src/layers/workload/WorkloadTokens.ts). */
  readonly dep?: string
}

export interface VerifiedClaims extends AccessClaims {
  readonly iat: number
  readonly exp: number
  readonly jti: string
}

export interface KeyRingService {
  /** Signs an access token living `ttlSeconds`. */
  readonly sign: (claims: AccessClaims, ttlSeconds: number) => Effect.Effect<string>
  /** Verifies signature, algorithm, issuer and expiry; any failure is `TokenInvalid`. */
  readonly verify: (token: string) => Effect.Effect<VerifiedClaims, TokenInvalid>
  /**
   * The claims of a token `verify` accepted before and that has not expired at `now` (Unix ms);
   * undefined for any other token, which must go through `verify`.
   */
  readonly verifiedBefore: (token: string, now: number) => VerifiedClaims | undefined
  /** The public keys, as published at `/v1/auth/jwks`. */
  readonly jwks: Effect.Effect<{ readonly keys: ReadonlyArray<jose.JWK> }>
}

const ALG = "EdDSA"
export const ISSUER = "portico"

interface LoadedKey {
  readonly kid: string
  readonly publicJwk: jose.JWK
  readonly publicKey: jose.CryptoKey | Uint8Array
  readonly privateKey: jose.CryptoKey | Uint8Array | undefined
}

export class KeyRing extends Context.Tag("portico/KeyRing")<KeyRing, KeyRingService>() {
  static readonly Live = Layer.effect(
    KeyRing,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const sealer = yield* Sealer

      const load: Effect.Effect<ReadonlyArray<LoadedKey>, StoreError | SealError | TokenInvalid> = Effect.gen(
        function* () {
          const rows = yield* store.query({
            sql: "SELECT kid, public_jwk, sealed_private FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at, kid",
            params: []
          })
          return yield* Effect.forEach(rows, (row) =>
            Effect.gen(function* () {
              const kid = String(row.kid)
              const publicJwk = yield* parseJwk(String(row.public_jwk))
              const privateJson = yield* sealer.open("signing-keys", kid, String(row.sealed_private))
              const privateJwk = yield* parseJwk(new TextDecoder().decode(privateJson))
              const publicKey = yield* importJwk(publicJwk)
              const privateKey = yield* importJwk(privateJwk)
              return { kid, publicJwk, publicKey, privateKey }
            })
          )
        }
      )

      // Two gateways starting on an empty registry may both create a key; both rows survive and
      // every gateway signs with the oldest one, verifying with all of them.
      let keys = yield* load
      if (keys.length === 0) {
        const { publicKey, privateKey } = yield* Effect.promise(() =>
          jose.generateKeyPair(ALG, { crv: "Ed25519", extractable: true })
        )
        const publicJwk = yield* Effect.promise(() => jose.exportJWK(publicKey))
        const privateJwk = yield* Effect.promise(() => jose.exportJWK(privateKey))
        const kid = yield* Effect.promise(() => jose.calculateJwkThumbprint(publicJwk))
        const now = yield* Clock.currentTimeMillis
        yield* store.exec({
          sql: "INSERT INTO signing_keys (kid, alg, public_jwk, sealed_private, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
          params: [
            kid,
            ALG,
            JSON.stringify({ ...publicJwk, kid, alg: ALG, use: "sig" }),
            sealer.seal("signing-keys", kid, new TextEncoder().encode(JSON.stringify(privateJwk))),
            now
          ]
        })
        keys = yield* load
      }
      const signer = keys[0]
      if (signer === undefined || signer.privateKey === undefined) {
        return yield* Effect.dieMessage("no signing key could be loaded")
      }
      const byKid = new Map(keys.map((k) => [k.kid, k]))
      let lastReload = 0

      // A key created by another gateway after we started is found by reloading, at most once a
      // second, so a flood of forged kids cannot turn into a flood of registry reads.
      const keyFor = (kid: string): Effect.Effect<LoadedKey | undefined> =>
        Effect.gen(function* () {
          const known = byKid.get(kid)
          if (known !== undefined) return known
          const now = yield* Clock.currentTimeMillis
          if (now - lastReload < 1000) return undefined
          lastReload = now
          const fresh = yield* Effect.orElseSucceed(load, () => [] as ReadonlyArray<LoadedKey>)
          for (const k of fresh) byKid.set(k.kid, k)
          return byKid.get(kid)
        })

      const verified = new Map<string, VerifiedClaims>()
      const verifiedBefore = (token: string, now: number): VerifiedClaims | undefined => {
        const known = verified.get(token)
        return known !== undefined && known.exp * 1000 > now ? known : undefined
      }
      const signKey = signer.privateKey
      return {
        verifiedBefore,
        sign: (claims, ttlSeconds) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.promise(() => {
              const iat = Math.floor(now / 1000)
              return new jose.SignJWT({ ...claims })
                .setProtectedHeader({ alg: ALG, kid: signer.kid, typ: "JWT" })
                .setIssuer(ISSUER)
                .setIssuedAt(iat)
                .setExpirationTime(iat + ttlSeconds)
                .setJti(crypto.randomUUID())
                .sign(signKey)
            })
          ),
        verify: (token) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            // A token verified before is immutable: its claims are reused until it expires.
            // Liveness (session, device, key) is checked by the caller on every request anyway.
            const known = verifiedBefore(token, now)
            if (known !== undefined) return known
            const [headerPart, payloadPart] = token.split(".")
            if (headerPart === undefined || payloadPart === undefined) {
              return yield* new TokenInvalid({ reason: "malformed token" })
            }
            // Strict JOSE: a header or payload with a repeated member is refused, not last-wins.
            yield* Effect.mapError(
              Effect.zip(parseStrictJson(b64Text(headerPart), JOSE_LIMITS), parseStrictJson(b64Text(payloadPart), JOSE_LIMITS)),
              () => new TokenInvalid({ reason: "malformed token" })
            )
            const header = yield* Effect.try({
              try: () => jose.decodeProtectedHeader(token),
              catch: () => new TokenInvalid({ reason: "malformed token" })
            })
            if (header.alg !== ALG || typeof header.kid !== "string") {
              return yield* new TokenInvalid({ reason: "unsupported token algorithm" })
            }
            const key = yield* keyFor(header.kid)
            if (key === undefined) return yield* new TokenInvalid({ reason: "unknown signing key" })
            const { payload } = yield* Effect.tryPromise({
              try: () =>
                jose.jwtVerify(token, key.publicKey, {
                  algorithms: [ALG],
                  issuer: ISSUER,
                  currentDate: new Date(now),
                  requiredClaims: ["sub", "exp", "iat", "jti"]
                }),
              catch: () => new TokenInvalid({ reason: "token signature or claims invalid" })
            })
            const claims = yield* decodeClaims(payload)
            if (verified.size >= VERIFIED_MAX) verified.clear()
            verified.set(token, claims)
            return claims
          }),
        jwks: Effect.sync(() => ({ keys: Array.from(byKid.values(), (k) => k.publicJwk) }))
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    KeyRing.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test
        )
      )
    )
  )
}

const VERIFIED_MAX = 10_000
const JOSE_LIMITS = { maxChars: 8192, maxDepth: 4 }
const b64Text = (part: string) => Buffer.from(part, "base64url").toString("utf8")

const parseJwk = (text: string) =>
  Effect.try({
    try: () => JSON.parse(text) as jose.JWK,
    catch: () => new TokenInvalid({ reason: "stored signing key is damaged" })
  })

const importJwk = (jwk: jose.JWK) =>
  Effect.tryPromise({
    try: () => jose.importJWK(jwk, ALG),
    catch: () => new TokenInvalid({ reason: "stored signing key cannot be imported" })
  })

const decodeClaims = (payload: jose.JWTPayload): Effect.Effect<VerifiedClaims, TokenInvalid> => {
  const { sub, ns, role, grants, sid, did, key, dep, iat, exp, jti } = payload as Record<string, unknown>
  if (
    typeof sub !== "string" ||
    typeof ns !== "string" ||
    typeof role !== "string" ||
    !Array.isArray(grants) ||
    !grants.every((g) => typeof g === "string") ||
    typeof iat !== "number" ||
    typeof exp !== "number" ||
    typeof jti !== "string"
  ) {
    return Effect.fail(new TokenInvalid({ reason: "token claims malformed" }))
  }
  return Effect.succeed({
    sub,
    ns,
    role,
    grants: grants as ReadonlyArray<string>,
    iat,
    exp,
    jti,
    ...(typeof sid === "string" ? { sid } : {}),
    ...(typeof did === "string" ? { did } : {}),
    ...(typeof key === "string" ? { key } : {}),
    ...(typeof dep === "string" ? { dep } : {})
  })
}
