/**
 * The machine-readable result of a bench: one entry per target it measures (and per number it
 * reports beside them), written as JSON to the file named by `BENCH_SUMMARY` when that is set
 * (bench/all.ts sets it and prints every bench's entries as one table). Without it nothing is
 * written: a bench run by hand prints its own tables as before.
 */
import * as fs from "node:fs"
import { loadDescription } from "./load.js"

export interface TargetResult {
  /** The target as docs/performance.md names it, with its issue, e.g. "whoami with an API key (2)". */
  readonly target: string
  /** What the value is measured against in the same run ("-" when it is an absolute figure). */
  readonly anchor: string
  /** The ratio to the anchor, or the measured figure in `unit`. */
  readonly value: number
  /** "ratio", "MiB", "s", "×" (a ratio of latencies), "tokens", "/s". */
  readonly unit: string
  /** The target's bound as text (">= 0.6", "< 64 MiB"); undefined for a number reported without target. */
  readonly goal: string | undefined
  /** Whether the bound held; undefined for a reported number. */
  readonly met: boolean | undefined
  /** The per-round values or anything else a reader needs to judge the one figure. */
  readonly detail: string
}

export interface BenchSummary {
  readonly bench: string
  /** The knobs the run used (rounds, durations), as the bench reads them. */
  readonly settings: string
  /** "none", or the background load that ran during every round (bench/support/load.ts). */
  readonly load: string
  readonly results: ReadonlyArray<TargetResult>
}

/** A target whose value must be at least `bound`. */
export const atLeast = (target: string, anchor: string, value: number, bound: number, detail: string, unit = "ratio"): TargetResult => ({
  target,
  anchor,
  value,
  unit,
  goal: `>= ${bound}`,
  met: Number.isFinite(value) && value >= bound,
  detail
})

/** A target whose value must stay below `bound` (or at most `bound` when `inclusive`). */
export const below = (target: string, anchor: string, value: number, bound: number, unit: string, detail: string, inclusive = false): TargetResult => ({
  target,
  anchor,
  value,
  unit,
  goal: `${inclusive ? "<=" : "<"} ${bound}${unit === "ratio" ? "" : ` ${unit}`}`,
  met: Number.isFinite(value) && (inclusive ? value <= bound : value < bound),
  detail
})

/** A number reported beside the targets, with no bound of its own. */
export const reported = (target: string, anchor: string, value: number, unit: string, detail: string): TargetResult => ({
  target,
  anchor,
  value,
  unit,
  goal: undefined,
  met: undefined,
  detail
})

/** Writes the bench's summary to `BENCH_SUMMARY` when set. */
export const writeSummary = (bench: string, settings: string, results: ReadonlyArray<TargetResult>) => {
  const file = process.env.BENCH_SUMMARY
  if (file === undefined || file === "") return
  const summary: BenchSummary = { bench, settings, load: loadDescription(), results }
  fs.writeFileSync(file, JSON.stringify(summary, null, 2) + "\n")
}

/** Per-round values as the tables print them: "0.81 0.77 0.90". */
export const rounds = (xs: ReadonlyArray<number>, digits = 2) => xs.map((x) => x.toFixed(digits)).join(" ")
