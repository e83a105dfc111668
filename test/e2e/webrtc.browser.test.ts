/**
 * A real browser in a room (docs/webrtc.md): headless chromium (Debian's package, fake camera and
 * microphone) opens test/fixtures/webrtc/room.html, which joins a room through the gateway's
 * `/v1/webrtc/signal` with a session's access token, relay-only through coturn, and answers the
 * media server's offers with its tracks. A werift peer in the same room sees it join and receives
 * its camera's RTP and its data; the browser receives the werift peer's RTP and data. The page
 * reports in its title, read over the browser's DevTools HTTP endpoint.
 */
import { Wallet } from "ethers"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Browser, hasChromium, type PageServer, servePages, startChromium } from "../support/chromium.js"
import { signIn } from "../support/client.js"
import { hasTurnServer, startTurnServer, type TurnServer } from "../support/coturn.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { connected, joinRoom, type MediaPeer, until } from "../support/mediaPeers.js"

const SECRET = "turn-secret-" + "7".repeat(20)
const bin = process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin")
const sfuBinary = path.join(bin, "portico-sfu")
const FIXTURES = path.resolve(import.meta.dirname, "../fixtures/webrtc")

/** The page's title, `key=value;...`, as a record. */
const parseTitle = (title: string): Record<string, string> =>
  Object.fromEntries(title.split(";").map((part) => [part.slice(0, part.indexOf("=")), part.slice(part.indexOf("=") + 1)]))

describe("a browser in a room", () => {
  let turn: TurnServer
  let gw: Gateway
  let pages: PageServer
  let browser: Browser
  let alice: string
  let bob: string
  const wallets = { alice: Wallet.createRandom(), bob: Wallet.createRandom() }
  const peers: Array<MediaPeer> = []

  beforeAll(async () => {
    if (!hasTurnServer()) throw new Error("coturn is missing: bash scripts/engines.sh coturn")
    if (!hasChromium()) throw new Error("chromium is missing: bash scripts/engines.sh chromium")
    turn = await startTurnServer(SECRET)
    gw = await startGateway({ env: { PORTICO_TURN_URIS: turn.uri, PORTICO_TURN_SECRET: SECRET, PORTICO_SFU_BINARY: sfuBinary } })
    const owner = (await gw.cli(["namespace", "create", "browsers"])).api_key
    for (const [name, wallet] of Object.entries(wallets)) {
      const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: wallet.address, role: "runtime" } })
      expect(added.status, `${name}: ${added.text}`).toBe(200)
    }
    alice = (await signIn(gw, "browsers", wallets.alice)).access_token
    bob = (await signIn(gw, "browsers", wallets.bob)).access_token
    expect((await gw.request("POST", "/v1/namespace/webrtc/enable", { token: owner, json: {} })).status).toBe(200)
    await until(async () => (await gw.request("GET", "/v1/webrtc/rooms", { token: owner })).status === 200, 10_000, "the rooms route")
    pages = await servePages(FIXTURES)
    browser = await startChromium()
  }, 120_000)
  afterAll(async () => {
    for (const peer of peers) await peer.close().catch(() => {})
    await browser?.stop()
    await pages?.stop()
    await gw?.stop()
    await turn?.stop()
  })

  it("joins from a page with fake devices, relay-only through coturn, and trades media and data with a werift peer", async () => {
    const werift = await joinRoom(gw.url, alice, "huddle")
    peers.push(werift)
    expect(werift.welcome["participants"]).toEqual([])

    const query = new URLSearchParams({ gateway: gw.url, token: bob, room: "huddle", say: "hello from chromium" })
    const tab = await browser.open(`${pages.url("room.html")}?${query}`)
    let status: Record<string, string> = {}
    const seen = async (check: (s: Record<string, string>) => boolean | Promise<boolean>, ms: number, what: string) => {
      try {
        await until(async () => {
          status = parseTitle(await browser.title(tab))
          if (status["error"] !== undefined && status["error"] !== "") throw new Error(`the page failed: ${decodeURIComponent(status["error"])}`)
          return check(status)
        }, ms, what)
      } catch (e) {
        throw new Error(`${(e as Error).message}; the page says ${JSON.stringify(status)}\n--- chromium:\n${browser.logs().slice(-4_000)}`)
      }
    }

    // the browser joins: the werift peer hears of it
    await seen((s) => (s["frames"] ?? "").split(",").includes("welcome"), 20_000, "the browser welcomed into the room")
    const joined = await werift.next("participant-joined", 20_000)
    expect(joined["user"]).toBe(wallets.bob.address.toLowerCase())
    await seen((s) => s["state"] === "connected", 20_000, "the browser connected")
    await until(() => connected(werift), 20_000, "the werift peer connected")

    // the browser's fake camera and microphone reach the werift peer
    await until(async () => (await werift.stats()).rtp >= 50, 20_000, "the werift peer receiving the browser's RTP")
    // and the werift peer's RTP and data reach the browser
    await seen(
      async (s) => {
        await werift.sendRtp(10, 5)
        await werift.sendData("hello from werift").catch(() => {})
        return Number(s["in"]) >= 20 && Number(s["data"]) >= 1
      },
      20_000,
      "the browser receiving the werift peer's RTP and data"
    )
    expect(decodeURIComponent(status["said"] ?? "")).toBe("hello from werift")
    expect(Number(status["bytes"])).toBeGreaterThan(0)
    expect(Number(status["out"])).toBeGreaterThan(0)
    // the pair in use is relayed on both ends
    expect(status["relay"]).toBe("1")
    await until(async () => (await werift.stats()).data.includes("hello from chromium"), 10_000, "the werift peer receiving the browser's data")
  }, 90_000)
})
