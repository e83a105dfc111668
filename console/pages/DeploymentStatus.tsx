/**
 * One deployment's status as the API gives it: the record (`deployments.get`: status, version,
 * host, port, health path, content CID, limits, times) and its process (`deployments.stats`: running
 * or not, CPU, memory, processes, restarts, uptime), read again every few seconds while shown; and
 * its events (`deployments.events`, newest first, paged on `seq`), each with its detail.
 */
import { useEffect, useState } from "preact/hooks"
import type { Deployment, DeploymentEvent } from "../../src/api/groups/DeploymentsGroup.js"
import type { DeploymentStats } from "../../src/api/groups/DeploymentRuntimeGroup.js"
import { IdKey } from "../../src/api/Paging.js"
import { call, cursorOf, type Refusal, refusalOf } from "../api.js"
import { RefusalNote, TableHead, usePaged, when } from "../ui.js"

/** How often the status facts are read again while they are shown. */
const STATUS_EVERY_MS = 5_000
const EVENTS_PAGE = 20

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`

const detailText = (detail: (typeof DeploymentEvent.Type)["detail"]) =>
  Object.entries(detail)
    .map(([key, value]) => `${key}: ${value}`)
    .join(", ")

export const DeploymentStatus = (props: { readonly token: string; readonly name: string; readonly changed: number }) => {
  const { token, name } = props
  const [record, setRecord] = useState<typeof Deployment.Type | undefined>(undefined)
  const [stats, setStats] = useState<typeof DeploymentStats.Type | undefined>(undefined)
  const [refusal, setRefusal] = useState<Refusal | undefined>(undefined)
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    Promise.all([call(token, (c) => c.deployments.get({ urlParams: { name } })), call(token, (c) => c.deploymentRuntime.stats({ urlParams: { name } }))]).then(
      ([r, s]) => live && (setRecord(r), setStats(s), setRefusal(undefined)),
      (failure) => live && setRefusal(refusalOf(failure))
    )
    const timer = setTimeout(() => live && setTick((n) => n + 1), STATUS_EVERY_MS)
    return () => {
      live = false
      clearTimeout(timer)
    }
  }, [name, tick, props.changed])
  const events = usePaged(
    async (cursor) => {
      const page = await call(token, (c) => c.deployments.events({ urlParams: { name, limit: EVENTS_PAGE, cursor: cursorOf(IdKey, cursor) } }))
      return { items: page.events, next: page.next_cursor }
    },
    [name, props.changed]
  )
  return (
    <section aria-label={`status of ${name}`}>
      <h2>Status of {name}</h2>
      <RefusalNote refusal={refusal} />
      {record === undefined ? null : (
        <dl class="facts" data-status-of={name}>
          <dt>Status</dt>
          <dd>
            <span class={`state ${record.status}`} data-fact="status">
              {record.status}
            </span>
          </dd>
          <dt>Type</dt>
          <dd data-fact="type">{record.type}</dd>
          <dt>Version</dt>
          <dd data-fact="status-version">{record.version}</dd>
          <dt>Host</dt>
          <dd>
            <code data-fact="domain">{record.domain}</code>
          </dd>
          {record.port === null ? null : (
            <>
              <dt>Port</dt>
              <dd data-fact="port">{record.port}</dd>
              <dt>Health path</dt>
              <dd>
                <code data-fact="health-check">{record.health_check}</code>
              </dd>
            </>
          )}
          {record.content_cid === null ? null : (
            <>
              <dt>Content CID</dt>
              <dd>
                <code data-fact="content-cid">{record.content_cid}</code>
              </dd>
            </>
          )}
          <dt>Limits</dt>
          <dd data-fact="limits">
            {mib(record.limits.memory_bytes)} memory, {record.limits.cpu_millis / 1000} CPU, {record.limits.pids} processes, restart {record.limits.restart_policy}
          </dd>
          <dt>Created</dt>
          <dd>{when(record.created_at)}</dd>
          <dt>Updated</dt>
          <dd>{when(record.updated_at)}</dd>
          <dt>Process</dt>
          <dd data-fact="running">
            {stats === undefined ? "…" : stats.running ? `running for ${stats.uptime_seconds} s` : record.type === "static" ? "none (a static site runs no process)" : "not running"}
          </dd>
          {stats === undefined || !stats.running ? null : (
            <>
              <dt>Usage</dt>
              <dd data-fact="usage">
                {stats.cpu_seconds.toFixed(2)} s CPU, {mib(stats.memory_bytes)} memory (peak {mib(stats.memory_peak_bytes)} of {mib(stats.memory_limit_bytes)}),{" "}
                {stats.pids} processes and threads
              </dd>
              <dt>Restarts</dt>
              <dd data-fact="restarts">{stats.restarts}</dd>
            </>
          )}
        </dl>
      )}
      <h3>Events, newest first</h3>
      <RefusalNote refusal={events.refusal} />
      <button type="button" onClick={events.reload}>
        Reload the events
      </button>
      <div class="table-wrap">
        <table>
          <TableHead columns={["#", "Event", "Version", "At", "Detail"]} />
          <tbody>
            {events.items.map((e) => (
              <tr data-event={e.type} data-seq={e.seq}>
                <td>{e.seq}</td>
                <td>{e.type}</td>
                <td>{e.version}</td>
                <td>{when(e.at)}</td>
                <td>
                  <code>{detailText(e.detail)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {events.items.length === 0 && !events.loading && events.refusal === undefined ? <p class="hint">No events.</p> : null}
      {events.pager}
    </section>
  )
}
