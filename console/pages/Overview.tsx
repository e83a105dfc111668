/** Who is signed in, and the session's life: when its token expires, refreshed automatically before. */
import { useEffect, useState } from "preact/hooks"
import { type Credential, PLATFORM_REALM, refreshNow } from "../session.js"
import { PageTitle, RefusalNote, useAction } from "../ui.js"

export const Overview = (props: { readonly credential: Credential }) => {
  const c = props.credential
  const refresh = useAction()
  const [, tick] = useState(0)
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 10_000)
    return () => clearInterval(timer)
  }, [])
  return (
    <main>
      <PageTitle>Overview</PageTitle>
      {c.whoami.namespace === PLATFORM_REALM ? (
        <dl class="facts">
          <dt>Signed in to</dt>
          <dd>the platform: creating namespaces{c.whoami.role === "operator" ? ", and the operator's pages" : ""}</dd>
          <dt>As</dt>
          <dd data-fact="role">{c.whoami.role === "operator" ? "an operator" : "a namespace creator (not an operator)"}</dd>
          <dt>Wallet</dt>
          <dd data-fact="subject">{c.whoami.subject}</dd>
        </dl>
      ) : (
        <dl class="facts">
          <dt>Namespace</dt>
          <dd data-fact="namespace">{c.whoami.namespace}</dd>
          <dt>Signed in as</dt>
          <dd data-fact="subject">{c.whoami.subject}</dd>
          <dt>Role</dt>
          <dd data-fact="role">{c.whoami.role}</dd>
          <dt>Credential</dt>
          <dd>{c.kind === "wallet" ? "wallet session" : c.whoami.method === "api_key" ? "API key" : c.whoami.method}</dd>
          <dt>Grants</dt>
          <dd>{c.whoami.grants.join(", ") || "none"}</dd>
        </dl>
      )}
      {c.kind !== "wallet" ? null : (
        <section>
          <h2>Session</h2>
          <p>
            Access token expires in <span data-fact="expires-in">{Math.max(0, Math.round((c.expiresAt - Date.now()) / 1000))}</span> s; the console
            refreshes it a minute before. Last refreshed at <time data-fact="refreshed-at">{new Date(c.refreshedAt).toISOString()}</time>.
          </p>
          <button type="button" disabled={refresh.busy} onClick={() => void refresh.run(refreshNow)}>
            Refresh now
          </button>
          <RefusalNote refusal={refresh.refusal} />
        </section>
      )}
    </main>
  )
}
