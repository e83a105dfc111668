/**
 * The web console's browser harness (docs/console.md), shared by the `console*.browser.test.ts`
 * suites: Debian's chromium, headless, driven by puppeteer-core, against one gateway run as
 * `npm start` runs it (the bundle in dist/, the console built beside it). The wallet is an EIP-1193
 * provider put into each page before its scripts run, backed by an ethers wallet in this process
 * (what the other suites sign in with), so the console signs in exactly as with a browser wallet:
 * eth_requestAccounts, then personal_sign of the gateway's EIP-4361 message.
 *
 * `openConsole` bootstraps the wallet as the platform's operator, creates the namespace it owns
 * (its admin key is `ownerKey`) and opens one page; each suite signs in through the page with
 * `signInWithWallet`. Screenshots go to test-output/console/ in the checkout (gitignored), for a
 * reviewer to look at.
 */
import { type HDNodeWallet, Wallet } from "ethers"
import * as fs from "node:fs"
import * as path from "node:path"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import { expect } from "vitest"
import { chromiumBinary, clientLaunchFlags } from "./chromium.js"
import { ensureDist, repoRoot } from "./cli.js"
import { operatorToken } from "./client.js"
import { type Gateway, type GatewayOptions, startGateway } from "./gateway.js"

/**
 * The page's globals, as the functions run inside the browser (page.evaluate, waitForFunction)
 * use them: this project's TypeScript has no DOM library, and adding one would let server code
 * name `document` unnoticed. Declared here, for the console suites only.
 */
export interface PageElement {
  readonly textContent: string | null
  readonly value?: unknown
  readonly disabled?: boolean
  readonly getAttribute: (name: string) => string | null
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
}
declare const document: {
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
  readonly documentElement: { readonly scrollWidth: number }
}
declare const sessionStorage: { readonly getItem: (key: string) => string | null }
declare const window: Record<string, unknown>

export const shotsDir = path.join(repoRoot, "test-output", "console")

export interface ConsoleHarness {
  readonly gw: Gateway
  readonly browser: Browser
  readonly page: Page
  /** The operator, and the owner of `namespace`. */
  readonly wallet: HDNodeWallet
  readonly namespace: string
  /** The namespace's admin key, from its creation. */
  readonly ownerKey: string
  /** A full-page screenshot under test-output/console/<name>.png. */
  readonly shoot: (name: string) => Promise<unknown>
  readonly click: (selector: string) => Promise<void>
  /** Follows the header's link titled `title` and waits for the page's `h1` to read `heading`. */
  readonly go: (title: string, heading: string) => Promise<void>
  readonly text: (selector: string) => Promise<string>
  /** Waits until some element matching `selector` has text matching `pattern`. */
  readonly waitText: (selector: string, pattern: RegExp, timeout?: number) => Promise<unknown>
  /** Replaces a field's text as a user does (select all, delete, type), so the page's state follows each keystroke. */
  readonly fill: (selector: string, value: string) => Promise<void>
  /** The credential the console keeps in this tab. */
  readonly kept: () => Promise<{ token: string; kind: string } | null>
  /** The console's refusal note, read as the API's envelope in words. */
  readonly refusal: () => Promise<{ code: string | null; text: string }>
  /** Opens /console and signs in to `namespace` (or the platform with "") with the browser wallet. */
  readonly signInWithWallet: (namespace?: string) => Promise<void>
  /** Screenshots the page when a test failed (call from afterEach with the test's context). */
  readonly shootFailure: (context: { task: { name: string; result?: { state?: string } } }) => Promise<void>
  readonly close: () => Promise<void>
}

export interface ConsoleOptions {
  readonly namespace?: string
  readonly gateway?: GatewayOptions
}

export const openConsole = async (options: ConsoleOptions = {}): Promise<ConsoleHarness> => {
  const binary = chromiumBinary()
  if (binary === undefined) throw new Error("chromium is missing: bash scripts/engines.sh chromium")
  const namespace = options.namespace ?? "shop"
  fs.mkdirSync(shotsDir, { recursive: true })
  ensureDist()
  const [gw, browser] = await Promise.all([
    startGateway({ bundled: true, ...options.gateway }),
    puppeteer.launch({ executablePath: binary, headless: true, args: [...clientLaunchFlags], defaultViewport: { width: 1100, height: 800 } })
  ])
  const wallet = Wallet.createRandom()
  // the operator bootstraps as the tour does, then makes the namespace it owns
  await gw.cli(["operator", "add", wallet.address])
  const platform = await operatorToken(gw, wallet)
  const created = await gw.request("POST", "/v1/namespaces", { token: platform, json: { name: namespace } })
  expect(created.status, created.text).toBe(201)
  const ownerKey: string = created.body.api_key

  const page = await browser.newPage()
  page.on("pageerror", (error) => process.stderr.write(`[console page] ${String(error)}\n`))
  // the test's wallet, as a browser wallet extension would put it there
  await page.exposeFunction("__porticoTestSign", (message: string) => wallet.signMessage(message))
  await page.evaluateOnNewDocument((address: string) => {
    const sign = window["__porticoTestSign"] as (m: string) => Promise<string>
    const utf8 = (hex: string) => new TextDecoder().decode(Uint8Array.from((hex.slice(2).match(/../g) ?? []).map((b) => parseInt(b, 16))))
    window["ethereum"] = {
      request: async ({ method, params }: { method: string; params?: Array<unknown> }) => {
        if (method === "eth_requestAccounts" || method === "eth_accounts") return [address]
        if (method === "personal_sign") {
          if (String(params?.[1]).toLowerCase() !== address.toLowerCase()) throw { code: 4100, message: "not this wallet's account" }
          return sign(utf8(String(params?.[0])))
        }
        throw { code: 4200, message: `unsupported method ${method}` }
      }
    }
  }, wallet.address)

  const shoot = (name: string) => page.screenshot({ path: path.join(shotsDir, `${name}.png`), fullPage: true })
  const click = (selector: string) => page.locator(selector).click()
  const go = async (title: string, heading: string) => {
    await click(`header nav a::-p-text(${title})`)
    await page.waitForFunction((h) => document.querySelector("h1")?.textContent === h, {}, heading)
  }
  const text = (selector: string) => page.$eval(selector, (el) => el.textContent ?? "")
  const waitText = (selector: string, pattern: RegExp, timeout = 10_000) =>
    page.waitForFunction(
      (s, source, flags) => Array.from(document.querySelectorAll(s)).some((el: PageElement) => new RegExp(source, flags).test(el.textContent ?? "")),
      { timeout },
      selector,
      pattern.source,
      pattern.flags
    )
  const fill = async (selector: string, value: string) => {
    await page.focus(selector)
    await page.$eval(selector, (el) => (el as unknown as { select: () => void }).select())
    await page.keyboard.press("Backspace")
    await page.type(selector, value)
    await page.waitForFunction((s, v) => document.querySelector(s)?.value === v, {}, selector, value)
  }
  const kept = async () =>
    page.evaluate(() => JSON.parse(sessionStorage.getItem("portico.console.credential") ?? "null") as { token: string; kind: string } | null)
  const refusal = () => page.$eval(".refusal", (el) => ({ code: el.getAttribute("data-code"), text: el.textContent ?? "" }))
  const signInWithWallet = async (ns: string = namespace) => {
    await page.goto(`${gw.url}/console`)
    await page.waitForSelector("input[name=namespace]")
    await page.focus("input[name=namespace]")
    if (ns !== "") await page.keyboard.type(ns)
    await page.keyboard.press("Enter")
    await waitText("[data-fact=header-namespace]", new RegExp(`^${ns === "" ? "platform" : ns}$`))
  }
  const shootFailure = async (context: { task: { name: string; result?: { state?: string } } }) => {
    if (context.task.result?.state === "fail") {
      await shoot(`failed-${context.task.name.slice(0, 40).replace(/[^a-z0-9]+/gi, "-")}`).catch(() => undefined)
    }
  }
  const close = async () => {
    await browser.close()
    // a clean stop: the console's routes hold nothing open
    expect(await gw.stop()).toBe(0)
  }
  return { gw, browser, page, wallet, namespace, ownerKey, shoot, click, go, text, waitText, fill, kept, refusal, signInWithWallet, shootFailure, close }
}
