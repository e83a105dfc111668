/**
 * One deployment's environment and its deletion: the variables' names (values are never answered),
 * setting one or unsetting one (a dynamic app restarts with it; a static site only records it),
 * and deleting the deployment after its name is typed again.
 */
import { useEffect, useState } from "preact/hooks"
import { call, RefusedError } from "../api.js"
import { ConfirmButton, RefusalNote, useAction } from "../ui.js"

export const DeploymentSettings = (props: { readonly token: string; readonly name: string; readonly onDeleted: () => void }) => {
  const { token, name } = props
  const [names, setNames] = useState<ReadonlyArray<string> | undefined>(undefined)
  const [said, setSaid] = useState<string | undefined>(undefined)
  const load = useAction()
  const change = useAction()
  useEffect(() => void load.run(async () => setNames((await call(token, (c) => c.deployments.env({ urlParams: { name } }))).names)), [name])
  const [assignment, setAssignment] = useState("")
  const [typed, setTyped] = useState("")
  const remove = useAction()
  const apply = (set: Record<string, string> | undefined, unset: ReadonlyArray<string> | undefined) =>
    change.run(async () => {
      setSaid(undefined)
      const answer = await call(token, (c) => c.deployments.envSet({ payload: { name, ...(set === undefined ? {} : { set }), ...(unset === undefined ? {} : { unset }) } }))
      setNames(answer.names)
      setSaid(answer.restarted ? "the app restarted with the new environment" : "recorded (a static site runs no process)")
    })
  return (
    <section aria-label={`settings of ${name}`}>
      <h2>Environment of {name}</h2>
      <RefusalNote refusal={load.refusal} />
      <ul class="env-names">
        {(names ?? []).map((variable) => (
          <li data-env={variable}>
            <code>{variable}</code> <ConfirmButton label="Unset" confirm={`Unset ${variable}`} onConfirm={() => void apply(undefined, [variable])} />
          </li>
        ))}
      </ul>
      {names !== undefined && names.length === 0 ? <p class="hint">No variables set.</p> : null}
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          const at = assignment.indexOf("=")
          if (at <= 0) {
            void change.run(async () => {
              throw new RefusedError({ error: "write NAME=value", code: "VALIDATION_FAILED", hint: "split at the first =, as `portico deploy --env` does" })
            })
            return
          }
          void apply({ [assignment.slice(0, at)]: assignment.slice(at + 1) }, undefined).then(() => setAssignment(""))
        }}
      >
        <label>
          Set a variable (NAME=value)
          <input name="env-assignment" value={assignment} onInput={(e) => setAssignment(e.currentTarget.value)} autoComplete="off" spellcheck={false} />
        </label>
        <button type="submit" disabled={change.busy}>
          Set
        </button>
      </form>
      <RefusalNote refusal={change.refusal} />
      {said === undefined ? null : (
        <p role="status" data-fact="env-said">
          {said}
        </p>
      )}
      <div class="danger-zone">
        <h2>Delete {name}</h2>
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault()
            void remove.run(async () => {
              await call(token, (c) => c.deployments.delete({ payload: { name } }))
              props.onDeleted()
            })
          }}
        >
          <label>
            Type its name to confirm
            <input name="delete-deployment" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />
          </label>
          <button type="submit" class="danger" disabled={remove.busy || typed !== name}>
            Delete {name}
          </button>
        </form>
        <RefusalNote refusal={remove.refusal} />
      </div>
    </section>
  )
}
