/** Cache maps: scan a map's keys (optionally by a regular expression), read one, put one (JSON, with a TTL), delete one. */
import { useState } from "preact/hooks"
import { call, RefusedError } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, useAction } from "../ui.js"

/** The value typed in, as JSON; null is no cache value (spec §2.1). */
const parseValue = (text: string): {} => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new RefusedError({ error: "the value is not JSON", code: "VALIDATION_FAILED", hint: 'write a JSON value: "text" in quotes, 42, {"a": 1}' })
  }
  if (parsed === null || parsed === undefined) throw new RefusedError({ error: "a cache value cannot be null", code: "VALIDATION_FAILED" })
  return parsed
}

export const Cache = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [dmap, setDmap] = useState("greetings")
  const [match, setMatch] = useState("")
  const [keys, setKeys] = useState<ReadonlyArray<string> | undefined>(undefined)
  const [shown, setShown] = useState<{ readonly key: string; readonly value: unknown } | undefined>(undefined)
  const [key, setKey] = useState("")
  const [value, setValue] = useState('{"text": "hello"}')
  const [ttl, setTtl] = useState("")
  const scan = useAction()
  const get = useAction()
  const put = useAction()
  const remove = useAction()
  const rescan = async () => {
    const answer = await call(token, (c) => c.cache.scan({ payload: { dmap, ...(match === "" ? {} : { match }) } }))
    setKeys(answer.keys)
  }
  return (
    <main>
      <PageTitle>Cache</PageTitle>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          void scan.run(rescan)
        }}
      >
        <label>
          Map
          <input name="dmap" value={dmap} onInput={(e) => setDmap(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          Keys matching (regular expression, optional)
          <input name="match" value={match} onInput={(e) => setMatch(e.currentTarget.value)} autoComplete="off" />
        </label>
        <button type="submit" disabled={scan.busy}>
          Scan
        </button>
      </form>
      <RefusalNote refusal={scan.refusal} />
      {keys === undefined ? null : (
        <section>
          <h2>
            {keys.length} key{keys.length === 1 ? "" : "s"} in {dmap}
          </h2>
          <RefusalNote refusal={get.refusal ?? remove.refusal} />
          <ul class="cache-keys">
            {keys.map((k) => (
              <li data-cache-key={k}>
                <code>{k}</code>{" "}
                <button type="button" onClick={() => void get.run(async () => setShown(await call(token, (c) => c.cache.get({ payload: { dmap, key: k } }))))}>
                  Get
                </button>{" "}
                <ConfirmButton
                  label="Delete"
                  confirm={`Delete ${k}`}
                  onConfirm={() =>
                    void remove.run(async () => {
                      await call(token, (c) => c.cache.delete({ payload: { dmap, key: k } }))
                      if (shown?.key === k) setShown(undefined)
                      await rescan()
                    })
                  }
                />
              </li>
            ))}
          </ul>
          {shown === undefined ? null : (
            <div>
              <h3>{shown.key}</h3>
              <pre data-fact="cache-value">{JSON.stringify(shown.value, null, 2)}</pre>
            </div>
          )}
        </section>
      )}
      <section>
        <h2>Put an entry in {dmap}</h2>
        <form
          class="stack"
          onSubmit={(event) => {
            event.preventDefault()
            void put.run(async () => {
              const parsed = parseValue(value)
              await call(token, (c) => c.cache.put({ payload: { dmap, key, value: parsed, ...(ttl.trim() === "" ? {} : { ttl: ttl.trim() }) } }))
              await rescan()
            })
          }}
        >
          <label>
            Key
            <input name="cache-key" value={key} onInput={(e) => setKey(e.currentTarget.value)} autoComplete="off" />
          </label>
          <label>
            Value (JSON)
            <textarea name="cache-value" rows={3} spellcheck={false} value={value} onInput={(e) => setValue(e.currentTarget.value)} />
          </label>
          <label>
            Expires after (30s, 10m, 1h; empty: never)
            <input name="ttl" value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} autoComplete="off" />
          </label>
          <button type="submit" disabled={put.busy}>
            Put
          </button>
        </form>
        <RefusalNote refusal={put.refusal} />
      </section>
    </main>
  )
}
