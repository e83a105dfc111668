/**
 * A deployment's custom domains (docs/deployments.md "Custom domains"): its claims listed with
 * their verification record (`_portico-verify.<domain>`, TXT, holding the claim's token), adding
 * one, verifying it (the gateway reads the record; missing, it answers `DOMAIN_NOT_VERIFIED`, said
 * in words with the record to publish) and removing one (confirmed).
 */
import { useEffect, useState } from "preact/hooks"
import type { DeploymentDomain } from "../../src/api/groups/DeploymentDomainsGroup.js"
import { call } from "../api.js"
import { ConfirmButton, RefusalNote, TableHead, useAction, when } from "../ui.js"

export const DeploymentDomains = (props: { readonly token: string; readonly name: string; readonly onChanged: () => void }) => {
  const { token, name } = props
  const [domains, setDomains] = useState<ReadonlyArray<typeof DeploymentDomain.Type> | undefined>(undefined)
  const [typed, setTyped] = useState("")
  const [said, setSaid] = useState<string | undefined>(undefined)
  const load = useAction()
  const add = useAction()
  const act = useAction()
  const reload = () => load.run(async () => setDomains((await call(token, (c) => c.deploymentDomains.list({ urlParams: { name } }))).domains))
  useEffect(() => void reload(), [name])
  const after = async (words: string) => {
    setSaid(words)
    await reload()
    props.onChanged()
  }
  return (
    <section aria-label={`custom domains of ${name}`}>
      <h2>Custom domains of {name}</h2>
      <p class="hint">
        A domain serves {name} once you publish a TXT record named <code>_portico-verify.&lt;domain&gt;</code> holding its token, then press Verify.
        Point the domain itself at the deployment's host (a CNAME).
      </p>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          void add.run(async () => {
            setSaid(undefined)
            const added = await call(token, (c) => c.deploymentDomains.add({ payload: { name, domain: typed.trim() } }))
            setTyped("")
            await after(`${added.domain} added: publish its TXT record, then verify it`)
          })
        }}
      >
        <label>
          Domain
          <input name="custom-domain" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" spellcheck={false} placeholder="www.example.com" />
        </label>
        <button type="submit" disabled={add.busy}>
          Add the domain
        </button>
      </form>
      <RefusalNote refusal={add.refusal} />
      <RefusalNote refusal={load.refusal} />
      <RefusalNote refusal={act.refusal} />
      {said === undefined ? null : (
        <p role="status" data-fact="domains-said">
          {said}
        </p>
      )}
      <div class="table-wrap">
        <table>
          <TableHead columns={["Domain", "State", "Verification record (TXT)"]} actions />
          <tbody>
            {(domains ?? []).map((d) => (
              <tr data-domain={d.domain}>
                <td>
                  <code>{d.domain}</code>
                </td>
                <td>
                  {d.verified ? (
                    <span class="state active" data-fact="domain-state">
                      verified {when(d.verified_at)}
                    </span>
                  ) : (
                    <span class="state" data-fact="domain-state">
                      waiting for its TXT record
                    </span>
                  )}
                </td>
                <td>
                  <dl class="facts">
                    <dt>Name</dt>
                    <dd>
                      <code data-fact="txt-name">{d.txt.name}</code>
                    </dd>
                    <dt>Value</dt>
                    <dd>
                      <code data-fact="txt-value">{d.txt.value}</code>
                    </dd>
                  </dl>
                </td>
                <td>
                  {d.verified ? null : (
                    <button
                      type="button"
                      disabled={act.busy}
                      onClick={() =>
                        void act.run(async () => {
                          setSaid(undefined)
                          const verified = await call(token, (c) => c.deploymentDomains.verify({ payload: { name, domain: d.domain } }))
                          await after(`${verified.domain} is verified: it serves ${name} now`)
                        })
                      }
                    >
                      Verify
                    </button>
                  )}{" "}
                  <ConfirmButton
                    label="Remove"
                    confirm={`Remove ${d.domain}`}
                    disabled={act.busy}
                    onConfirm={() =>
                      void act.run(async () => {
                        setSaid(undefined)
                        const removed = await call(token, (c) => c.deploymentDomains.remove({ payload: { name, domain: d.domain } }))
                        await after(`${removed.domain} is removed`)
                      })
                    }
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {domains !== undefined && domains.length === 0 ? <p class="hint">No custom domains.</p> : null}
    </section>
  )
}
