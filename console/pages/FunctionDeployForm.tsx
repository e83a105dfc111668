/**
 * Deploying a function from the page: its WebAssembly module (a WASI command, docs/functions.md)
 * sent to `POST /v1/functions` as the route takes it, the fields first and the module last in a
 * part named `wasm`, with the upload's progress. A name already deployed gets a new version; the
 * settings left empty keep the function's values (the route's rule), the environment included.
 */
import { useState } from "preact/hooks"
import { FunctionView } from "../../src/api/groups/FunctionsGroup.js"
import { RefusedError } from "../api.js"
import { RefusalNote, SentProgress, useAction } from "../ui.js"
import { uploadForm } from "../upload.js"

/** `NAME=value` lines (split at the first `=`; blank lines skipped) as an object, or the line that is not one. */
export const envLines = (text: string): { readonly env: Record<string, string> } | { readonly bad: string } => {
  const env: Record<string, string> = {}
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    const at = line.indexOf("=")
    if (at <= 0) return { bad: line }
    Object.defineProperty(env, line.slice(0, at).trim(), { value: line.slice(at + 1), enumerable: true, writable: true, configurable: true })
  }
  return { env }
}

export const FunctionDeployForm = (props: { readonly token: string; readonly onDeployed: (name: string) => void }) => {
  const [name, setName] = useState("")
  const [module, setModule] = useState<File | undefined>(undefined)
  const [memory, setMemory] = useState("")
  const [timeout, setTimeout_] = useState("")
  const [isPublic, setPublic] = useState(false)
  const [env, setEnv] = useState("")
  const [fraction, setFraction] = useState<number | undefined>(undefined)
  const [done, setDone] = useState<string | undefined>(undefined)
  const deploy = useAction()
  const refuse = (error: string, hint: string) => {
    throw new RefusedError({ error, code: "VALIDATION_FAILED", hint })
  }
  return (
    <section>
      <h2>Deploy a function</h2>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void deploy.run(async () => {
            setDone(undefined)
            if (module === undefined) return refuse("choose the module first", "a .wasm file: GOOS=wasip1 GOARCH=wasm go build -o fn.wasm .")
            const parsed = envLines(env)
            if ("bad" in parsed) return refuse(`not NAME=value: ${parsed.bad}`, "one variable a line, split at the first =")
            const form = new FormData()
            form.append("name", name.trim())
            if (memory.trim() !== "") form.append("memory_limit_mb", memory.trim())
            if (timeout.trim() !== "") form.append("timeout_seconds", timeout.trim())
            form.append("is_public", isPublic ? "true" : "false")
            if (Object.keys(parsed.env).length > 0) form.append("metadata", JSON.stringify({ env_vars: parsed.env }))
            form.append("wasm", module, module.name)
            setFraction(0)
            const made = await uploadForm("/v1/functions", props.token, form, FunctionView, setFraction)
            setDone(`${made.name} version ${made.version} is live (${made.size} bytes, ${made.memory_limit_mb} MB, ${made.timeout_seconds} s)`)
            props.onDeployed(made.name)
          })
        }}
      >
        <label>
          Name
          <input name="function-name" value={name} onInput={(e) => setName(e.currentTarget.value)} autoComplete="off" placeholder="hello" spellcheck={false} />
        </label>
        <label>
          Module (.wasm)
          <input name="function-module" type="file" accept=".wasm,application/wasm" onChange={(e) => setModule(e.currentTarget.files?.[0])} />
        </label>
        <label>
          Memory limit in MB (1-256; empty: 64, or the function's)
          <input name="function-memory" inputMode="numeric" value={memory} onInput={(e) => setMemory(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          Timeout in seconds (1-60; empty: 30, or the function's)
          <input name="function-timeout" inputMode="numeric" value={timeout} onInput={(e) => setTimeout_(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label class="inline">
          <input type="checkbox" name="function-public" checked={isPublic} onChange={(e) => setPublic(e.currentTarget.checked)} /> public: anyone may invoke it at{" "}
          <code>/v1/invoke/&lt;namespace&gt;/&lt;name&gt;</code>
        </label>
        <label>
          Environment (NAME=value, one a line; empty: kept)
          <textarea name="function-env" rows={3} value={env} onInput={(e) => setEnv(e.currentTarget.value)} spellcheck={false} />
        </label>
        <button type="submit" disabled={deploy.busy}>
          Deploy the function
        </button>
        <SentProgress fraction={fraction} />
      </form>
      <RefusalNote refusal={deploy.refusal} />
      {done === undefined ? null : (
        <p role="status" data-fact="function-deployed">
          {done}
        </p>
      )}
    </section>
  )
}
