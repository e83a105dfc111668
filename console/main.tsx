/**
 * The Portico web console (docs/console.md): the page's frame (the signed-in namespace, the pages
 * it can open, sign-out) and the routing of `/console/<page>` to the pages. Every call goes through
 * the public API with the typed client (api.ts); nothing here reaches the gateway another way.
 */
import type { ComponentType } from "preact"
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { type Credential, currentCredential, currentNotice, PLATFORM_REALM, signOut, subscribe } from "./session.js"
import { Link, navigate, PageTitle, RefusalNote, useAction, usePath } from "./ui.js"
import { SignIn } from "./pages/SignIn.js"
import { Overview } from "./pages/Overview.js"
import { Keys } from "./pages/Keys.js"
import { Members } from "./pages/Members.js"
import { Sql } from "./pages/Sql.js"
import { Storage } from "./pages/Storage.js"
import { PubSub } from "./pages/PubSub.js"
import { Deployments } from "./pages/Deployments.js"
import { Functions } from "./pages/Functions.js"
import { Namespaces } from "./pages/Namespaces.js"
import { Audit } from "./pages/Audit.js"
import { Cache } from "./pages/Cache.js"
import { Sessions } from "./pages/Sessions.js"
import { Devices } from "./pages/Devices.js"
import { Push } from "./pages/Push.js"
import { Cluster } from "./pages/Cluster.js"
import { Operators } from "./pages/Operators.js"
import { Settings } from "./pages/Settings.js"

interface PageEntry {
  readonly path: string
  readonly title: string
  readonly page: ComponentType<{ readonly credential: Credential }>
  /** Only for an operator's platform session. */
  readonly operators?: boolean
}

/** A namespace's pages; the platform realm (operators, creators) has its own. */
const NAMESPACE_PAGES: ReadonlyArray<PageEntry> = [
  { path: "/console", title: "Overview", page: Overview },
  { path: "/console/keys", title: "API keys", page: Keys },
  { path: "/console/members", title: "Members", page: Members },
  { path: "/console/sql", title: "SQL", page: Sql },
  { path: "/console/storage", title: "Storage", page: Storage },
  { path: "/console/pubsub", title: "Pub/sub", page: PubSub },
  { path: "/console/push", title: "Push", page: Push },
  { path: "/console/deployments", title: "Deployments", page: Deployments },
  { path: "/console/functions", title: "Functions", page: Functions },
  { path: "/console/cache", title: "Cache", page: Cache },
  { path: "/console/audit", title: "Audit", page: Audit },
  { path: "/console/sessions", title: "Sessions", page: Sessions },
  { path: "/console/devices", title: "Devices", page: Devices }
]
const PLATFORM_PAGES: ReadonlyArray<PageEntry> = [
  { path: "/console", title: "Overview", page: Overview },
  { path: "/console/namespaces", title: "Namespaces", page: Namespaces },
  { path: "/console/cluster", title: "Cluster", page: Cluster, operators: true },
  { path: "/console/operators", title: "Operators", page: Operators, operators: true },
  { path: "/console/settings", title: "Settings", page: Settings, operators: true }
]

const NotFound = () => (
  <main>
    <PageTitle>No such page</PageTitle>
    <p>
      The console has no page at <code>{location.pathname}</code>. <Link to="/console">Go to the overview</Link>.
    </p>
  </main>
)

const Console = () => {
  const [credential, setCredential] = useState(currentCredential())
  const [notice, setNotice] = useState(currentNotice())
  const path = usePath()
  const out = useAction()
  useEffect(
    () =>
      subscribe((next, why) => {
        setCredential(next)
        setNotice(why)
      }),
    []
  )
  const pages =
    credential?.whoami.namespace === PLATFORM_REALM
      ? PLATFORM_PAGES.filter((p) => p.operators !== true || credential.whoami.role === "operator")
      : NAMESPACE_PAGES
  const normal = path.length > "/console".length && path.endsWith("/") ? path.slice(0, -1) : path
  const entry = pages.find((p) => p.path === normal)
  useEffect(() => {
    document.title =
      credential === undefined ? "Sign in · Portico console" : `${entry?.title ?? "No such page"} · ${credential.whoami.namespace} · Portico console`
  }, [entry, credential])
  if (credential === undefined) return <SignIn notice={notice} />
  const Page = entry?.page
  return (
    <div class="frame">
      <header>
        <a class="skip" href="#page">
          Skip to the page
        </a>
        <p class="brand">
          Portico · <span data-fact="header-namespace">{credential.whoami.namespace === PLATFORM_REALM ? "platform" : credential.whoami.namespace}</span>
        </p>
        <nav aria-label="pages">
          <ul>
            {pages.map((p) => (
              <li>
                <Link to={p.path} current={p.path === normal}>
                  {p.title}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" class="sign-out" disabled={out.busy} onClick={() =>
            void out.run(async () => {
              await signOut()
              // the next sign-in, perhaps to another namespace or the platform, starts at the overview
              navigate("/console")
            })
          }>
          Sign out
        </button>
      </header>
      <RefusalNote refusal={out.refusal} />
      <div id="page">{Page === undefined ? <NotFound /> : <Page key={`${normal}:${credential.token}`} credential={credential} />}</div>
    </div>
  )
}

const root = document.getElementById("app")
if (root !== null) {
  root.textContent = ""
  render(<Console />, root)
}
