/**
 * The web console (docs/console.md) in a real browser, through test/support/consoleBrowser.ts:
 * Debian's chromium, headless, against one gateway run as `npm start` runs it, signed in with an
 * injected EIP-1193 wallet. The first flows: sign-in, keys, members, SQL, storage, pub/sub,
 * deployments, cache, audit, sessions, the operator's namespaces and cluster; the other
 * `console.*.browser.test.ts` suites hold the rest.
 *
 * Each flow is checked through the API too (a minted key works and stops working once revoked, the
 * uploaded bytes are under the CID shown, a rolled-back site serves the old content, an ended
 * session's token is refused). Screenshots of each page go to test-output/console/ in the checkout
 * (gitignored), for a reviewer to look at.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Page } from "puppeteer-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { repoRoot } from "../support/cli.js"
import { signIn } from "../support/client.js"
import { type ConsoleHarness, openConsole, type PageElement } from "../support/consoleBrowser.js"
import { type Gateway, getOnHost } from "../support/gateway.js"
import { tarOf } from "../support/tarball.js"

declare const document: {
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
  readonly documentElement: { readonly scrollWidth: number }
}

const NAMESPACE = "shop"

describe("the web console in a browser", () => {
  let h: ConsoleHarness
  let gw: Gateway
  let page: Page
  let ownerKey: string
  let wallet: ConsoleHarness["wallet"]
  const shoot = (name: string) => h.shoot(name)
  const click = (selector: string) => h.click(selector)
  const go = (title: string, heading: string) => h.go(title, heading)
  const text = (selector: string) => h.text(selector)
  const waitText = (selector: string, pattern: RegExp, timeout?: number) => h.waitText(selector, pattern, timeout)
  const fill = (selector: string, value: string) => h.fill(selector, value)
  const kept = () => h.kept()
  const refusal = () => h.refusal()

  beforeAll(async () => {
    h = await openConsole({ namespace: NAMESPACE })
    gw = h.gw
    page = h.page
    ownerKey = h.ownerKey
    wallet = h.wallet
    // a static site deployed twice, to roll back from the console
    for (const [route, html] of [
      ["upload", "<h1>first</h1>"],
      ["update", "<h1>second</h1>"]
    ] as const) {
      const form = new FormData()
      form.append("name", "hello")
      if (route === "upload") form.append("subdomain", "hello")
      form.append("archive", new Blob([tarOf({ "index.html": html })]), "site.tar.gz")
      const res = await fetch(`${gw.url}/v1/deployments/static/${route}`, { method: "POST", body: form, headers: { authorization: `Bearer ${ownerKey}` } })
      expect(res.status, await res.text()).toBe(route === "upload" ? 201 : 200)
    }
  }, 120_000)

  // what the page showed when a test failed, beside the other screenshots
  afterEach(async (context) => h?.shootFailure(context))

  afterAll(async () => {
    await h?.close()
  })

  it("is served with a strict CSP, no framing, the HTML uncached and the hashed files immutable; unknown paths get the app", async () => {
    const html = await gw.request("GET", "/console")
    expect(html.status).toBe(200)
    expect(html.headers.get("content-type")).toContain("text/html")
    const csp = html.headers.get("content-security-policy") ?? ""
    for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"]) {
      expect(csp).toContain(directive)
    }
    expect(csp).not.toContain("unsafe-inline")
    expect(csp).not.toContain("unsafe-eval")
    expect(html.headers.get("x-frame-options")).toBe("DENY")
    expect(html.headers.get("cache-control")).toBe("no-cache")
    // no inline script: every script is a file of this origin
    expect(html.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    const script = /<script type="module" src="(\/console\/assets\/main-[A-Z0-9]+\.js)"/.exec(html.text)?.[1]
    const style = /href="(\/console\/assets\/console-[A-Z0-9]+\.css)"/.exec(html.text)?.[1]
    expect(script).toBeDefined()
    expect(style).toBeDefined()
    for (const [asset, type] of [
      [script, "text/javascript"],
      [style, "text/css"]
    ] as const) {
      const answer = await fetch(gw.url + asset)
      expect(answer.status).toBe(200)
      expect(answer.headers.get("content-type")).toContain(type)
      expect(answer.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
      expect(answer.headers.get("x-content-type-options")).toBe("nosniff")
      expect((await answer.arrayBuffer()).byteLength).toBeGreaterThan(1000)
    }
    // the script compressed as the request allows, the same bytes once decoded
    const plain = await gw.request("GET", script!, { headers: { "accept-encoding": "identity" } })
    expect(plain.headers.get("content-encoding")).toBeNull()
    expect(plain.headers.get("vary")).toBe("accept-encoding")
    for (const [accept, coding] of [
      ["gzip, deflate, br", "br"],
      ["gzip;q=1, br;q=0", "gzip"],
      ["br;q=0, gzip;q=0", null]
    ] as const) {
      const answer = await gw.request("GET", script!, { headers: { "accept-encoding": accept } })
      expect(answer.headers.get("content-encoding")).toBe(coding)
      expect(answer.text).toBe(plain.text)
    }
    const deep = await gw.request("GET", "/console/keys")
    expect(deep.status).toBe(200)
    expect(deep.text).toBe(html.text)
    const missing = await gw.request("GET", "/console/assets/main-NOSUCHFILE.js")
    expect(missing.status).toBe(404)
    expect(missing.body.code).toBe("NOT_FOUND")
    // a page beside the API, not an API route
    const openapi = await gw.request("GET", "/v1/openapi.json")
    expect(Object.keys(openapi.body.paths).filter((p) => p.startsWith("/console"))).toEqual([])
  })

  it("signs in with the browser wallet from the keyboard, refreshes the session, works in a narrow window", async () => {
    await page.goto(`${gw.url}/console`)
    await page.waitForSelector("input[name=namespace]")
    await shoot("01-sign-in")
    await page.focus("input[name=namespace]")
    await page.keyboard.type(NAMESPACE)
    await page.keyboard.press("Enter")
    await waitText("[data-fact=header-namespace]", new RegExp(`^${NAMESPACE}$`))
    expect(await text("[data-fact=role]")).toBe("owner")
    expect((await text("[data-fact=subject]")).toLowerCase()).toBe(wallet.address.toLowerCase())
    const first = await kept()
    expect(first?.kind).toBe("wallet")
    // no cookie carries it
    expect(await page.cookies()).toEqual([])
    await shoot("02-overview")
    // the refresh the console makes a minute before expiry, made now: a new token that works
    const before = await text("[data-fact=refreshed-at]")
    await click("button::-p-text(Refresh now)")
    await page.waitForFunction((b) => document.querySelector("[data-fact=refreshed-at]")?.textContent !== b, {}, before)
    const refreshed = await kept()
    expect(refreshed?.token).not.toBe(first?.token)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: refreshed?.token })).status).toBe(200)
    // narrow: nothing wider than the window
    await page.setViewport({ width: 360, height: 740 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    await shoot("03-overview-narrow")
    await page.setViewport({ width: 1100, height: 800 })
  })

  it("mints a key shown once, which works until revoked from the page", async () => {
    await go("API keys", "API keys")
    await fill("input[name=label]", "worker")
    await click("button::-p-text(Mint key)")
    await page.waitForSelector(".shown-once .secret")
    const secret = await text(".shown-once .secret")
    expect(secret).toMatch(/^portico_key_/)
    const whoami = await gw.request("GET", "/v1/auth/whoami", { token: secret })
    expect(whoami.status).toBe(200)
    expect(whoami.body.role).toBe("runtime")
    const id = whoami.body.subject.replace(/^key:/, "")
    await page.waitForSelector(`tr[data-key="${id}"]`)
    await shoot("04-keys-minted")
    await click(`tr[data-key="${id}"] button::-p-text(Revoke)`)
    await click(`tr[data-key="${id}"] button::-p-text(Revoke ${id})`)
    await waitText(`tr[data-key="${id}"] .state`, /revoked/)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: secret })).status).toBe(401)
    await shoot("05-keys-revoked")
  })

  it("adds a member with a role, shows a refused address in words, and removes the member", async () => {
    const member = "0x2222222222222222222222222222222222222222"
    await go("Members", "Members")
    await waitText("main table td", /^owner$/)
    // a wrong EIP-55 checksum is refused before anything changes, and said
    await fill("input[name=wallet]", "0xAAaa222222222222222222222222222222222222")
    await click("button::-p-text(Add member)")
    await waitText(".refusal", /checksum/)
    await fill("input[name=wallet]", member)
    await page.select("select[name=role]", "developer")
    await click("button::-p-text(Add member)")
    await waitText(`tr[data-wallet="${member}"] td`, /^developer$/)
    const listed = await gw.request("GET", "/v1/namespace/members", { token: ownerKey })
    expect(listed.body.members.find((m: { wallet: string }) => m.wallet === member)?.role).toBe("developer")
    await shoot("05b-members")
    await click(`tr[data-wallet="${member}"] button::-p-text(Remove)`)
    await click(`tr[data-wallet="${member}"] button.danger`)
    await page.waitForFunction((w) => document.querySelector(`tr[data-wallet="${w}"]`) === null, {}, member)
    const after = await gw.request("GET", "/v1/namespace/members", { token: ownerKey })
    expect(after.body.members.some((m: { wallet: string }) => m.wallet === member)).toBe(false)
  })

  it("runs SQL on the cluster store and a node-local database, rows as a table, refusals in words", async () => {
    await go("SQL", "SQL")
    const run = async (sql: string) => {
      await fill("textarea[name=sql]", sql)
      await click("button::-p-text(Run)")
      await page.waitForFunction(() => !Array.from(document.querySelectorAll("button")).some((b) => b.textContent === "Running…"))
    }
    await run("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    await waitText("[data-result=write]", /0 rows affected/)
    await run("INSERT INTO notes (body) VALUES ('hello from the console')")
    await waitText("[data-result=write]", /1 row affected; last insert id 1/)
    await run("SELECT id, body FROM notes")
    await page.waitForSelector(".result table")
    const table = await page.$eval(".result table", (t) => ({
      head: Array.from((t as unknown as PageElement).querySelectorAll("th"), (th) => th.textContent),
      cells: Array.from((t as unknown as PageElement).querySelectorAll("tbody td"), (td) => td.textContent)
    }))
    expect(table).toEqual({ head: ["id", "body"], cells: ["1", "hello from the console"] })
    await shoot("06-sql-rows")
    // the platform's tables are refused, and the refusal is the API's, in words
    await run("SELECT * FROM api_keys")
    await page.waitForSelector(".refusal")
    const refused = await refusal()
    expect(refused.code).toBe("SQL_NOT_ALLOWED")
    expect(refused.text).toContain("SQL_NOT_ALLOWED")
    await shoot("07-sql-refused")
    // a node-local database: made here, chosen, queried
    await fill("input[name=new-database]", "orders")
    await click("button::-p-text(Create)")
    await page.waitForFunction(() => document.querySelector("select[name=database]")?.value === "orders")
    await run("SELECT 2 + 3 AS five")
    await waitText(".result td", /^5$/)
    await shoot("08-sql-node-local")
    // the cluster store as a file: exported to a link, and the same file imported in its place
    await click("button::-p-text(Export)")
    await waitText("[data-fact=export-link]", /\(\d+ bytes\)/)
    const exported = new Uint8Array(await (await fetch(`${gw.url}/v1/rqlite/export`, { headers: { authorization: `Bearer ${ownerKey}` } })).arrayBuffer())
    expect(Buffer.from(exported.subarray(0, 15)).toString()).toBe("SQLite format 3")
    expect(await text("[data-fact=export-link]")).toContain(`(${exported.byteLength} bytes)`)
    const file = path.join(process.env["PORTICO_TEST_TMP"] ?? repoRoot, `console-import-${process.pid}.sqlite`)
    fs.writeFileSync(file, exported)
    await (await page.$("input[name=import-file]"))?.uploadFile(file)
    await click("button::-p-text(Import)")
    await click("button::-p-text(Replace every table)")
    await waitText("[data-fact=imported]", new RegExp(`^imported ${exported.byteLength} bytes, 1 table$`), 20_000)
    fs.rmSync(file, { force: true })
    await page.select("select[name=database]", "")
    await run("SELECT body FROM notes")
    await waitText(".result td", /^hello from the console$/)
    await shoot("08b-sql-exported-imported")
  })

  it("uploads a file with progress and shows its CID, under which the gateway holds the bytes", async () => {
    await go("Storage", "Content storage")
    const file = path.join(process.env["PORTICO_TEST_TMP"] ?? repoRoot, `console-upload-${process.pid}.txt`)
    const content = `hello, portico console ${Date.now()}\n`
    fs.writeFileSync(file, content)
    const input = await page.$("input[name=file]")
    await input?.uploadFile(file)
    await click("button::-p-text(Upload)")
    await page.waitForSelector("[data-fact=cid]")
    const cid = await text("[data-fact=cid]")
    expect(cid).toMatch(/^bafk/)
    expect(await page.$eval("progress", (p) => (p as unknown as PageElement).value)).toBe(1)
    const token = (await kept())?.token
    const fetched = await gw.request("GET", `/v1/storage/get/${cid}`, { token })
    expect(fetched.text).toBe(content)
    await click("button::-p-text(Check pin status)")
    await waitText("[data-fact=pin-status]", /pinned/)
    await shoot("09-storage-uploaded")
    fs.rmSync(file, { force: true })
    // a privacy delete: unpinned and evicted now, the bytes gone
    expect(await page.$eval("input[name=pin-cid]", (el) => (el as unknown as PageElement).value)).toBe(cid)
    await click("input[name=immediate]")
    await click("button::-p-text(Unpin)")
    await click("button::-p-text(Unpin and evict now)")
    await waitText("[data-fact=pin-said]", /evicted: true/)
    await shoot("09b-storage-unpinned")
    const gone = await gw.request("GET", `/v1/storage/get/${cid}`, { token })
    expect(gone.status, gone.text).toBe(404)
  })

  it("subscribes to a topic live and sees what the page and another client publish arrive", async () => {
    await go("Pub/sub", "Publish/subscribe")
    await fill("input[name=watch]", "news")
    await click("button::-p-text(Subscribe)")
    await waitText("[data-fact=socket]", /^open$/)
    await fill("input[name=topic]", "news")
    await fill("textarea[name=message]", "hello from the console")
    await click("button::-p-text(Publish)")
    await waitText(".frames li[data-type=message] .data", /hello from the console/)
    // another publisher, over the API with the owner's key
    const published = await gw.request("POST", "/v1/pubsub/publish", { token: ownerKey, json: { topic: "news", data_base64: Buffer.from("from elsewhere").toString("base64") } })
    expect(published.status, published.text).toBe(200)
    await waitText(".frames li[data-type=message] .data", /from elsewhere/)
    await click("button::-p-text(Reload)")
    await waitText("main ul li code", /^news$/)
    await shoot("10-pubsub-live")
  })

  it("lists a deployment with its versions and rolls it back", async () => {
    await go("Deployments", "Deployments")
    await waitText('tr[data-deployment="hello"] [data-fact=version]', /^2$/)
    await click('tr[data-deployment="hello"] button::-p-text(Versions)')
    await waitText("[data-fact=current-version]", /^2$/)
    await shoot("11-deployments-versions")
    await click('tr[data-version="1"] button::-p-text(Roll back to this)')
    await click('tr[data-version="1"] button::-p-text(Roll back to version 1)')
    await waitText("[data-fact=current-version]", /^3$/, 20_000)
    await waitText('tr[data-deployment="hello"] [data-fact=version]', /^3$/)
    const served = await getOnHost(gw.port, "hello.portico.localhost", "/")
    expect(served.body).toContain("<h1>first</h1>")
    await shoot("12-deployments-rolled-back")
  })

  it("deploys a static site from the page, with its progress", async () => {
    const archive = path.join(process.env["PORTICO_TEST_TMP"] ?? repoRoot, `console-site-${process.pid}.tar.gz`)
    fs.writeFileSync(archive, tarOf({ "index.html": "<h1>deployed from the console</h1>" }))
    await fill("input[name=deploy-name]", "docs")
    await fill("input[name=deploy-subdomain]", "docs")
    await (await page.$("input[name=deploy-archive]"))?.uploadFile(archive)
    await click("button::-p-text(Deploy)")
    await waitText("[data-fact=deployed]", /^docs version 1 \(static, active\): docs\.portico\.localhost/, 20_000)
    expect(await page.$eval("main progress", (p) => (p as unknown as PageElement).value)).toBe(1)
    await page.waitForSelector('tr[data-deployment="docs"]')
    expect((await getOnHost(gw.port, "docs.portico.localhost", "/")).body).toContain("deployed from the console")
    await shoot("12b-deployments-deployed")
    fs.rmSync(archive, { force: true })
    // its environment: set, listed by name only, unset
    await click('tr[data-deployment="docs"] button::-p-text(Versions)')
    await page.waitForSelector('section[aria-label="settings of docs"]')
    await fill("input[name=env-assignment]", "GREETING=hello=world")
    await click("button::-p-text(Set)")
    await page.waitForSelector('li[data-env="GREETING"]')
    await waitText("[data-fact=env-said]", /recorded/)
    expect((await gw.request("GET", "/v1/deployments/env?name=docs", { token: ownerKey })).body.names).toEqual(["GREETING"])
    await shoot("12c-deployments-environment")
    await click('li[data-env="GREETING"] button::-p-text(Unset)')
    await click('li[data-env="GREETING"] button::-p-text(Unset GREETING)')
    await page.waitForFunction(() => document.querySelector('li[data-env="GREETING"]') === null)
    expect((await gw.request("GET", "/v1/deployments/env?name=docs", { token: ownerKey })).body.names).toEqual([])
    // deleted once its name is typed
    await fill("input[name=delete-deployment]", "docs")
    await click("button::-p-text(Delete docs)")
    await waitText("[role=status]", /^docs is deleted$/)
    await page.waitForFunction(() => document.querySelector('tr[data-deployment="docs"]') === null)
    expect((await gw.request("GET", "/v1/deployments/get?name=docs", { token: ownerKey })).status).toBe(404)
  })

  it("puts, scans, reads and deletes cache entries", async () => {
    await go("Cache", "Cache")
    await fill("input[name=dmap]", "greetings")
    await fill("input[name=cache-key]", "en")
    await fill("textarea[name=cache-value]", '{"text": "hello"}')
    await click("button::-p-text(Put)")
    await page.waitForSelector('li[data-cache-key="en"]')
    const stored = await gw.request("POST", "/v1/cache/get", { token: ownerKey, json: { dmap: "greetings", key: "en" } })
    expect(stored.body.value).toEqual({ text: "hello" })
    await click('li[data-cache-key="en"] button::-p-text(Get)')
    await waitText("[data-fact=cache-value]", /"text": "hello"/)
    // not JSON: said before anything is sent
    await fill("textarea[name=cache-value]", "hello")
    await click("button::-p-text(Put)")
    await waitText(".refusal", /the value is not JSON/)
    await shoot("13-cache")
    await click('li[data-cache-key="en"] button::-p-text(Delete)')
    await click('li[data-cache-key="en"] button::-p-text(Delete en)')
    await page.waitForFunction(() => document.querySelector('li[data-cache-key="en"]') === null)
    expect((await gw.request("POST", "/v1/cache/get", { token: ownerKey, json: { dmap: "greetings", key: "en" } })).status).toBe(404)
  })

  it("shows the audit trail, filtered by action", async () => {
    await go("Audit", "Audit trail")
    await waitText("main table td", /^key\.revoke$/)
    await fill("input[name=action]", "key.create")
    await click("button::-p-text(Filter)")
    await page.waitForFunction(() => {
      const actions = Array.from(document.querySelectorAll("main table tbody tr td:nth-child(3)"), (td) => td.textContent)
      return actions.length > 0 && actions.every((a) => a === "key.create")
    })
    await shoot("14-audit")
  })

  it("lists the wallet's sessions and ends another one", async () => {
    // a second session of the same wallet, as another browser would have
    const other = await signIn(gw, NAMESPACE, wallet)
    await go("Sessions", "Sessions")
    await page.waitForSelector(`tr[data-session="${other.session_id}"]`)
    await waitText("main table td", /\(this one\)/)
    await click(`tr[data-session="${other.session_id}"] button::-p-text(End)`)
    await click(`tr[data-session="${other.session_id}"] button.danger`)
    await page.waitForFunction((id) => document.querySelector(`tr[data-session="${id}"]`) === null, {}, other.session_id)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: other.access_token })).status).toBe(401)
    await shoot("15-sessions")
  })

  it("signs out, which ends the session at the gateway", async () => {
    const token = (await kept())?.token
    expect((await gw.request("GET", "/v1/auth/whoami", { token })).status).toBe(200)
    await click("button.sign-out")
    await page.waitForSelector("input[name=namespace]")
    expect(await kept()).toBeNull()
    expect(new URL(page.url()).pathname).toBe("/console")
    const after = await gw.request("GET", "/v1/auth/whoami", { token })
    expect(after.status).toBe(401)
  })

  it("lets the operator create a namespace and delete it after typing its name", async () => {
    // the platform realm: no namespace
    await fill("input[name=namespace]", "")
    await click("button::-p-text(Sign in with wallet)")
    await waitText("[data-fact=header-namespace]", /^platform$/)
    await waitText("[data-fact=role]", /^an operator$/)
    await go("Namespaces", "Namespaces")
    await waitText("main h2", /Every namespace/)
    await fill("input[name=namespace-name]", "scratch")
    await click("button::-p-text(Create)")
    await page.waitForSelector(".shown-once .secret")
    const key = await text(".shown-once .secret")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: key })).body.namespace).toBe("scratch")
    await page.waitForSelector('tr[data-namespace="scratch"]')
    await shoot("16-namespaces-created")
    await click('tr[data-namespace="scratch"] button::-p-text(Delete…)')
    const remove = "button::-p-text(Delete scratch)"
    expect(await page.$eval("section.danger-zone button.danger", (b) => (b as unknown as PageElement).disabled)).toBe(true)
    await fill("input[name=confirm-name]", "scratch")
    await fill("input[name=reason]", "made by the console test")
    await shoot("17-namespaces-confirm-delete")
    await click(remove)
    await waitText("[role=status]", /scratch is deleted/, 20_000)
    // the list is read again after the delete
    await page.waitForFunction(() => document.querySelector('tr[data-namespace="scratch"]') === null)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: key })).status).toBe(401)
    await shoot("18-namespaces-deleted")
  })

  it("shows the operator the cluster's health and its telemetry drawn live", async () => {
    await go("Cluster", "Cluster")
    await waitText("[data-fact=status]", /^ok$/)
    const node = await text("[data-fact=node]")
    expect(node).not.toBe("")
    // snapshots every 2 s: a line per node once two have come
    await waitText("[data-fact=snapshots]", /^([2-9]|\d\d+)$/, 15_000)
    const charts = await page.$$eval("figure.chart", (figures) =>
      figures.map((f) => ({
        title: (f as unknown as PageElement).querySelector("figcaption")?.textContent,
        lines: (f as unknown as PageElement).querySelectorAll("polyline").length,
        legend: (f as unknown as PageElement).querySelector("[data-last-value]")?.textContent
      }))
    )
    // the memory charts (the request charts are console.operator.browser.test.ts's)
    const memory = charts.filter((c) => ["Memory (RSS) (MiB)", "Heap used (MiB)", "Registry check latency (ms)"].includes(c.title ?? ""))
    expect(memory.map((c) => c.title)).toEqual(["Memory (RSS) (MiB)", "Heap used (MiB)", "Registry check latency (ms)"])
    expect(memory.every((c) => c.lines === 1)).toBe(true)
    expect(memory[0]?.legend).toMatch(/^\d+\.\d MiB$/)
    await shoot("19-cluster-telemetry")
    await go("Operators", "Operators")
    await waitText("main table td", new RegExp(`^${wallet.address}$`, "i"))
    await click("button::-p-text(Make an invite)")
    await waitText(".shown-once .secret", /^inv_/)
    await shoot("20-operators-invite")
  })

  it("signs in with a pasted API key, whose refusals on session-only routes are said in words", async () => {
    await click("button.sign-out")
    await page.waitForSelector("input[name=api-key]")
    await fill("input[name=api-key]", "portico_key_not_a_real_one")
    await click("button::-p-text(Sign in with key)")
    await page.waitForSelector(".refusal")
    expect((await refusal()).code).toBe("INVALID_API_KEY")
    await shoot("21-sign-in-key-refused")
    await fill("input[name=api-key]", ownerKey)
    await click("button::-p-text(Sign in with key)")
    await waitText("[data-fact=header-namespace]", new RegExp(`^${NAMESPACE}$`))
    expect(await text("[data-fact=subject]")).toMatch(/^key:key_/)
    // content storage takes a signed-in session: the API's refusal, shown
    await go("Storage", "Content storage")
    const file = path.join(process.env["PORTICO_TEST_TMP"] ?? repoRoot, `console-key-upload-${process.pid}.txt`)
    fs.writeFileSync(file, "refused\n")
    await (await page.$("input[name=file]"))?.uploadFile(file)
    await click("button::-p-text(Upload)")
    await page.waitForSelector(".refusal")
    expect((await refusal()).code).toBe("SESSION_REQUIRED")
    await shoot("22-storage-key-refused")
    fs.rmSync(file, { force: true })
    // the live view takes a key too: exchanged for a 15-minute JWT for the socket's ?jwt=
    await go("Pub/sub", "Publish/subscribe")
    await click("button::-p-text(Subscribe)")
    await waitText("[data-fact=socket]", /^open$/)
  })

  it("answers a page it does not have with the app, which says so", async () => {
    await page.goto(`${gw.url}/console/no-such-page`)
    await waitText("h1", /No such page/)
  })
})
