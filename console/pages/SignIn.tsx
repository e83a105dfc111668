/**
 * Sign-in: a browser wallet (to a namespace, or to the platform realm for operators), optionally
 * bound to this browser as a device (a WebCrypto key it cannot export, device.ts), or an API key
 * pasted in.
 */
import { useState } from "preact/hooks"
import type { Refusal } from "../api.js"
import { signInWithKey, signInWithWallet } from "../session.js"
import { PageTitle, RefusalNote, useAction } from "../ui.js"

export const SignIn = (props: { readonly notice: Refusal | undefined }) => {
  const [namespace, setNamespace] = useState("")
  const [key, setKey] = useState("")
  const [bind, setBind] = useState(false)
  const [label, setLabel] = useState("this browser")
  const wallet = useAction()
  const pasted = useAction()
  return (
    <main class="sign-in">
      <PageTitle>Sign in to Portico</PageTitle>
      {props.notice === undefined ? null : (
        <section aria-label="why you were signed out">
          <p>Your session ended:</p>
          <RefusalNote refusal={props.notice} />
        </section>
      )}
      <section>
        <h2>With your wallet</h2>
        <form
          onSubmit={(event) => {
            event.preventDefault()
            void wallet.run(() => signInWithWallet(namespace, bind ? { label } : undefined))
          }}
        >
          <label>
            Namespace
            <input name="namespace" value={namespace} onInput={(e) => setNamespace(e.currentTarget.value)} placeholder="acme" autoComplete="off" />
          </label>
          <p class="hint">Leave it empty to sign in to the platform: creating namespaces, and the operator's pages.</p>
          <label class="inline">
            <input name="bind-device" type="checkbox" checked={bind} onChange={(e) => setBind(e.currentTarget.checked)} /> Bind this browser as a device
          </label>
          {bind ? (
            <>
              <label>
                Device label
                <input name="device-label" value={label} onInput={(e) => setLabel(e.currentTarget.value)} autoComplete="off" />
              </label>
              <p class="hint">
                The browser makes a P-256 key it cannot export and keeps it for this namespace and wallet; the session is bound to it (needed for
                fetch capabilities, and where the namespace requires devices). Revoke it on the Devices page.
              </p>
            </>
          ) : null}
          <button type="submit" disabled={wallet.busy}>
            {wallet.busy ? "Waiting for the wallet…" : "Sign in with wallet"}
          </button>
        </form>
        <RefusalNote refusal={wallet.refusal} />
      </section>
      <section>
        <h2>With an API key</h2>
        <form
          onSubmit={(event) => {
            event.preventDefault()
            void pasted.run(() => signInWithKey(key))
          }}
        >
          <label>
            API key
            <input name="api-key" type="password" value={key} onInput={(e) => setKey(e.currentTarget.value)} placeholder="portico_key_…" autoComplete="off" />
          </label>
          <button type="submit" disabled={pasted.busy}>
            Sign in with key
          </button>
        </form>
        <RefusalNote refusal={pasted.refusal} />
        <p class="hint">The credential stays in this tab only (session storage), never in a cookie.</p>
      </section>
    </main>
  )
}
