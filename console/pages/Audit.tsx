/** The audit trail: newest first, a page at a time, filtered by action, principal and time as the API filters it. */
import { useState } from "preact/hooks"
import { IdKey } from "../../src/api/Paging.js"
import { call, cursorOf, RefusedError } from "../api.js"
import type { Credential } from "../session.js"
import { DataTable, PageTitle, RefusalNote, usePaged, when } from "../ui.js"

interface Filters {
  readonly action: string
  readonly principal: string
  readonly since: string
}

const sinceSeconds = (text: string): number | undefined => {
  if (text === "") return undefined
  // a datetime-local field's value, read as UTC
  const ms = Date.parse(`${text}Z`)
  if (Number.isNaN(ms)) throw new RefusedError({ error: `"${text}" is not a time`, code: "VALIDATION_FAILED" })
  return Math.max(0, Math.floor(ms / 1000))
}

export const Audit = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [draft, setDraft] = useState<Filters>({ action: "", principal: "", since: "" })
  const [filters, setFilters] = useState<Filters>(draft)
  const list = usePaged(
    async (cursor) => {
      const since = sinceSeconds(filters.since)
      const page = await call(token, (c) =>
        c.audit.list({
          urlParams: {
            limit: 50,
            cursor: cursorOf(IdKey, cursor),
            ...(filters.action === "" ? {} : { action: filters.action }),
            ...(filters.principal === "" ? {} : { principal: filters.principal }),
            ...(since === undefined ? {} : { since })
          }
        })
      )
      return { items: page.entries, next: page.next_cursor }
    },
    [filters]
  )
  return (
    <main>
      <PageTitle>Audit trail</PageTitle>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          setFilters(draft)
        }}
      >
        <label>
          Action
          <input name="action" value={draft.action} onInput={(e) => setDraft({ ...draft, action: e.currentTarget.value.trim() })} placeholder="key.mint" />
        </label>
        <label>
          Principal
          <input name="principal" value={draft.principal} onInput={(e) => setDraft({ ...draft, principal: e.currentTarget.value.trim() })} placeholder="0x… or key:key_…" />
        </label>
        <label>
          Since (UTC)
          <input name="since" type="datetime-local" value={draft.since} onInput={(e) => setDraft({ ...draft, since: e.currentTarget.value })} />
        </label>
        <button type="submit">Filter</button>
      </form>
      <RefusalNote refusal={list.refusal} />
      <DataTable
        columns={["id", "at", "action", "principal", "target", "detail"]}
        rows={list.items.map((entry) => [entry.id, when(entry.at), entry.action, entry.principal, entry.target, entry.detail])}
      />
      {list.pager}
    </main>
  )
}
