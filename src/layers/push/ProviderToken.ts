/**
 * APNs provider tokens: an ES256 JWT (header `kid` = key id, claims `iss` = team id and `iat`)
 * signed with the tenant's p8 key. APNs answers `TooManyProviderTokenUpdates` when a team's token
 * changes more often than every 20 minutes and `ExpiredProviderToken` when it is over an hour old,
 * so one token per signing key is minted and reused for a fixed lifetime between 20 and 50 minutes
 * (default 40). The cache is keyed on team id, key id and a hash of the key text, so a replaced
 * credential gets its own token at once.
 */
import { Effect } from "effect"
import { SignJWT } from "jose"
import * as crypto from "node:crypto"

export interface ApnsSigningKey {
  readonly teamId: string
  readonly keyId: string
  /** PKCS#8 PEM text of the P-256 private key (Apple's `.p8` file). */
  readonly p8Key: string
}

export const MIN_TOKEN_LIFETIME_MS = 20 * 60_000
export const MAX_TOKEN_LIFETIME_MS = 50 * 60_000
export const DEFAULT_TOKEN_LIFETIME_MS = 40 * 60_000

/** Stable identity of a signing key: its token cache key and connection key. */
export const signingKeyId = (key: ApnsSigningKey): string =>
  key.teamId + "|" + key.keyId + "|" + crypto.createHash("sha256").update(key.p8Key).digest("base64url")

interface Entry {
  readonly mintedAt: number
  readonly token: Promise<string>
}

export interface ProviderTokens {
  /** The current token for the key, minting one when none is cached or it is past its lifetime. */
  readonly current: (key: ApnsSigningKey) => Effect.Effect<string, string>
  /**
   * Drops `token` when APNs refused it as expired or invalid, but only once it is at least the
   * 20-minute minimum old: a fresh token refused means a clock or key problem that re-minting would
   * only turn into `TooManyProviderTokenUpdates`.
   */
  readonly refused: (key: ApnsSigningKey, token: string) => void
  /** How many tokens were minted (for tests and the bench). */
  readonly minted: () => number
}

export interface ProviderTokenOptions {
  /** Reuse window, clamped to 20-50 minutes. */
  readonly lifetimeMs?: number
  /** Milliseconds since the epoch; tests move it. */
  readonly now?: () => number
}

export const makeProviderTokens = (options: ProviderTokenOptions = {}): ProviderTokens => {
  const lifetime = Math.min(MAX_TOKEN_LIFETIME_MS, Math.max(MIN_TOKEN_LIFETIME_MS, options.lifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS))
  const now = options.now ?? Date.now
  const entries = new Map<string, Entry>()
  let mintedCount = 0

  const mint = (key: ApnsSigningKey, at: number): Promise<string> => {
    mintedCount += 1
    // Inside `then`, so a key that does not parse rejects the promise instead of throwing.
    return Promise.resolve().then(() =>
      new SignJWT({})
        .setProtectedHeader({ alg: "ES256", kid: key.keyId })
        .setIssuer(key.teamId)
        .setIssuedAt(Math.floor(at / 1000))
        .sign(crypto.createPrivateKey({ key: key.p8Key, format: "pem" }))
    )
  }

  return {
    current: (key) =>
      Effect.suspend(() => {
        const id = signingKeyId(key)
        const at = now()
        let entry = entries.get(id)
        if (entry === undefined || at - entry.mintedAt >= lifetime) {
          // The promise is cached before it settles, so concurrent sends share one mint.
          entry = { mintedAt: at, token: mint(key, at) }
          entries.set(id, entry)
          const minted = entry
          minted.token.catch(() => {
            if (entries.get(id) === minted) entries.delete(id)
          })
        }
        const token = entry.token
        return Effect.tryPromise({ try: () => token, catch: () => "the p8 key cannot sign an ES256 token" })
      }),
    refused: (key, token) => {
      const id = signingKeyId(key)
      const entry = entries.get(id)
      if (entry === undefined || now() - entry.mintedAt < MIN_TOKEN_LIFETIME_MS) return
      void entry.token.then((current) => {
        if (current === token && entries.get(id) === entry) entries.delete(id)
      }, () => undefined)
    },
    minted: () => mintedCount
  }
}
