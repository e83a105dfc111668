/**
 * One kind of budget (namespaces, wallets) shared by every gateway through Redis, with the two
 * things a request path needs that a Redis round trip cannot give:
 *
 * - **An answer on the spot** (`takeNow`, for the listener's fast lane). A take asks Redis for a
 *   small lease of tokens (up to 1/32 of the burst, at most 64) instead of one; the tokens beyond
 *   the first are spent here without asking again while the lease lasts (500 ms). Every token
 *   spent was first taken from the shared bucket, so N gateways together never admit more than
 *   the one budget allows, give or take the leases they hold (at most N leases). Tokens a lease
 *   did not use go back into the shared bucket with this gateway's next take. A take that found
 *   the bucket empty is remembered until its next token is due, and refused here meanwhile.
 *   Otherwise `takeNow` has no answer and the caller takes the asynchronous path.
 * - **No 5xx when Redis fails.** A take that Redis does not answer (down, refused, over 250 ms)
 *   is answered from this gateway's own buckets (TokenBuckets.ts), exactly as a gateway without
 *   Redis answers, and so is every take for the next second; then Redis is tried again. During an
 *   outage each gateway enforces the full budget on its own (N gateways admit up to N budgets),
 *   neither refusing everyone nor admitting without a limit (docs/operations.md, "Rate limits").
 */
import { Clock, Effect } from "effect"
import type { RateLimitSetting } from "../config/PorticoConfig.js"
import type { SharedBucketsService } from "./SharedBuckets.js"
import { allowed, type Decision, refusedFor, TokenBuckets } from "../../domain/TokenBuckets.js"

/** How long leased tokens may be spent after Redis granted them. */
export const LEASE_MS = 500
/** How long a gateway answers from its own buckets after Redis failed, before it tries again. */
export const OUTAGE_MS = 1000
const MAX_LEASES = 100_000

/** Tokens one take asks for: 1/32 of the burst, at least 1, at most 64. */
export const leaseSizeOf = (limit: RateLimitSetting): number => Math.max(1, Math.min(64, Math.floor(limit.burst / 32)))

interface Lease {
  /** Granted and not yet spent. */
  tokens: number
  /** Unix ms after which `tokens` may not be spent (they go back with the next take). */
  until: number
  /** Unix ms before which the shared bucket is known to be empty. */
  emptyUntil: number
  /** A take for this key is on its way to Redis. */
  taking: boolean
}

/** Whether Redis is being answered for, shared by every kind of budget on one connection. */
export class StoreHealth {
  private downUntil = 0
  private down = false

  isDown(now: number): boolean {
    return now < this.downUntil
  }

  /** Records a failed take; true when Redis was answering until now. */
  failed(now: number): boolean {
    this.downUntil = now + OUTAGE_MS
    const news = !this.down
    this.down = true
    return news
  }

  /** Records an answered take; true when Redis had been failing. */
  answered(): boolean {
    const news = this.down
    this.down = false
    this.downUntil = 0
    return news
  }
}

export class SharedBudget {
  private readonly leases = new Map<string, Lease>()
  private readonly local = new TokenBuckets()

  constructor(
    private readonly store: SharedBucketsService,
    private readonly health: StoreHealth,
    /** Names the kind in Redis keys: `{<kind>:<key>}`. */
    private readonly kind: string,
    /** Tokens one take asks for. */
    private readonly leaseSize: (limit: RateLimitSetting) => number
  ) {}

  /** An answer without Redis at `now` (Unix ms), or undefined when only Redis can give one. */
  takeNow(key: string, limit: RateLimitSetting, now: number): Decision | undefined {
    if (this.health.isDown(now)) return this.local.take(key, limit, now)
    const lease = this.leases.get(key)
    if (lease === undefined) return undefined
    if (lease.tokens >= 1 && now < lease.until) {
      lease.tokens -= 1
      return allowed
    }
    if (now < lease.emptyUntil) return refusedFor((lease.emptyUntil - now) / 1000)
    return undefined
  }

  /** One token for `key`: leased, from Redis, or, while Redis fails, from this gateway's bucket. */
  take(key: string, limit: RateLimitSetting): Effect.Effect<Decision> {
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const spot = this.takeNow(key, limit, now)
      if (spot !== undefined) return Effect.succeed(spot)
      const lease = this.leaseOf(key)
      // what an expired lease did not spend goes back to the shared bucket with this take
      const refund = now >= lease.until ? lease.tokens : 0
      if (refund > 0) lease.tokens = 0
      // a take already on its way asks for the lease; the ones meanwhile ask for one token each
      const want = lease.taking ? 1 : this.leaseSize(limit)
      lease.taking = true
      return this.store.take(`{${this.kind}:${key}}`, limit, want, refund).pipe(
        Effect.ensuring(Effect.sync(() => void (lease.taking = false))),
        Effect.flatMap((grant) => {
          const recovered = this.health.answered()
          if (grant.granted >= 1) {
            lease.tokens = (now < lease.until ? lease.tokens : 0) + grant.granted - 1
            lease.until = now + LEASE_MS
            lease.emptyUntil = 0
          } else {
            lease.emptyUntil = now + grant.waitMs
          }
          const decision = grant.granted >= 1 ? allowed : refusedFor(grant.waitMs / 1000)
          return recovered ? Effect.as(Effect.logInfo("rate limits: Redis answers again; budgets are shared"), decision) : Effect.succeed(decision)
        }),
        Effect.catchAll((error) => {
          const news = this.health.failed(now)
          const decision = this.local.take(key, limit, now)
          return news
            ? Effect.as(
                Effect.logWarning("rate limits: Redis did not answer; each gateway holds its own budgets until it does", error.detail),
                decision
              )
            : Effect.succeed(decision)
        })
      )
    })
  }

  private leaseOf(key: string): Lease {
    let lease = this.leases.get(key)
    if (lease === undefined) {
      if (this.leases.size >= MAX_LEASES) {
        // Bounded memory: drop the oldest tenth (their unspent tokens are simply not returned).
        let drop = Math.ceil(MAX_LEASES / 10)
        for (const k of this.leases.keys()) {
          this.leases.delete(k)
          if (--drop === 0) break
        }
      }
      lease = { tokens: 0, until: 0, emptyUntil: 0, taking: false }
      this.leases.set(key, lease)
    }
    return lease
  }
}
