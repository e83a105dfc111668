/**
 * The API's requests on the Cluster page, drawn from the telemetry snapshots' `requests`
 * (docs/operators.md, "Health and telemetry"): answers and errors per second, from the difference
 * of two snapshots' counts over their times (a count that went down is a node that restarted: that
 * step is left out), and the latency's p50 and p99 over the node's last 10 s. A node of an earlier
 * release sends no `requests`: it has no line.
 */
import { LineChart, type Series } from "../chart.js"
import type { ClusterPoint, Snapshot } from "../telemetry.js"

type Figures = NonNullable<Snapshot["requests"]>

const nodesOf = (points: ReadonlyArray<ClusterPoint>) => [...new Set(points.flatMap((p) => [...p.nodes.keys()]))].sort()

/** Per second between consecutive snapshots of each node, of the count `count` picks. */
const ratesOf = (points: ReadonlyArray<ClusterPoint>, count: (f: Figures) => number, label: (node: string) => string): ReadonlyArray<Series> =>
  nodesOf(points).map((name) => {
    const rates: Array<{ at: number; value: number }> = []
    let before: { at: number; value: number } | undefined
    for (const point of points) {
      const figures = point.nodes.get(name)?.requests
      if (figures === undefined) continue
      const now = { at: point.nodes.get(name)?.at ?? point.at, value: count(figures) }
      if (before !== undefined && now.at > before.at && now.value >= before.value) {
        rates.push({ at: now.at, value: (now.value - before.value) / ((now.at - before.at) / 1000) })
      }
      before = now
    }
    return { name: label(name), points: rates }
  })

const latencyOf = (points: ReadonlyArray<ClusterPoint>, quantile: "p50_ms" | "p99_ms", label: (node: string) => string): ReadonlyArray<Series> =>
  nodesOf(points).map((name) => ({
    name: label(name),
    points: points.flatMap((p) => {
      const value = p.nodes.get(name)?.requests?.latency[quantile]
      return value === undefined || value === null ? [] : [{ at: p.at, value }]
    })
  }))

const perSecond = (v: number) => `${v.toFixed(v < 10 ? 2 : 0)}/s`

/** A chart once it has something to draw (a rate needs two snapshots). */
const Chart = (props: { readonly title: string; readonly unit: string; readonly series: ReadonlyArray<Series>; readonly format: (v: number) => string }) =>
  props.series.some((s) => s.points.length > 0) ? <LineChart {...props} /> : null

export const RequestCharts = (props: { readonly points: ReadonlyArray<ClusterPoint> }) => {
  const { points } = props
  return (
    <>
      <Chart title="Requests answered" unit="per second" series={ratesOf(points, (f) => f.answered, (n) => n)} format={perSecond} />
      <Chart
        title="Errors"
        unit="per second"
        series={[...ratesOf(points, (f) => f.errors_4xx, (n) => `${n} 4xx`), ...ratesOf(points, (f) => f.errors_5xx, (n) => `${n} 5xx`)]}
        format={perSecond}
      />
      <Chart
        title="Request latency"
        unit="ms, last 10 s"
        series={[...latencyOf(points, "p50_ms", (n) => `${n} p50`), ...latencyOf(points, "p99_ms", (n) => `${n} p99`)]}
        format={(v) => `${v.toFixed(2)} ms`}
      />
    </>
  )
}

/** Each node's counts since it started, in words. */
export const RequestTotals = (props: { readonly latest: ClusterPoint | undefined }) => {
  const { latest } = props
  return (
    <>
      {latest === undefined ? null : (
        <ul class="hint request-totals">
          {[...latest.nodes.values()].map((n) =>
            n.requests === undefined ? (
              <li>{n.node}: no request figures (a node of an earlier release)</li>
            ) : (
              <li data-node-requests={n.node}>
                {n.node}: <span data-fact="answered">{n.requests.answered}</span> answered since it started,{" "}
                <span data-fact="errors-4xx">{n.requests.errors_4xx}</span> 4xx, <span data-fact="errors-5xx">{n.requests.errors_5xx}</span> 5xx
              </li>
            )
          )}
        </ul>
      )}
    </>
  )
}
