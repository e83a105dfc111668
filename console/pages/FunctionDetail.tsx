/**
 * One function: its settings (`functions.get`), invoking it with a body typed here
 * (`invoke.invoke`: the answer's status, request id, duration and body; a refusal such as
 * `FUNCTION_FAILED` in words), its logs newest first (`functions.logs`, paged with `before`, read
 * again every few seconds: the gateway writes them in batches after the call), and its deletion
 * (confirmed). The functions routes answer times in milliseconds (the deployments' in seconds).
 */
import type { HttpClientResponse } from "@effect/platform/HttpClientResponse"
import type { Effect } from "effect"
import { useEffect, useState } from "preact/hooks"
import type { FunctionView } from "../../src/api/groups/FunctionsGroup.js"
import { call } from "../api.js"
import { ConfirmButton, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"

const LOGS_PAGE = 50
const LOGS_EVERY_MS = 3_000

interface Answer {
  readonly status: number
  readonly requestId: string | undefined
  readonly durationMs: string | undefined
  readonly body: string
}

/**
 * The client's `invoke.invoke` with `withResponse`: its implementation passes the flag to the
 * derived endpoint, which then answers the decoded body with the response (status and headers),
 * but the client's type declares the plain call only.
 */
type InvokeWithResponse = (request: {
  readonly path: { readonly name: string }
  readonly payload: string
  readonly withResponse: true
}) => Effect.Effect<readonly [unknown, HttpClientResponse], unknown>

export const FunctionDetail = (props: { readonly token: string; readonly name: string; readonly onDeleted: () => void }) => {
  const { token, name } = props
  const [fn, setFn] = useState<typeof FunctionView.Type | undefined>(undefined)
  const [input, setInput] = useState('{"name":"ada"}')
  const [answer, setAnswer] = useState<Answer | undefined>(undefined)
  const load = useAction()
  const invoke = useAction()
  const remove = useAction()
  useEffect(() => void load.run(async () => setFn(await call(token, (c) => c.functions.get({ path: { name } })))), [name])
  const logs = usePaged(
    async (cursor) => {
      const page = await call(token, (c) => c.functions.logs({ path: { name }, urlParams: { limit: LOGS_PAGE, ...(cursor === undefined ? {} : { before: Number(cursor) }) } }))
      return { items: page.logs, next: page.next_before === null ? null : String(page.next_before) }
    },
    [name]
  )
  useEffect(() => {
    const timer = setInterval(logs.reload, LOGS_EVERY_MS)
    return () => clearInterval(timer)
  }, [name])
  return (
    <section aria-label={`function ${name}`}>
      <h2>Function {name}</h2>
      <RefusalNote refusal={load.refusal} />
      {fn === undefined ? null : (
        <dl class="facts" data-function-facts={name}>
          <dt>Live version</dt>
          <dd data-fact="function-version">{fn.version}</dd>
          <dt>Module</dt>
          <dd>
            <code data-fact="function-cid">{fn.cid}</code> ({fn.size} bytes)
          </dd>
          <dt>Limits</dt>
          <dd data-fact="function-limits">
            {fn.memory_limit_mb} MB memory, {fn.timeout_seconds} s
          </dd>
          <dt>Public</dt>
          <dd data-fact="function-public">{fn.is_public ? "yes: anyone may invoke it" : "no: a credential with invoke is needed"}</dd>
          <dt>Environment</dt>
          <dd data-fact="function-env">{Object.keys(fn.env_vars).join(", ") || "none"}</dd>
          <dt>Schedules</dt>
          <dd>{fn.cron_expressions.join("; ") || "none"}</dd>
          <dt>Topics</dt>
          <dd>{fn.pubsub_topics.join(", ") || "none"}</dd>
          <dt>Updated</dt>
          <dd>{when(fn.updated_at / 1000)}</dd>
        </dl>
      )}
      <h3>Invoke</h3>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void invoke.run(async () => {
            setAnswer(undefined)
            const [body, response] = await call(token, (c) => (c.invoke.invoke as unknown as InvokeWithResponse)({ path: { name }, payload: input, withResponse: true }))
            setAnswer({
              status: response.status,
              requestId: response.headers["x-request-id"],
              durationMs: response.headers["x-duration-ms"],
              body: JSON.stringify(body, null, 2)
            })
            logs.reload()
          })
        }}
      >
        <label>
          Body (the function reads it on stdin)
          <textarea name="invoke-body" rows={4} value={input} onInput={(e) => setInput(e.currentTarget.value)} spellcheck={false} />
        </label>
        <button type="submit" disabled={invoke.busy}>
          {invoke.busy ? "Invoking…" : "Invoke"}
        </button>
      </form>
      <RefusalNote refusal={invoke.refusal} />
      {answer === undefined ? null : (
        <div class="answer" role="status">
          <dl class="facts">
            <dt>Status</dt>
            <dd data-fact="invoke-status">{answer.status}</dd>
            <dt>Request id</dt>
            <dd>
              <code data-fact="invoke-request-id">{answer.requestId ?? "—"}</code>
            </dd>
            <dt>Duration</dt>
            <dd data-fact="invoke-duration">{answer.durationMs === undefined ? "—" : `${answer.durationMs} ms`}</dd>
          </dl>
          <pre class="output" data-fact="invoke-body" tabIndex={0}>
            {answer.body}
          </pre>
        </div>
      )}
      <h3>Logs, newest first</h3>
      <RefusalNote refusal={logs.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["At", "Level", "Request", "Message"]} />
          <tbody>
            {logs.items.map((line) => (
              <tr data-log-seq={line.seq} data-request={line.request_id}>
                <td>{when(line.at / 1000)}</td>
                <td>{line.level}</td>
                <td>
                  <code>{line.request_id}</code>
                </td>
                <td>
                  <code data-fact="log-message">{line.message}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {logs.items.length === 0 && !logs.loading && logs.refusal === undefined ? <p class="hint">No log lines yet.</p> : null}
      {logs.pager}
      <div class="danger-zone">
        <h3>Delete {name}</h3>
        <p class="hint">Its versions, secrets and logs go with it.</p>
        <ConfirmButton
          label={`Delete ${name}`}
          confirm={`Delete ${name} for good`}
          disabled={remove.busy}
          onConfirm={() =>
            void remove.run(async () => {
              await call(token, (c) => c.functions.remove({ path: { name } }))
              props.onDeleted()
            })
          }
        />
        <RefusalNote refusal={remove.refusal} />
      </div>
    </section>
  )
}
