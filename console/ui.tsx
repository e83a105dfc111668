/** The console's small parts: links that route in the page, refusals in words, tables, paging, actions. */
import type { ComponentChildren } from "preact"
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { type Refusal, refusalOf } from "./api.js"
import { percent } from "./upload.js"

// ---- routing: paths under /console, kept in the history so back, reload and bookmarks work

const routeListeners = new Set<() => void>()
export const navigate = (to: string) => {
  if (to !== location.pathname) history.pushState(null, "", to)
  for (const listener of routeListeners) listener()
}
addEventListener("popstate", () => {
  for (const listener of routeListeners) listener()
})

/** The current path, re-rendered on navigation. */
export const usePath = () => {
  const [path, setPath] = useState(location.pathname)
  useEffect(() => {
    const listener = () => setPath(location.pathname)
    routeListeners.add(listener)
    return () => void routeListeners.delete(listener)
  }, [])
  return path
}

export const Link = (props: { readonly to: string; readonly children: ComponentChildren; readonly current?: boolean }) => (
  <a
    href={props.to}
    aria-current={props.current === true ? "page" : undefined}
    onClick={(event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
      event.preventDefault()
      navigate(props.to)
    }}
  >
    {props.children}
  </a>
)

/** A page's heading, focused when the page opens so a keyboard or a screen reader starts there. */
export const PageTitle = (props: { readonly children: ComponentChildren }) => {
  const ref = useRef<HTMLHeadingElement>(null)
  useEffect(() => ref.current?.focus(), [])
  return (
    <h1 tabIndex={-1} ref={ref}>
      {props.children}
    </h1>
  )
}

// ---- refusals

/** The API's `{error, code, hint}`, said in words. */
export const RefusalNote = (props: { readonly refusal: Refusal | undefined }) =>
  props.refusal === undefined ? null : (
    <div class="refusal" role="alert" data-code={props.refusal.code}>
      <p>
        <strong>{props.refusal.error}</strong> <code>{props.refusal.code}</code>
      </p>
      {props.refusal.hint === undefined ? null : <p class="hint">{props.refusal.hint}</p>}
    </div>
  )

/** Runs one action at a time: its busy flag and its refusal, cleared when it runs again. */
export const useAction = () => {
  const [busy, setBusy] = useState(false)
  const [refusal, setRefusal] = useState<Refusal | undefined>(undefined)
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true)
    setRefusal(undefined)
    try {
      await action()
    } catch (failure) {
      setRefusal(refusalOf(failure))
    } finally {
      setBusy(false)
    }
  }, [])
  return { busy, refusal, run }
}

// ---- lists as the API pages them: a page at a time, `next_cursor` to go on

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly next: string | null
}

/** One list's pages: the current one, forward with its `next_cursor`, back along the cursors seen. */
export const usePaged = <A,>(fetchPage: (cursor: string | undefined) => Promise<Page<A>>, deps: ReadonlyArray<unknown> = []) => {
  const [cursors, setCursors] = useState<ReadonlyArray<string | undefined>>([undefined])
  const [page, setPage] = useState<Page<A> | undefined>(undefined)
  const [refusal, setRefusal] = useState<Refusal | undefined>(undefined)
  const [loading, setLoading] = useState(false)
  const [version, setVersion] = useState(0)
  const cursor = cursors[cursors.length - 1]
  useEffect(() => {
    let live = true
    setLoading(true)
    fetchPage(cursor).then(
      (loaded) => live && (setPage(loaded), setRefusal(undefined), setLoading(false)),
      (failure) => live && (setRefusal(refusalOf(failure)), setLoading(false))
    )
    return () => void (live = false)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [cursor, version, ...deps])
  return {
    items: page?.items ?? [],
    loading,
    refusal,
    reload: () => setVersion((v) => v + 1),
    pager: (
      <nav class="pager" aria-label="pages">
        <button type="button" disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous page
        </button>
        <span>page {cursors.length}</span>
        <button type="button" disabled={page?.next == null} onClick={() => page?.next != null && setCursors([...cursors, page.next])}>
          Next page
        </button>
      </nav>
    )
  }
}

// ---- values

/** A cell's text: strings as they are, everything else as JSON (bigints as their digits). */
export const cellText = (value: unknown): string => {
  if (value === null || value === undefined) return "NULL"
  if (typeof value === "string") return value
  if (typeof value === "bigint") return value.toString()
  return JSON.stringify(value)
}

export const when = (unixSeconds: number | null) => (unixSeconds === null ? "—" : new Date(unixSeconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC")

/**
 * A table's head: a column header for each name, then, with `actions`, one for the row's buttons,
 * named for screen readers only ("Actions", or the name given).
 */
export const TableHead = (props: { readonly columns: ReadonlyArray<string>; readonly actions?: boolean | string }) => (
  <thead>
    <tr>
      {props.columns.map((column) => (
        <th scope="col">{column}</th>
      ))}
      {props.actions === undefined || props.actions === false ? null : (
        <th scope="col">
          <span class="visually-hidden">{props.actions === true ? "Actions" : props.actions}</span>
        </th>
      )}
    </tr>
  </thead>
)

export const DataTable = (props: { readonly columns: ReadonlyArray<string>; readonly rows: ReadonlyArray<ReadonlyArray<unknown>>; readonly caption?: string }) => (
  <div class="table-wrap">
    <table>
      {props.caption === undefined ? null : <caption>{props.caption}</caption>}
      <TableHead columns={props.columns} />
      <tbody>
        {props.rows.map((row) => (
          <tr>
            {row.map((cell) => (
              <td>{cellText(cell)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  </div>
)

/** A two-step button: the first press asks, the second (or Cancel) answers. */
export const ConfirmButton = (props: { readonly label: string; readonly confirm: string; readonly onConfirm: () => void; readonly disabled?: boolean }) => {
  const [asking, setAsking] = useState(false)
  if (!asking) {
    return (
      <button type="button" disabled={props.disabled} onClick={() => setAsking(true)}>
        {props.label}
      </button>
    )
  }
  return (
    <span class="confirm">
      <button
        type="button"
        class="danger"
        autoFocus
        onClick={() => {
          setAsking(false)
          props.onConfirm()
        }}
      >
        {props.confirm}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  )
}

/** A secret shown once, with words saying so. */
export const ShownOnce = (props: { readonly label: string; readonly secret: string }) => (
  <div class="shown-once" role="status">
    <p>
      {props.label} — shown once: copy it now, the gateway keeps only its hash.
    </p>
    <output class="secret">{props.secret}</output>
  </div>
)

/** An upload's progress, once it has started: how much of the body the browser has sent. */
export const SentProgress = (props: { readonly fraction: number | undefined }) =>
  props.fraction === undefined ? null : (
    <label>
      Sent
      <progress max={1} value={props.fraction} aria-valuetext={percent(props.fraction)}>
        {percent(props.fraction)}
      </progress>
    </label>
  )
