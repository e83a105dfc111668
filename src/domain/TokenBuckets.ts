/**
 * Token buckets held in this process: one per key, refilled at `rps` up to `burst`, answered on
 * the spot. The gateway's own budgets (every budget without Redis; the client networks always),
 * the fallback of the shared ones while Redis does not answer (src/layers/ratelimit/SharedBuckets.ts),
 * and the vault's per-network and per-identity buckets. Pure: no clock of its own.
 */

/** A bucket's refill rate (tokens per second) and its size; the settings' RateLimitSetting is one. */
export interface BucketLimit {
  readonly rps: number
  readonly burst: number
}

export interface Decision {
  readonly allowed: boolean
  /** Seconds until one request would be allowed again. */
  readonly retryAfterSeconds: number
}

export const allowed: Decision = { allowed: true, retryAfterSeconds: 0 }

/** A refusal whose next token is `seconds` away: `Retry-After` in whole seconds, at least 1. */
export const refusedFor = (seconds: number): Decision => ({ allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(seconds)) })

interface Bucket {
  tokens: number
  at: number
}

const MAX_BUCKETS = 100_000

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>()

  /** Takes one token from `key`'s bucket at `now` (Unix ms), or says how long until one is there. */
  take(key: string, limit: BucketLimit, now: number): Decision {
    let bucket = this.buckets.get(key)
    if (bucket === undefined) {
      // Bounded memory: when full, drop the oldest buckets (a Map iterates in insertion order).
      if (this.buckets.size >= MAX_BUCKETS) {
        let drop = Math.ceil(MAX_BUCKETS / 10)
        for (const k of this.buckets.keys()) {
          this.buckets.delete(k)
          if (--drop === 0) break
        }
      }
      bucket = { tokens: limit.burst, at: now }
      this.buckets.set(key, bucket)
    } else {
      bucket.tokens = Math.min(limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * limit.rps)
      bucket.at = now
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return allowed
    }
    return refusedFor((1 - bucket.tokens) / limit.rps)
  }
}
