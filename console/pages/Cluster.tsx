/**
 * The cluster, for an operator: this node's health report (checks with their latency and error,
 * counts) and every node with what it holds; and the telemetry stream drawn live, per node:
 * the API's requests, errors and latency (ClusterRequests.tsx), memory, heap and the registry
 * check's latency (telemetry.ts).
 */
import { useEffect, useState } from "preact/hooks"
import { call, type Refusal } from "../api.js"
import type { Credential } from "../session.js"
import { type ClusterPoint, followTelemetry } from "../telemetry.js"
import { DataTable, PageTitle, RefusalNote, useAction } from "../ui.js"
import { LineChart, type Series } from "../chart.js"
import { RequestCharts, RequestTotals } from "./ClusterRequests.js"

/** Snapshots kept for the charts: five minutes at the 2-second interval. */
const KEPT = 150
const INTERVAL_SECONDS = 2

type Health = Awaited<ReturnType<typeof loadHealth>>
const loadHealth = (token: string) => call(token, (c) => c.operator.operatorHealth({ urlParams: {} }))

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

const seriesOf = (points: ReadonlyArray<ClusterPoint>, figure: (node: ClusterPoint["nodes"] extends ReadonlyMap<string, infer S> ? S : never) => number): ReadonlyArray<Series> => {
  const names = [...new Set(points.flatMap((p) => [...p.nodes.keys()]))].sort()
  return names.map((name) => ({
    name,
    points: points.flatMap((p) => {
      const node = p.nodes.get(name)
      return node === undefined ? [] : [{ at: p.at, value: figure(node) }]
    })
  }))
}

export const Cluster = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [health, setHealth] = useState<Health | undefined>(undefined)
  const load = useAction()
  const [points, setPoints] = useState<ReadonlyArray<ClusterPoint>>([])
  const [trouble, setTrouble] = useState<Refusal | undefined>(undefined)
  useEffect(() => void load.run(async () => setHealth(await loadHealth(token))), [token])
  useEffect(() => {
    const stop = new AbortController()
    void followTelemetry(token, INTERVAL_SECONDS, stop.signal, (point) => setPoints((kept) => [...kept, point].slice(-KEPT)), setTrouble)
    return () => stop.abort()
  }, [token])
  const latest = points[points.length - 1]
  return (
    <main>
      <PageTitle>Cluster</PageTitle>
      <RefusalNote refusal={load.refusal} />
      {health === undefined ? null : (
        <section>
          <h2>This node</h2>
          <dl class="facts">
            <dt>Node</dt>
            <dd data-fact="node">{health.node}</dd>
            <dt>Status</dt>
            <dd data-fact="status">{health.status}</dd>
            <dt>Version</dt>
            <dd>{health.version}</dd>
            <dt>Up for</dt>
            <dd>{health.uptime_seconds} s</dd>
            <dt>Registry</dt>
            <dd>{health.registry_engine}</dd>
            <dt>Namespaces</dt>
            <dd>{health.namespaces ?? "unknown (the registry did not answer)"}</dd>
          </dl>
          <DataTable
            caption="checks"
            columns={["check", "ok", "latency (ms)", "error"]}
            rows={Object.entries(health.checks).map(([name, check]) => [name, check.ok ? "yes" : "no", check.latency_ms, check.error ?? ""])}
          />
          <h2>Nodes</h2>
          <DataTable
            columns={["node", "status", "internal URL", "namespaces homed", "app ports"]}
            rows={(health.nodes ?? []).map((n) => [n.self ? `${n.node} (this one)` : n.node, n.status, n.internal_url, n.namespaces.join(", "), n.apps.map((a) => a.port).join(", ")])}
          />
        </section>
      )}
      <section>
        <h2>Live</h2>
        <p class="hint">
          Telemetry every {INTERVAL_SECONDS} s from every live node; <span data-fact="snapshots">{points.length}</span> snapshot{points.length === 1 ? "" : "s"} so far.
        </p>
        <RefusalNote refusal={trouble} />
        {latest === undefined || latest.unreachable.length === 0 ? null : (
          <RefusalNote refusal={{ error: `not answering: ${latest.unreachable.map((u) => `${u.node} (${u.error})`).join(", ")}`, code: "NODE_UNREACHABLE" }} />
        )}
        {points.length === 0 ? null : (
          <div class="charts">
            <RequestCharts points={points} />
            <LineChart title="Memory (RSS)" unit="MiB" series={seriesOf(points, (n) => n.memory_rss_bytes / 1024 / 1024)} format={(v) => `${v.toFixed(1)} MiB`} />
            <LineChart title="Heap used" unit="MiB" series={seriesOf(points, (n) => n.heap_used_bytes / 1024 / 1024)} format={(v) => `${v.toFixed(1)} MiB`} />
            <LineChart title="Registry check latency" unit="ms" series={seriesOf(points, (n) => n.checks["registry"]?.latency_ms ?? 0)} format={(v) => `${v.toFixed(1)} ms`} />
          </div>
        )}
        <RequestTotals latest={latest} />
        {latest === undefined ? null : <p class="hint">Latest: {[...latest.nodes.values()].map((n) => `${n.node} ${mib(n.memory_rss_bytes)}`).join("; ")}</p>}
      </section>
    </main>
  )
}
