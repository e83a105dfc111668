/** The request counters of the operator's telemetry (src/layers/operators/RequestStats.ts), on a clock the test moves. */
import { describe, expect, it } from "vitest"
import { RequestCounters, WINDOW_SECONDS } from "../../../src/layers/operators/RequestStats.js"

const at = () => {
  let now = 1_000_000
  return { clock: () => now, move: (ms: number) => void (now += ms) }
}

describe("RequestCounters", () => {
  it("counts answers, 4xx and 5xx apart, and has no latency before any answer", () => {
    const time = at()
    const counters = new RequestCounters(time.clock)
    expect(counters.read()).toEqual({ answered: 0, errors_4xx: 0, errors_5xx: 0, latency: { window_seconds: WINDOW_SECONDS, answered: 0, p50_ms: null, p99_ms: null } })
    for (const status of [200, 201, 204, 301, 400, 404, 499, 500, 503, 599]) counters.record(status, 1)
    expect(counters.read()).toMatchObject({ answered: 10, errors_4xx: 3, errors_5xx: 3 })
  })

  it("gives p50 and p99 at most 9% above the true figures, never below", () => {
    const time = at()
    const counters = new RequestCounters(time.clock)
    // 1..1000 ms: p50 is 500 ms, p99 990 ms
    for (let ms = 1; ms <= 1000; ms++) counters.record(200, ms)
    const { latency } = counters.read()
    expect(latency.answered).toBe(1000)
    expect(latency.p50_ms).toBeGreaterThanOrEqual(500)
    expect(latency.p50_ms).toBeLessThanOrEqual(500 * 1.091)
    expect(latency.p99_ms).toBeGreaterThanOrEqual(990)
    expect(latency.p99_ms).toBeLessThanOrEqual(990 * 1.091)
    // beyond the last bucket (10.5 s) and below the first (10 µs) still counted
    counters.record(200, 60_000)
    counters.record(200, 0)
    expect(counters.read().latency.answered).toBe(1002)
  })

  it("forgets latency older than the window, keeps the totals", () => {
    const time = at()
    const counters = new RequestCounters(time.clock)
    for (let i = 0; i < 50; i++) counters.record(200, 100)
    time.move(WINDOW_SECONDS * 500)
    for (let i = 0; i < 50; i++) counters.record(200, 2)
    const both = counters.read()
    expect(both.latency.answered).toBe(100)
    expect(both.latency.p99_ms).toBeGreaterThanOrEqual(100)
    // the first 50 leave the window; the slot they were in is cleared when the ring comes round
    time.move(WINDOW_SECONDS * 600)
    const later = counters.read()
    expect(later.latency.answered).toBe(50)
    expect(later.latency.p99_ms).toBeLessThan(2.2)
    counters.record(200, 2)
    expect(counters.read().latency.answered).toBe(51)
    time.move(WINDOW_SECONDS * 1000)
    expect(counters.read()).toMatchObject({ answered: 101, latency: { answered: 0, p50_ms: null } })
  })
})
