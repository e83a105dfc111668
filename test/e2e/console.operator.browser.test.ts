/**
 * The web console's pub/sub presence and operator pages in a browser (docs/console.md), through
 * test/support/consoleBrowser.ts: who is present on a topic, live, as another subscriber (a raw
 * WebSocket from this process) joins and leaves; the operator's settings, changed and refused in
 * words; the creators allowlist; removing an operator; the telemetry's requests and errors drawn
 * live; and signing out of a platform session, which ends it at the gateway.
 *
 * Each flow is checked through the API too. Screenshots go to test-output/console/c-*.png.
 */
import { Wallet } from "ethers"
import type { Page } from "puppeteer-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { type ConsoleHarness, openConsole, type PageElement } from "../support/consoleBrowser.js"
import type { Gateway } from "../support/gateway.js"

declare const document: {
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
  readonly documentElement: { readonly scrollWidth: number }
}

const TOPIC = "lobby"

describe("the console's presence and operator pages in a browser", () => {
  let h: ConsoleHarness
  let gw: Gateway
  let page: Page
  let operatorToken: string
  const shoot = (name: string) => h.shoot(`c-${name}`)
  const click = (selector: string) => h.click(selector)
  const waitText = (selector: string, pattern: RegExp, timeout?: number) => h.waitText(selector, pattern, timeout)
  const fill = (selector: string, value: string) => h.fill(selector, value)
  const gone = (selector: string) => page.waitForFunction((s) => document.querySelector(s) === null, {}, selector)

  beforeAll(async () => {
    h = await openConsole()
    gw = h.gw
    page = h.page
  }, 120_000)

  afterEach(async (context) => h?.shootFailure(context))

  afterAll(async () => {
    await h?.close()
  })

  it("shows who is present on a topic, live: another subscriber joins, then leaves", async () => {
    await h.signInWithWallet()
    await h.go("Pub/sub", "Publish/subscribe")
    await fill("input[name=presence-topic]", TOPIC)
    await click("button::-p-text(Watch presence)")
    await waitText("[data-fact=presence-socket]", /^open$/)
    await waitText("[data-fact=presence-count]", /^0$/)
    // the page's watch does not enter presence itself
    expect((await gw.request("GET", `/v1/pubsub/presence?topic=${TOPIC}`, { token: h.ownerKey })).body.count).toBe(0)

    // another subscriber, over the API from this process, present as "visitor"
    const query = new URLSearchParams({ topic: TOPIC, presence: "true", member_id: "visitor", member_meta: JSON.stringify({ name: "Vera" }) })
    const visitor = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/pubsub/ws?${query.toString()}`, { headers: { authorization: `Bearer ${h.ownerKey}` } })
    await new Promise<void>((resolve, reject) => {
      visitor.once("open", () => resolve())
      visitor.once("error", reject)
    })
    await page.waitForSelector('tr[data-member="visitor"]')
    await waitText('tr[data-member="visitor"] [data-connections]', /^1$/)
    await waitText('tr[data-member="visitor"] td', /Vera/)
    await waitText("[data-fact=presence-count]", /^1$/)
    await waitText("li[data-change=join]", /visitor joined/)
    const present = await gw.request("GET", `/v1/pubsub/presence?topic=${TOPIC}`, { token: h.ownerKey })
    expect(present.body.members.map((m: { member_id: string }) => m.member_id)).toEqual(["visitor"])
    // the topic is listed with its subscribers, and its presence opens from there too
    await click("button::-p-text(Reload)")
    await page.waitForSelector(`li[data-topic="${TOPIC}"]`)
    await shoot("pubsub-presence")

    visitor.close(1000)
    await gone('tr[data-member="visitor"]')
    await waitText("li[data-change=leave]", /visitor left/)
    await waitText("[data-fact=presence-count]", /^0$/)
    expect((await gw.request("GET", `/v1/pubsub/presence?topic=${TOPIC}`, { token: h.ownerKey })).body.count).toBe(0)
  })

  it("shows the operator every setting and changes one, a value outside its rule refused in words", async () => {
    await click("button.sign-out")
    // signed out (the namespace session ended at the gateway) before the next sign-in
    await page.waitForSelector("input[name=namespace]")
    await h.signInWithWallet("")
    operatorToken = ((await h.kept()) as { token: string }).token
    await h.go("Settings", "Settings")
    const stored = (await gw.request("GET", "/v1/operator/settings", { token: operatorToken })).body.settings as Record<string, string>
    expect(Object.keys(stored).sort()).toEqual(["auto-update", "max-namespaces-per-wallet", "namespace-creation", "release-repo", "update-channel", "update-window"])
    // every setting, with the value the API holds
    for (const [name, value] of Object.entries(stored)) {
      await waitText(`li[data-setting="${name}"] [data-fact=value]`, new RegExp(`^${value === "" ? "\\(empty\\)" : value}$`))
    }

    const perWallet = 'li[data-setting="max-namespaces-per-wallet"]'
    await fill(`${perWallet} input`, "0")
    await click(`${perWallet} button[type=submit]`)
    await waitText(`${perWallet} .refusal`, /max-namespaces-per-wallet is an integer from 1 to 10000/)
    expect(await page.$eval(`${perWallet} .refusal`, (el) => el.getAttribute("data-code"))).toBe("VALIDATION_FAILED")
    // the rule in words, not a schema's trace
    expect(await h.text(`${perWallet} .refusal`)).not.toMatch(/schema|└/)
    await shoot("settings-refused")
    expect((await gw.request("GET", "/v1/operator/settings/max-namespaces-per-wallet", { token: operatorToken })).body.value).toBe(stored["max-namespaces-per-wallet"])

    await fill(`${perWallet} input`, "25")
    await click(`${perWallet} button[type=submit]`)
    await waitText(`${perWallet} [data-fact=value]`, /^25$/)
    await waitText(`${perWallet} [role=status]`, /Stored/)
    expect((await gw.request("GET", "/v1/operator/settings/max-namespaces-per-wallet", { token: operatorToken })).body).toEqual({ name: "max-namespaces-per-wallet", value: "25" })

    const hours = 'li[data-setting="update-window"]'
    await fill(`${hours} input`, "25-01")
    await click(`${hours} button[type=submit]`)
    await waitText(`${hours} .refusal`, /update-window is HH-HH/)

    const creation = 'li[data-setting="namespace-creation"]'
    await page.select(`${creation} select`, "allowlist")
    await click(`${creation} button[type=submit]`)
    await waitText(`${creation} [data-fact=value]`, /^allowlist$/)
    expect((await gw.request("GET", "/v1/operator/settings/namespace-creation", { token: operatorToken })).body.value).toBe("allowlist")
    await waitText("#creators-heading + p", /\(it is now\)/)

    // a narrow window: the page does not scroll sideways
    await page.setViewport({ width: 360, height: 800 })
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    await shoot("settings-narrow")
    await page.setViewport({ width: 1100, height: 800 })
    await shoot("settings")
  })

  it("adds a wallet to the creators allowlist and removes it", async () => {
    const creator = Wallet.createRandom()
    // a wrong checksum first: refused before anything is sent, in words
    const letter = creator.address.slice(2).search(/[a-fA-F]/) + 2
    const flipped = creator.address[letter]!
    const wrong = creator.address.slice(0, letter) + (flipped === flipped.toLowerCase() ? flipped.toUpperCase() : flipped.toLowerCase()) + creator.address.slice(letter + 1)
    await fill("input[name=creator]", wrong)
    await click("button::-p-text(Add to the list)")
    await waitText("#creators-heading ~ .refusal", /checksum/)
    expect((await gw.request("GET", "/v1/operator/creators", { token: operatorToken })).body.creators).toEqual([])
    await fill("input[name=creator]", creator.address)
    await click("button::-p-text(Add to the list)")
    const row = `tr[data-creator="${creator.address.toLowerCase()}"]`
    await page.waitForSelector(row)
    await waitText("#creators-heading ~ [role=status]", /added/)
    const listed = await gw.request("GET", "/v1/operator/creators", { token: operatorToken })
    expect(listed.body.creators.map((c: { wallet: string }) => c.wallet)).toContain(creator.address.toLowerCase())
    await shoot("creators")
    await click(`${row} button::-p-text(Remove)`)
    await click(`${row} button.danger`)
    await gone(row)
    const after = await gw.request("GET", "/v1/operator/creators", { token: operatorToken })
    expect(after.body.creators.map((c: { wallet: string }) => c.wallet)).not.toContain(creator.address.toLowerCase())
  })

  it("removes another operator, and refuses to remove the last one in words", async () => {
    const other = Wallet.createRandom()
    await gw.cli(["operator", "add", other.address])
    await h.go("Operators", "Operators")
    const row = `tr[data-operator="${other.address.toLowerCase()}"]`
    await page.waitForSelector(row)
    await click(`${row} button::-p-text(Remove)`)
    await click(`${row} button.danger`)
    await gone(row)
    await waitText("[role=status]", /is no longer an operator/)
    const listed = await gw.request("GET", "/v1/operator/operators", { token: operatorToken })
    expect(listed.body.operators.map((o: { wallet: string }) => o.wallet)).toEqual([h.wallet.address.toLowerCase()])
    // the operator is now the only one: the API refuses, and the page says so
    const self = `tr[data-operator="${h.wallet.address.toLowerCase()}"]`
    await click(`${self} button::-p-text(Remove)`)
    await click(`${self} button.danger`)
    await waitText(".refusal", /./)
    expect(await page.$eval(".refusal", (el) => el.getAttribute("data-code"))).toBe("CONFLICT")
    await shoot("operators-remove-refused")
    expect((await gw.request("GET", "/v1/operator/operators", { token: operatorToken })).body.operators).toHaveLength(1)
  })

  it("draws the nodes' requests, errors and latency live from the telemetry", async () => {
    await h.go("Cluster", "Cluster")
    await waitText("[data-fact=snapshots]", /^[1-9]/, 15_000)
    // traffic while the page watches: answers, 404s and 503s (push with no credential)
    const sent: Array<Promise<unknown>> = []
    for (let i = 0; i < 20; i++) sent.push(gw.request("GET", "/v1/auth/whoami", { token: h.ownerKey }))
    for (let i = 0; i < 6; i++) sent.push(gw.request("GET", "/v1/no/such/route"))
    for (let i = 0; i < 3; i++) sent.push(gw.request("POST", "/v1/push/send", { token: h.ownerKey, json: { user_id: "u", title: "t", body: "b" } }))
    await Promise.all(sent)
    const node = await h.text("[data-fact=node]")
    // the next snapshot carries them
    await page.waitForFunction(
      (n) => Number(document.querySelector(`[data-node-requests="${n}"] [data-fact=errors-5xx]`)?.textContent ?? "0") >= 3,
      { timeout: 15_000 },
      node
    )
    const shown = {
      answered: Number(await h.text(`[data-node-requests="${node}"] [data-fact=answered]`)),
      errors4xx: Number(await h.text(`[data-node-requests="${node}"] [data-fact=errors-4xx]`)),
      errors5xx: Number(await h.text(`[data-node-requests="${node}"] [data-fact=errors-5xx]`))
    }
    expect(shown.answered).toBeGreaterThanOrEqual(29)
    expect(shown.errors4xx).toBeGreaterThanOrEqual(6)
    // the charts, a line per node (errors and latency: two, 4xx and 5xx, p50 and p99)
    for (const [title, lines] of [
      ["Requests answered", 1],
      ["Errors", 2],
      ["Request latency", 2]
    ] as const) {
      await page.waitForSelector(`figure[data-chart="${title}"] polyline`, { timeout: 15_000 })
      expect(await page.$$eval(`figure[data-chart="${title}"] polyline`, (l) => l.length)).toBe(lines)
    }
    await waitText('figure[data-chart="Requests answered"] [data-last-value]', /^\d+(\.\d+)?\/s$/)
    await waitText('figure[data-chart="Request latency"] [data-last-value]', /^\d+\.\d\d ms$/)
    // a rate is drawn between snapshots: a line of two points or more once three have come
    await page.waitForFunction(() => (document.querySelector('figure[data-chart="Requests answered"] polyline')?.getAttribute("points") ?? "").includes(" "), { timeout: 15_000 })
    // through the API: the stream's snapshot counts at least what the page showed
    const controller = new AbortController()
    const stream = await fetch(`${gw.url}/v1/operator/telemetry/stream?interval=2`, { headers: { authorization: `Bearer ${operatorToken}` }, signal: controller.signal })
    const reader = stream.body!.getReader()
    let body = ""
    while (!/event: snapshot\ndata: [^\n]*\n\n/.test(body)) body += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    const requests = JSON.parse(/event: snapshot\ndata: ([^\n]*)\n\n/.exec(body)![1]!).requests
    expect(requests.answered).toBeGreaterThanOrEqual(shown.answered)
    expect(requests.errors_4xx).toBeGreaterThanOrEqual(shown.errors4xx)
    expect(requests.errors_5xx).toBeGreaterThanOrEqual(shown.errors5xx)
    await shoot("cluster-requests")
  })

  it("signs out of a platform session, which ends it at the gateway", async () => {
    const kept = (await h.kept()) as unknown as { token: string; refreshToken: string }
    expect((await gw.request("GET", "/v1/namespace/list", { token: kept.token })).status).toBe(200)
    await click("button.sign-out")
    await page.waitForSelector("input[name=namespace]")
    expect(await h.kept()).toBeNull()
    expect(await page.$(".refusal")).toBeNull()
    expect((await gw.request("GET", "/v1/namespace/list", { token: kept.token })).status).toBe(401)
    expect((await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: kept.refreshToken } })).status).toBe(401)
  })
})
