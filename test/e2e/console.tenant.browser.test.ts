/**
 * The web console's tenant pages in a real browser (docs/console.md), through
 * test/support/consoleBrowser.ts: a device-bound sign-in (a WebCrypto key the page cannot export,
 * kept in IndexedDB), the Devices page (the account's devices, revoking one, an owner's view of a
 * member's devices), fetch capabilities on the Storage page (minted by the device-bound session,
 * fetched with no credential, revoked; refused in words without a device), and the Push page
 * (credentials stored and never shown back, registered devices, a topic, a test send whose
 * per-device results are the provider stand-ins' real answers: APNs over HTTP/2+TLS, Expo, ntfy).
 *
 * Every flow is read back through the API. Screenshots: test-output/console/a-*.png.
 */
import { Wallet } from "ethers"
import type { Page } from "puppeteer-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type ApnsStandIn, makeP8Key, startApnsStandIn } from "../support/apnsStandIn.js"
import { type ConsoleHarness, openConsole, type PageElement } from "../support/consoleBrowser.js"
import { type Device, newDevice } from "../support/device.js"
import { type ExpoStandIn, startExpoStandIn } from "../support/expoStandIn.js"
import type { Gateway } from "../support/gateway.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"

declare const document: {
  readonly querySelector: (selector: string) => PageElement | null
  readonly querySelectorAll: (selector: string) => ArrayLike<PageElement>
  readonly documentElement: { readonly scrollWidth: number }
}
declare const indexedDB: unknown
declare const sessionStorage: { readonly getItem: (key: string) => string | null }

const NAMESPACE = "shop"
const apnsKey = { teamId: "TEAM123456", keyId: "CONSOLEK01", bundleId: "com.example.console", p8Key: makeP8Key() }
const apnsToken = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
const expoToken = (n: number) => `ExponentPushToken[${String(n).padStart(22, "x")}]`

interface Signer {
  readonly address: string
  readonly signMessage: (message: string) => Promise<string>
}

describe("the console's tenant pages: devices, fetch capabilities, push", () => {
  let h: ConsoleHarness
  let gw: Gateway
  let page: Page
  let apns: ApnsStandIn
  let expo: ExpoStandIn
  let relay: NtfyStandIn
  const member = Wallet.createRandom()
  const content = `console fetch-cap bytes ${Date.now()}`
  let cid: string

  /** A session of `signer` through the API, bound to `device` when one is given. */
  const apiSession = async (signer: Signer, device?: Device, label?: string) => {
    const c = await gw.request("POST", "/v1/auth/challenge", {
      json: { wallet: signer.address, namespace: NAMESPACE, ...(device === undefined ? {} : { device_id: device.id }) }
    })
    expect(c.status, c.text).toBe(200)
    const signature = await signer.signMessage(c.body.message)
    const verified = await gw.request("POST", "/v1/auth/verify", {
      json: {
        message: c.body.message,
        signature,
        ...(device === undefined ? {} : { device_key: device.jwk, device_signature: await device.sign(c.body.message), ...(label === undefined ? {} : { device_label: label }) })
      }
    })
    expect(verified.status, verified.text).toBe(200)
    return verified.body as { access_token: string; refresh_token: string; session_id: string; device_id?: string; subject: string }
  }
  const keptWallet = () =>
    page.evaluate(() => JSON.parse(sessionStorage.getItem("portico.console.credential") ?? "null")) as Promise<{
      token: string
      refreshToken: string
      deviceId?: string
      whoami: { subject: string }
    }>
  const devicesOf = async (token: string) => (await gw.request("GET", "/v1/auth/devices", { token })).body.devices as Array<{ id: string; status: string; label: string }>
  const signInBound = async (label: string) => {
    await page.goto(`${gw.url}/console`)
    await page.waitForSelector("input[name=namespace]")
    await h.fill("input[name=namespace]", NAMESPACE)
    await h.click("input[name=bind-device]")
    await h.fill("input[name=device-label]", label)
    await h.shoot("a-01-sign-in-device")
    await page.keyboard.press("Enter")
    await h.waitText("[data-fact=header-namespace]", new RegExp(`^${NAMESPACE}$`))
  }

  beforeAll(async () => {
    apns = await startApnsStandIn()
    apns.addKey(apnsKey)
    expo = await startExpoStandIn({ accessToken: "expo-console-token" })
    relay = await startNtfyStandIn()
    h = await openConsole({
      namespace: NAMESPACE,
      gateway: {
        env: {
          PORTICO_APNS_URL: apns.url,
          PORTICO_EXPO_URL: expo.url,
          PORTICO_PUSH_RELAY_URL: relay.url,
          NODE_EXTRA_CA_CERTS: apns.caFile,
          PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS: "1"
        }
      }
    })
    gw = h.gw
    page = h.page
    const added = await gw.request("POST", "/v1/namespace/members", { token: h.ownerKey, json: { wallet: member.address, role: "developer" } })
    expect(added.status, added.text).toBe(200)
    // content of the namespace to hand out capabilities for
    const session = await apiSession(h.wallet)
    const form = new FormData()
    form.append("file", new Blob([content]), "cap.txt")
    const uploaded = await fetch(`${gw.url}/v1/storage/upload`, { method: "POST", body: form, headers: { authorization: `Bearer ${session.access_token}` } })
    const body = (await uploaded.json()) as { Cid: string }
    expect(uploaded.status, JSON.stringify(body)).toBe(200)
    cid = body.Cid
  }, 120_000)

  afterEach(async (context) => h?.shootFailure(context))

  afterAll(async () => {
    await h?.close()
    await Promise.all([apns?.stop(), expo?.stop(), relay?.stop()])
  })

  it("signs in bound to this browser as a device whose private key the page cannot export; refreshes with the device's proof", async () => {
    await signInBound("console browser")
    const kept = await keptWallet()
    expect(kept.deviceId).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(kept.refreshToken.startsWith("dv1_")).toBe(true)
    // the gateway enrolled it under the label typed, and the session is bound to it
    const listed = await devicesOf(kept.token)
    expect(listed).toEqual([expect.objectContaining({ id: kept.deviceId, status: "active", label: "console browser" })])
    const sessions = (await gw.request("GET", "/v1/auth/sessions", { token: kept.token })).body.sessions as Array<{ device_id: string | null; current: boolean }>
    expect(sessions.find((s) => s.current)?.device_id).toBe(kept.deviceId)
    // the key IndexedDB holds is a CryptoKey that cannot be exported
    const extractable = await page.evaluate(
      () =>
        new Promise((resolve, reject) => {
          const db = indexedDB as { open: (name: string) => { onsuccess: () => void; onerror: () => void; result: any } }
          const open = db.open("portico.console.devices")
          open.onerror = () => reject(new Error("no database"))
          open.onsuccess = () => {
            const all = open.result.transaction("keys").objectStore("keys").getAll()
            all.onsuccess = () => resolve(all.result.map((k: { privateKey: { extractable: boolean; type: string } }) => [k.privateKey.type, k.privateKey.extractable]))
          }
        })
    )
    expect(extractable).toEqual([["private", false]])
    // a refresh carries a fresh proof by that key: the rotated token works, the old one is spent
    await h.go("Overview", "Overview")
    await h.click("button::-p-text(Refresh now)")
    await page.waitForFunction((old) => JSON.parse((globalThis as any).sessionStorage.getItem("portico.console.credential") ?? "{}").refreshToken !== old, {}, kept.refreshToken)
    const refreshed = await keptWallet()
    expect(refreshed.refreshToken.startsWith("dv1_")).toBe(true)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: refreshed.token })).status).toBe(200)
    await h.go("Devices", "Devices")
    await h.waitText("[data-fact=session-device]", new RegExp(kept.deviceId ?? "none"))
  })

  it("lists the account's devices and revokes another one, whose session then stops", async () => {
    const phone = await newDevice()
    const other = await apiSession(h.wallet, phone, "phone")
    expect(other.device_id).toBe(phone.id)
    await h.go("Devices", "Devices")
    await h.click("button::-p-text(Reload)")
    await page.waitForSelector(`tr[data-device="${phone.id}"][data-status=active]`)
    await h.shoot("a-02-devices")
    await h.click(`tr[data-device="${phone.id}"] button::-p-text(Revoke)`)
    await h.click(`tr[data-device="${phone.id}"] button.danger`)
    await page.waitForSelector(`tr[data-device="${phone.id}"][data-status=revoked]`)
    const kept = await keptWallet()
    expect((await devicesOf(kept.token)).find((d) => d.id === phone.id)?.status).toBe("revoked")
    // the revoked device's session is over; this browser's goes on
    expect((await gw.request("GET", "/v1/auth/whoami", { token: other.access_token })).status).toBe(401)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: kept.token })).status).toBe(200)
  })

  it("shows an owner another member's devices and revokes one", async () => {
    const laptop = await newDevice()
    const session = await apiSession(member, laptop, "member laptop")
    await h.go("Devices", "Devices")
    await h.fill("input[name=subject]", member.address)
    await page.keyboard.press("Enter")
    await page.waitForSelector(`[data-subject] tr[data-device="${laptop.id}"][data-status=active]`)
    await h.shoot("a-03-member-devices")
    await h.click(`tr[data-device="${laptop.id}"] button::-p-text(Revoke)`)
    await h.click(`tr[data-device="${laptop.id}"] button.danger`)
    await page.waitForSelector(`tr[data-device="${laptop.id}"][data-status=revoked]`)
    const listed = await gw.request("GET", `/v1/namespace/devices?subject=${member.address}`, { token: h.ownerKey })
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body.devices).toEqual([expect.objectContaining({ id: laptop.id, status: "revoked" })])
    expect((await gw.request("GET", "/v1/auth/whoami", { token: session.access_token })).status).toBe(401)
    // a wallet that is not a checksummed address is refused in words before it is sent
    await h.fill("input[name=subject]", member.address.toLowerCase().replace("0x", "0X"))
    await page.keyboard.press("Enter")
    await h.waitText("[data-subject] .refusal", /wallet/)
  })

  it("mints fetch capabilities from the device-bound session: fetched with no credential, revoked with the revoke key", async () => {
    await h.go("Storage", "Content storage")
    await h.fill("input[name=cap-cid]", cid)
    await h.fill("input[name=cap-count]", "2")
    await h.fill("input[name=cap-hours]", "2")
    await h.click("button::-p-text(Mint capabilities)")
    await page.waitForFunction(() => document.querySelectorAll("li[data-cap]").length === 2)
    const caps = await page.$$eval("li[data-cap]", (items) =>
      items.map((li) => ({ id: li.getAttribute("data-cap") ?? "", text: li.querySelector("[data-fact=fetch-url]")?.textContent ?? "" }))
    )
    const tokenOf = (text: string) => /X-Portico-Fetch-Cap: (\S+)/.exec(text)?.[1] ?? ""
    for (const cap of caps) {
      expect(cap.text).toContain(`${gw.url}/v1/storage/relayed/${cid}`)
      // the URL and header shown fetch the bytes with no other credential
      const fetched = await fetch(`${gw.url}/v1/storage/relayed/${cid}`, { headers: { "x-portico-fetch-cap": tokenOf(cap.text) } })
      expect(fetched.status).toBe(200)
      expect(await fetched.text()).toBe(content)
    }
    const [first, second] = caps
    if (first === undefined || second === undefined) throw new Error("two capabilities")
    await h.click(`li[data-cap="${first.id}"] button::-p-text(Fetch with it)`)
    await h.waitText(`li[data-cap="${first.id}"] [data-fact=fetched]`, new RegExp(`^fetched ${Buffer.byteLength(content)} bytes$`))
    await h.shoot("a-04-fetch-caps")
    await h.click(`li[data-cap="${first.id}"] button::-p-text(Revoke)`)
    await h.click(`li[data-cap="${first.id}"] button.danger`)
    await page.waitForSelector(`li[data-cap="${first.id}"][data-revoked=true]`)
    const revoked = await fetch(`${gw.url}/v1/storage/relayed/${cid}`, { headers: { "x-portico-fetch-cap": tokenOf(first.text) } })
    expect(revoked.status).toBe(403)
    expect(((await revoked.json()) as { code: string }).code).toBe("FETCH_CAP_REVOKED")
    // the other one still reads; the page says so too
    expect((await fetch(`${gw.url}/v1/storage/relayed/${cid}`, { headers: { "x-portico-fetch-cap": tokenOf(second.text) } })).status).toBe(200)
    await h.click(`li[data-cap="${first.id}"] button::-p-text(Fetch with it)`)
    await page.waitForSelector(`li[data-cap="${first.id}"] .refusal[data-code=FETCH_CAP_REVOKED]`)
  })

  it("stores push credentials that never come back, lists the user's registrations and sends: the per-device results are the providers' answers", async () => {
    await h.go("Push", "Push")
    await h.waitText("[data-fact=configured]", /^none$/)
    // APNs: the stand-in knows this key and bundle
    await page.select("select[name=provider]", "ios_push")
    await h.fill("input[name=team_id]", apnsKey.teamId)
    await h.fill("input[name=key_id]", apnsKey.keyId)
    await h.fill("input[name=bundle_id]", apnsKey.bundleId)
    await page.$eval("textarea[name=p8_key]", (el, v) => {
      const area = el as unknown as { value: string; dispatchEvent: (e: unknown) => void }
      area.value = v
      area.dispatchEvent(new (globalThis as any).Event("input", { bubbles: true }))
    }, apnsKey.p8Key)
    await h.click("button::-p-text(Store credential)")
    await h.waitText("[data-fact=stored]", /ios_push stored.*has_p8_key: true/)
    expect(await page.$eval("textarea[name=p8_key]", (el) => el.value)).toBe("")
    // Expo with its access token
    await page.select("select[name=provider]", "legacy_push")
    await h.fill("input[name=access_token]", "expo-console-token")
    await h.click("button::-p-text(Store credential)")
    await h.waitText("[data-fact=stored]", /legacy_push stored/)
    await h.waitText("[data-fact=configured]", /ios_push/)
    await page.waitForSelector("tr[data-credential=legacy_push]")
    const summary = await gw.request("GET", "/v1/namespace/push-credentials", { token: h.ownerKey })
    expect([...summary.body.configured].sort()).toEqual(["ios_push", "legacy_push"])
    const view = await gw.request("GET", "/v1/namespace/push-credentials/ios_push", { token: h.ownerKey })
    expect(view.body.fields.has_p8_key).toBe(true)
    // no secret is on the page
    const shown = await page.$eval("main", (el) => el.textContent ?? "")
    expect(shown).not.toContain("PRIVATE KEY")
    expect(shown).not.toContain("expo-console-token")

    // the signed-in user's devices: two registered by an app (through the API), one from the page
    const kept = await keptWallet()
    const app = await apiSession(h.wallet)
    for (const json of [
      { device_id: "phone", provider: "ios_push", token: apnsToken(1), platform: "ios" },
      { device_id: "tablet", provider: "legacy_push", token: expoToken(1), platform: "android" }
    ]) {
      const stored = await gw.request("POST", "/v1/push/devices", { token: app.access_token, json })
      expect(stored.status, stored.text).toBe(200)
    }
    await h.fill("input[name=push-device-id]", "web")
    await page.select("select[name=push-device-provider]", "relay_push")
    await h.fill("input[name=push-device-token]", "console-web")
    await h.click("button[name=register-device]")
    // a device-bound session's registration is recorded under its verified device id, not the body's
    const web = kept.deviceId ?? "none"
    for (const id of ["phone", "tablet", web]) await page.waitForSelector(`tr[data-push-device="${id}"]`)
    await h.waitText(`tr[data-push-device="${web}"]`, /device-bound/)
    const registered = await gw.request("GET", "/v1/push/devices", { token: kept.token })
    expect((registered.body.devices as Array<{ device_id: string }>).map((d) => d.device_id).sort()).toEqual(["phone", "tablet", web].sort())

    // the phone's token is gone at APNs: its result says so and its registration is dropped
    apns.markUnregistered(apnsToken(1))
    const before = { apns: apns.received.length, expo: expo.received.length, relay: relay.published.length }
    await h.fill("input[name=title]", "Console test")
    await h.click("button[name=send]")
    await page.waitForSelector("[data-fact=envelope]")
    await h.shoot("a-05-push-sent")
    const rows = await page.$$eval("[data-fact=envelope] tr[data-result]", (trs) =>
      trs.map((tr) => ({ device: tr.getAttribute("data-result"), provider: tr.getAttribute("data-provider"), status: tr.getAttribute("data-status"), text: tr.textContent ?? "" }))
    )
    const byDevice = Object.fromEntries(rows.map((r) => [r.device, r]))
    expect(byDevice["phone"]).toMatchObject({ provider: "ios_push", status: "410" })
    expect(byDevice["phone"]?.text).toContain("Unregistered")
    expect(byDevice["phone"]?.text).toContain("yes")
    expect(byDevice["tablet"]).toMatchObject({ provider: "legacy_push", status: "200" })
    expect(byDevice[web]).toMatchObject({ provider: "relay_push", status: "200" })
    await h.waitText("[data-fact=envelope] p", /^ok: 3 devices attempted, 3 results\.$/)
    // what the providers received is what the page says was delivered
    expect(apns.received.length).toBe(before.apns)
    expect(expo.received.slice(before.expo)).toEqual([expect.objectContaining({ to: expoToken(1), authorization: "Bearer expo-console-token" })])
    expect(relay.published.slice(before.relay)).toEqual([expect.objectContaining({ topic: "console-web", title: "Console test" })])
    const after = await gw.request("GET", "/v1/push/devices", { token: kept.token })
    expect((after.body.devices as Array<{ device_id: string }>).map((d) => d.device_id).sort()).toEqual(["tablet", web].sort())

    // a credential deleted from the page is gone
    await h.click("tr[data-credential=legacy_push] button::-p-text(Delete)")
    await h.click("tr[data-credential=legacy_push] button.danger")
    await page.waitForFunction(() => document.querySelector("tr[data-credential=legacy_push]") === null)
    expect((await gw.request("GET", "/v1/namespace/push-credentials", { token: h.ownerKey })).body.configured).toEqual(["ios_push"])
  })

  it("registers a topic, sends to it and removes it", async () => {
    // a fresh page: the previous send's results are not this one's
    await h.go("Overview", "Overview")
    await h.go("Push", "Push")
    await page.select("select[name=topic-provider]", "relay_push")
    await h.fill("input[name=topic-token]", "console-topic")
    await h.click("button::-p-text(Register a topic)")
    await page.waitForSelector("li[data-topic]")
    const topicId = await page.$eval("li[data-topic]", (li) => li.getAttribute("data-topic") ?? "")
    expect(topicId).toMatch(/^[0-9a-f]{64}$/)
    // the topic just registered is the one the test send goes to
    await page.waitForFunction((id) => document.querySelector("input[name=topic-id]")?.value === id, {}, topicId)
    const before = relay.published.length
    await h.click("button[name=send]")
    // a topic's one result carries no device id
    await page.waitForSelector("[data-fact=envelope] tr[data-result='#0'][data-provider=relay_push][data-status='200']")
    expect(relay.published.slice(before)).toEqual([expect.objectContaining({ topic: "console-topic" })])
    await h.shoot("a-06-push-topic")
    await h.click(`li[data-topic="${topicId}"] button::-p-text(Remove)`)
    await h.click(`li[data-topic="${topicId}"] button.danger`)
    await page.waitForFunction(() => document.querySelector("li[data-topic]") === null)
    const gone = await gw.request("POST", "/v1/push/topics/send", { token: h.ownerKey, json: { topic_id: topicId, title: "t", body: "b" } })
    expect(gone.status, gone.text).toBe(404)
  })

  it("revoking this browser's device ends its session; the next bound sign-in enrols a new key", async () => {
    const kept = await keptWallet()
    await h.go("Devices", "Devices")
    await page.waitForSelector(`tr[data-device="${kept.deviceId}"]`)
    await h.click(`tr[data-device="${kept.deviceId}"] button::-p-text(Revoke)`)
    await h.click(`tr[data-device="${kept.deviceId}"] button::-p-text(Revoke this browser)`)
    await page.waitForSelector("input[name=namespace]")
    expect((await h.refusal()).code).toBe("DEVICE_REVOKED")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: kept.token })).status).toBe(401)
    await signInBound("console browser again")
    const again = await keptWallet()
    expect(again.deviceId).toBeDefined()
    expect(again.deviceId).not.toBe(kept.deviceId)
    const statuses = Object.fromEntries((await devicesOf(again.token)).map((d) => [d.id, d.status]))
    expect(statuses[kept.deviceId ?? ""]).toBe("revoked")
    expect(statuses[again.deviceId ?? ""]).toBe("active")
  })

  it("without a device, minting a fetch capability is refused in words; one minted elsewhere is revoked with its id and key", async () => {
    await page.click("button.sign-out")
    await page.waitForSelector("input[name=namespace]")
    await h.signInWithWallet(NAMESPACE)
    expect((await keptWallet()).deviceId).toBeUndefined()
    await h.go("Devices", "Devices")
    await h.waitText("[data-fact=session-device]", /^bound to no device$/)
    await h.go("Storage", "Content storage")
    await h.fill("input[name=cap-cid]", cid)
    await h.click("button::-p-text(Mint capabilities)")
    await page.waitForSelector(".refusal[data-code=FETCH_CAP_DEVICE_REQUIRED]")
    const words = await page.$eval(".refusal[data-code=FETCH_CAP_DEVICE_REQUIRED]", (el) => el.textContent ?? "")
    expect(words.length).toBeGreaterThan("FETCH_CAP_DEVICE_REQUIRED".length + 10)
    await h.shoot("a-07-fetch-cap-refused")
    // a capability a device-bound session minted through the API, revoked from the page
    const device = await newDevice()
    const bound = await apiSession(h.wallet, device, "api")
    const minted = await gw.request("POST", "/v1/storage/fetch-caps", { token: bound.access_token, json: { cid, count: 1, ttl_seconds: 3600 } })
    expect(minted.status, minted.text).toBe(200)
    const cap = minted.body.caps[0] as { id: string; token: string; revoke_key: string }
    expect((await fetch(`${gw.url}/v1/storage/relayed/${cid}`, { headers: { "x-portico-fetch-cap": cap.token } })).status).toBe(200)
    await h.fill("input[name=revoke-id]", cap.id)
    await h.fill("input[name=revoke-key]", "wrong-key")
    await h.click("form:has(input[name=revoke-id]) button[type=submit]")
    await page.waitForSelector(".refusal[data-code=FETCH_CAP_REVOKE_KEY_INVALID]")
    await h.fill("input[name=revoke-key]", cap.revoke_key)
    await h.click("form:has(input[name=revoke-id]) button[type=submit]")
    await h.waitText("[data-fact=revoked-other]", new RegExp(`^revoked ${cap.id}$`))
    const after = await fetch(`${gw.url}/v1/storage/relayed/${cid}`, { headers: { "x-portico-fetch-cap": cap.token } })
    expect(after.status).toBe(403)
    expect(((await after.json()) as { code: string }).code).toBe("FETCH_CAP_REVOKED")
  })

  it("fits a 360 px window on the new pages", async () => {
    await page.setViewport({ width: 360, height: 740 })
    for (const [title, heading] of [
      ["Devices", "Devices"],
      ["Push", "Push"],
      ["Storage", "Content storage"]
    ] as const) {
      await h.go(title, heading)
      // what sticks out, named, when something does
      const wide = await page.evaluate(() =>
        Array.from((globalThis as any).document.querySelectorAll("body *") as ArrayLike<any>)
          // a table scrolls sideways inside its box: only what sticks out of the page counts
          .filter((el) => el.closest(".table-wrap") === null && el.getBoundingClientRect().right > 361 && el.parentElement.getBoundingClientRect().right <= 361)
          .map((el) => `${el.tagName.toLowerCase()}.${String(el.className)}[${el.getAttribute("name") ?? ""}]`)
      )
      expect({ title, width: await page.evaluate(() => document.documentElement.scrollWidth), wide }).toEqual({ title, width: expect.any(Number), wide: [] })
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    }
    await h.shoot("a-08-narrow-push")
    await page.setViewport({ width: 1100, height: 800 })
  })
})
