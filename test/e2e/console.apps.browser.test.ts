/**
 * The web console's app pages (docs/console.md) in a real browser, through
 * test/support/consoleBrowser.ts: a deployment's status facts and events, its log followed live,
 * its custom domains; the Functions page (deploy a module, invoke it with a body typed in the
 * page, its logs, delete it).
 *
 * Every flow is checked through the API too: the facts and events shown are the routes' own, a
 * verified domain serves the site on its host and stops once removed, a line the app prints after
 * the page opened appears in the page without a reload and in the logs route, a function deployed
 * from the page answers the API, the page's invocation counted in its cache and is in its logs.
 * The gateway reads TXT records from the DNS stand-in (test/support/dnsStandIn.ts), as
 * test/e2e/deployments-domains.test.ts does. Screenshots: test-output/console/b-*.png.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Page } from "puppeteer-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type ConsoleHarness, openConsole, type PageElement } from "../support/consoleBrowser.js"
import { type DnsStandIn, startDnsStandIn } from "../support/dnsStandIn.js"
import { goFunction } from "../support/functions.js"
import { type Gateway, getOnHost, testTmp } from "../support/gateway.js"
import { tarOf } from "../support/tarball.js"

declare const document: {
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
  readonly documentElement: { readonly scrollWidth: number }
}
declare const window: Record<string, unknown>

const NAMESPACE = "shop"

/** A Node.js app that prints a line when asked: GET /say?word=W prints `said W`. */
const TALKER = `
const http = require("node:http")
http.createServer((req, res) => {
  const url = new URL(req.url, "http://app")
  if (url.pathname === "/say") console.log("said " + url.searchParams.get("word"))
  res.writeHead(200, { "content-type": "text/plain" })
  res.end(url.pathname === "/health" ? "ok" : "talker")
}).listen(Number(process.env.PORT))
`

describe("the console's deployment details and functions in a browser", () => {
  let h: ConsoleHarness
  let gw: Gateway
  let page: Page
  let ownerKey: string
  let dns: DnsStandIn
  const shoot = (name: string) => h.shoot(`b-${name}`)
  const waitText = (selector: string, pattern: RegExp, timeout?: number) => h.waitText(selector, pattern, timeout)
  const api = (method: "GET" | "POST" | "DELETE", route: string, json?: unknown) => gw.request(method, route, { token: ownerKey, ...(json === undefined ? {} : { json }) })
  const deploy = async (type: string, fields: Record<string, string>, files: Record<string, string>) => {
    const form = new FormData()
    for (const [k, v] of Object.entries(fields)) form.append(k, v)
    form.append("archive", new Blob([tarOf(files)]), "app.tar.gz")
    const res = await fetch(`${gw.url}/v1/deployments/${type}/upload`, { method: "POST", body: form, headers: { authorization: `Bearer ${ownerKey}` } })
    const text = await res.text()
    expect(res.status, text).toBe(201)
    return JSON.parse(text) as { name: string; domain: string; version: number }
  }
  /** Opens a deployment's details from the list (the page opened afresh, so the list is read again). */
  const openDeployment = async (name: string) => {
    await h.go("Overview", "Overview")
    await h.go("Deployments", "Deployments")
    await h.click(`tr[data-deployment="${name}"] button::-p-text(Versions)`)
    await page.waitForSelector(`[data-status-of="${name}"]`)
  }

  beforeAll(async () => {
    dns = await startDnsStandIn()
    h = await openConsole({ namespace: NAMESPACE, gateway: { env: { PORTICO_DNS_SERVERS: dns.server } } })
    gw = h.gw
    page = h.page
    ownerKey = h.ownerKey
    await deploy("static", { name: "site", subdomain: "site" }, { "index.html": "<h1>the shop's site</h1>" })
    await h.signInWithWallet()
  }, 120_000)

  afterEach(async (context) => h?.shootFailure(context))

  afterAll(async () => {
    await h?.close()
    await dns?.close()
  })

  it("shows a deployment's status facts and its events as the API gives them", async () => {
    await openDeployment("site")
    const record = (await api("GET", "/v1/deployments/get?name=site")).body
    const events = (await api("GET", "/v1/deployments/events?name=site")).body.events
    await waitText("[data-fact=status]", new RegExp(`^${record.status}$`))
    expect(await h.text("[data-fact=status-version]")).toBe(String(record.version))
    expect(await h.text("[data-fact=domain]")).toBe(record.domain)
    expect(await h.text("[data-fact=content-cid]")).toBe(record.content_cid)
    expect(await h.text("[data-fact=running]")).toMatch(/static site runs no process/)
    await page.waitForSelector(`tr[data-event="created"][data-seq="${events.at(-1).seq}"]`)
    const shown = await page.$$eval("tr[data-event]", (rows) => rows.map((r) => [r.getAttribute("data-event"), Number(r.getAttribute("data-seq"))]))
    expect(shown).toEqual(events.map((e: { type: string; seq: number }) => [e.type, e.seq]))
    await shoot("01-deployment-status")
  })

  it("adds a custom domain, shows its TXT record, says DOMAIN_NOT_VERIFIED until it is published, verifies and removes it", async () => {
    await h.fill("input[name=custom-domain]", "WWW.Example.com")
    await h.click("button::-p-text(Add the domain)")
    await page.waitForSelector('tr[data-domain="www.example.com"]')
    const listed = (await api("GET", "/v1/deployments/domains/list?name=site")).body.domains
    expect(listed).toHaveLength(1)
    const token: string = listed[0].txt.value
    expect(await h.text('tr[data-domain="www.example.com"] [data-fact=txt-name]')).toBe("_portico-verify.www.example.com")
    expect(await h.text('tr[data-domain="www.example.com"] [data-fact=txt-value]')).toBe(token)
    await shoot("02-domain-added")

    // no record yet: the gateway's refusal, in words, with the record to publish
    await h.click('tr[data-domain="www.example.com"] button::-p-text(Verify)')
    await page.waitForSelector('.refusal[data-code="DOMAIN_NOT_VERIFIED"]')
    expect(await page.$eval('.refusal[data-code="DOMAIN_NOT_VERIFIED"]', (el) => el.textContent ?? "")).toContain(token)
    expect((await getOnHost(gw.port, "www.example.com", "/")).body).not.toContain("the shop's site")
    await shoot("03-domain-not-verified")

    // published (the value as the page shows it): verified, and the site is served on the domain
    dns.setTxt("_portico-verify.www.example.com", [await h.text('tr[data-domain="www.example.com"] [data-fact=txt-value]')])
    await h.click('tr[data-domain="www.example.com"] button::-p-text(Verify)')
    await waitText('tr[data-domain="www.example.com"] [data-fact=domain-state]', /^verified /)
    expect(await page.$('.refusal[data-code="DOMAIN_NOT_VERIFIED"]')).toBeNull()
    expect((await api("GET", "/v1/deployments/domains/list?name=site")).body.domains[0]).toMatchObject({ domain: "www.example.com", verified: true })
    expect((await getOnHost(gw.port, "www.example.com", "/")).body).toContain("the shop's site")
    // the change is among the events, read again
    await page.waitForSelector('tr[data-event="domain_verified"]')
    await shoot("04-domain-verified")

    await h.click('tr[data-domain="www.example.com"] button::-p-text(Remove)')
    await h.click("button::-p-text(Remove www.example.com)")
    await page.waitForFunction(() => document.querySelector('tr[data-domain="www.example.com"]') === null)
    expect((await api("GET", "/v1/deployments/domains/list?name=site")).body.domains).toEqual([])
    expect((await getOnHost(gw.port, "www.example.com", "/")).body).not.toContain("the shop's site")
    await page.waitForSelector('tr[data-event="domain_removed"]')
  })

  it("follows a Node.js app's log live: a line the app prints after the page opened appears without a reload", async () => {
    const app = await deploy("nodejs", { name: "talker", skip_install: "true" }, { "index.js": TALKER })
    await openDeployment("talker")
    await waitText("[data-fact=status]", /^active$/)
    await waitText("[data-fact=running]", /^running for /, 15_000)
    // the gateway's own line for the start, as the logs route has it
    await waitText("[data-log-line]", /\[portico\] .*starting version 1/)
    await page.evaluate(() => void (window["sameDocument"] = true))

    for (const word of [`first-${Date.now()}`, `second-${Date.now()}`]) {
      expect((await getOnHost(gw.port, app.domain, `/say?word=${word}`)).body).toBe("talker")
      await waitText("[data-log-line]", new RegExp(`^said ${word}$`), 15_000)
      expect((await api("GET", "/v1/deployments/logs?name=talker")).body.lines).toContain(`said ${word}`)
    }
    expect(await page.evaluate(() => window["sameDocument"])).toBe(true)
    // each line once, in the order the app printed them
    const lines = await page.$$eval("[data-log-line]", (els) => els.map((el) => el.textContent ?? ""))
    const said = lines.filter((l) => l.startsWith("said "))
    expect(said).toHaveLength(2)
    expect(said[0]).toMatch(/^said first-/)
    expect(await h.text("[data-fact=logs-following]")).toBe("following")
    await shoot("05-deployment-logs-live")

    // paused, a new line waits; followed again, it comes
    await h.click("button::-p-text(Pause)")
    await waitText("[data-fact=logs-following]", /^paused$/)
    const later = `third-${Date.now()}`
    await getOnHost(gw.port, app.domain, `/say?word=${later}`)
    await new Promise((r) => setTimeout(r, 3_000))
    expect((await page.$$eval("[data-log-line]", (els) => els.map((el) => el.textContent ?? ""))).some((l) => l.includes(later))).toBe(false)
    await h.click("button::-p-text(Follow)")
    await waitText("[data-log-line]", new RegExp(`^said ${later}$`), 15_000)
  }, 120_000)

  it("deploys a function from the page, invokes it with a typed body, shows its logs and deletes it", async () => {
    const module = path.join(fs.mkdtempSync(path.join(testTmp(), "console-fn-")), "hello.wasm")
    fs.writeFileSync(module, goFunction("hello"))
    await h.go("Functions", "Functions")
    await shoot("06-functions-empty")
    await h.fill("input[name=function-name]", "hello")
    await (await page.$("input[name=function-module]"))?.uploadFile(module)
    await h.fill("textarea[name=function-env]", "GREETING=hi")
    await h.click("button::-p-text(Deploy the function)")
    await waitText("[data-fact=function-deployed]", /^hello version 1 is live/, 30_000)
    await page.waitForSelector('tr[data-function="hello"]')
    const made = await api("GET", "/v1/functions/hello")
    expect(made.status, made.text).toBe(200)
    expect(made.body).toMatchObject({ version: 1, env_vars: { GREETING: "hi" }, size: fs.statSync(module).size })
    await waitText("[data-fact=function-version]", /^1$/)
    expect(await h.text("[data-fact=function-cid]")).toBe(made.body.cid)

    await h.fill("textarea[name=invoke-body]", '{"name":"ada"}')
    await h.click("button::-p-text(Invoke)")
    await waitText("[data-fact=invoke-status]", /^200$/, 30_000)
    const body = JSON.parse(await h.text("[data-fact=invoke-body]"))
    expect(body).toMatchObject({ message: "hi, ada", hits: 1 })
    const requestId = await h.text("[data-fact=invoke-request-id]")
    expect(requestId).toBe(body.request_id)
    // its log line, with the invocation's request id, in the page (read again by itself) and the API
    await waitText(`tr[data-request="${requestId}"] [data-fact=log-message]`, /^greeting ada$/, 15_000)
    const logs = (await api("GET", "/v1/functions/hello/logs")).body.logs
    expect(logs.some((l: { request_id: string; message: string }) => l.request_id === requestId && l.message === "greeting ada")).toBe(true)
    // the page's call counted: the next one is the second
    const again = await fetch(`${gw.url}/v1/functions/hello/invoke`, { method: "POST", body: '{"name":"bob"}', headers: { authorization: `Bearer ${ownerKey}` } })
    expect(((await again.json()) as { hits: number }).hits).toBe(2)
    await shoot("07-function-invoked")

    // a narrow window: the page never scrolls sideways
    await page.setViewport({ width: 360, height: 800 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    await shoot("08-functions-narrow")
    await page.setViewport({ width: 1100, height: 800 })

    await h.click("button::-p-text(Delete hello)")
    await h.click("button::-p-text(Delete hello for good)")
    await waitText("[role=status]", /^hello is deleted$/)
    await page.waitForFunction(() => document.querySelector('tr[data-function="hello"]') === null)
    expect((await api("GET", "/v1/functions/hello")).status).toBe(404)
  }, 120_000)
})
