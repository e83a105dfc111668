/**
 * The API's requests as the operator's telemetry counts them (docs/operators.md, "Health and
 * telemetry"): how many this node answered since it started, how many of them were 4xx and 5xx,
 * and the latency of the answers of the last few seconds (p50, p99). The listener tells it of
 * every answer it writes, on the path of every request, so recording is a few plain increments
 * into arrays made once: no allocation, no timer, one clock read (to know which second it is).
 *
 * Latency is kept in a histogram of fixed buckets, eight per doubling from 10 µs (each 9% wider
 * than the one before), one histogram per second in a ring of WINDOW_SECONDS; a second's histogram
 * is cleared when the ring comes round to it again. A quantile is the upper edge of the bucket it
 * falls in: at most 9% above the true figure, never below it.
 */
import { Context, Layer } from "effect"

/** The seconds the latency figures cover: the current one and those before it. */
export const WINDOW_SECONDS = 10
const BASE_MS = 0.01
const PER_DOUBLING = 8
/** 20 doublings from 10 µs reach 10.5 s; the last bucket takes everything above. */
const BUCKETS = PER_DOUBLING * 20 + 1

/** The figures of one node, as the snapshot carries them (NodeSnapshot's `requests`). */
export interface RequestFigures {
  /** Answers since the gateway started, every status. */
  readonly answered: number
  readonly errors_4xx: number
  readonly errors_5xx: number
  readonly latency: {
    readonly window_seconds: number
    /** Answers within the window. */
    readonly answered: number
    /** null when nothing was answered within the window. */
    readonly p50_ms: number | null
    readonly p99_ms: number | null
  }
}

const upperEdge = (bucket: number) => Math.round(BASE_MS * 2 ** (bucket / PER_DOUBLING) * 1000) / 1000

const bucketOf = (ms: number): number => {
  if (!(ms > BASE_MS)) return 0
  const bucket = Math.ceil(Math.log2(ms / BASE_MS) * PER_DOUBLING)
  return bucket < BUCKETS ? bucket : BUCKETS - 1
}

export class RequestCounters {
  private answered = 0
  private errors4xx = 0
  private errors5xx = 0
  private readonly counts = new Uint32Array(WINDOW_SECONDS * BUCKETS)
  /** Which second each slot of the ring holds (performance.now() in whole seconds); -1 for none. */
  private readonly slotSecond = new Float64Array(WINDOW_SECONDS).fill(-1)

  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** One answer: its status (499 when the client left first) and how long it took. */
  readonly record = (status: number, ms: number): void => {
    this.answered++
    if (status >= 500) this.errors5xx++
    else if (status >= 400) this.errors4xx++
    const second = Math.floor(this.clock() / 1000)
    const slot = second % WINDOW_SECONDS
    if (this.slotSecond[slot] !== second) {
      this.counts.fill(0, slot * BUCKETS, (slot + 1) * BUCKETS)
      this.slotSecond[slot] = second
    }
    this.counts[slot * BUCKETS + bucketOf(ms)]!++
  }

  /** The figures now (called by the snapshot, every few seconds: it may allocate). */
  readonly read = (): RequestFigures => {
    const second = Math.floor(this.clock() / 1000)
    const merged = new Array<number>(BUCKETS).fill(0)
    let inWindow = 0
    for (let slot = 0; slot < WINDOW_SECONDS; slot++) {
      const held = this.slotSecond[slot]!
      if (held < 0 || held > second || second - held >= WINDOW_SECONDS) continue
      for (let b = 0; b < BUCKETS; b++) {
        const n = this.counts[slot * BUCKETS + b]!
        merged[b]! += n
        inWindow += n
      }
    }
    const quantile = (q: number): number | null => {
      if (inWindow === 0) return null
      const rank = Math.max(1, Math.ceil(q * inWindow))
      let seen = 0
      for (let b = 0; b < BUCKETS; b++) {
        seen += merged[b]!
        if (seen >= rank) return upperEdge(b)
      }
      return upperEdge(BUCKETS - 1)
    }
    return {
      answered: this.answered,
      errors_4xx: this.errors4xx,
      errors_5xx: this.errors5xx,
      latency: { window_seconds: WINDOW_SECONDS, answered: inWindow, p50_ms: quantile(0.5), p99_ms: quantile(0.99) }
    }
  }
}

/** This gateway's counters: the listener records into them, the telemetry snapshot reads them. */
export class RequestStats extends Context.Tag("portico/RequestStats")<RequestStats, RequestCounters>() {
  static readonly Live = Layer.sync(RequestStats, () => new RequestCounters())

  /** Counters of their own for a test: in memory, as in production (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.sync(RequestStats, () => new RequestCounters())
}
