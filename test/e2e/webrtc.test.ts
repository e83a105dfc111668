/**
 * Real-time media's control plane through a real gateway and a real TURN server (docs/webrtc.md):
 * enabling and disabling with the namespace's relay secret sealed (never shown), stealth and
 * admission settings, who may change and read them, and TURN credentials that coturn, run from
 * the shipped configuration, accepts for an allocation and a relay, while a tampered one is refused.
 */
import { Wallet } from "ethers"
import Database from "better-sqlite3"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { call, signIn } from "../support/client.js"
import { hasTurnServer, startTurnServer, type TurnServer } from "../support/coturn.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"

const SECRET = "turn-secret-" + "7".repeat(20)
const STEALTH = "turns:cdn.portico.test:443?transport=tcp"

const expectRefused = (reply: Reply, status: number, code: string) => {
  expect([reply.status, reply.body?.code], reply.text).toEqual([status, code])
  expect(typeof reply.body.error).toBe("string")
}

describe("real-time media's settings and TURN credentials", () => {
  let turn: TurnServer
  let gw: Gateway
  let owner: string
  let runtimeKey: string
  let session: string
  const member = Wallet.createRandom()
  const post = (route: string, token: string, json: unknown = {}) => gw.request("POST", route, { token, json })
  const registryRow = (namespace: string) => {
    const db = new Database(path.join(gw.dataDir, "registry.db"), { readonly: true })
    try {
      return db.prepare("SELECT * FROM webrtc_settings WHERE namespace = ?").get(namespace) as Record<string, unknown> | undefined
    } finally {
      db.close()
    }
  }

  beforeAll(async () => {
    if (!hasTurnServer()) throw new Error("coturn is missing: bash scripts/engines.sh coturn")
    turn = await startTurnServer(SECRET)
    gw = await startGateway({ env: { PORTICO_TURN_URIS: turn.uri, PORTICO_TURN_SECRET: SECRET, PORTICO_TURN_STEALTH_URI: STEALTH } })
    owner = (await gw.cli(["namespace", "create", "calls"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
    const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: member.address, role: "runtime" } })
    expect(added.status, added.text).toBe(200)
    session = (await signIn(gw, "calls", member)).access_token
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
    await turn?.stop()
  })

  it("is off until an owner or admin enables it, and then makes the relay secret, sealed and never shown", async () => {
    const before = await gw.request("GET", "/v1/namespace/webrtc/status", { token: runtimeKey })
    expect(before.body, before.text).toEqual({ namespace: "calls", enabled: false, stealth: false, require_admission: false, turn_uris: [turn.uri] })
    expectRefused(await post("/v1/webrtc/turn/credentials", session), 403, "FORBIDDEN")
    expectRefused(await post("/v1/namespace/webrtc/enable", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    const enabled = await post("/v1/namespace/webrtc/enable", owner)
    expect(enabled.body, enabled.text).toEqual({ namespace: "calls", enabled: true, stealth: false, require_admission: false, turn_uris: [turn.uri] })
    const sealed = String(registryRow("calls")?.["relay_secret_sealed"])
    expect(sealed.length).toBeGreaterThan(40)
    // enabling again keeps the secret
    expect((await post("/v1/namespace/webrtc/enable", owner)).status).toBe(200)
    expect(registryRow("calls")?.["relay_secret_sealed"]).toBe(sealed)
    for (const token of [owner, runtimeKey, session]) {
      const status = await gw.request("GET", "/v1/namespace/webrtc/status", { token })
      expect(status.body.enabled, status.text).toBe(true)
      expect(status.text).not.toContain(sealed)
      expect(Object.keys(status.body).sort()).toEqual(["enabled", "namespace", "require_admission", "stealth", "turn_uris"])
    }
    const audit = await gw.request("GET", "/v1/audit?action=webrtc.enable", { token: owner })
    expect(audit.status, audit.text).toBe(200)
    expect(audit.text).toContain("webrtc.enable")
  })

  it("gives a signed-in member TURN credentials that coturn relays with, and refuses an API key", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    expectRefused(await post("/v1/webrtc/turn/credentials", runtimeKey), 403, "SESSION_REQUIRED")
    const minted = await post("/v1/webrtc/turn/credentials", session)
    expect(minted.status, minted.text).toBe(200)
    const now = Math.floor(Date.now() / 1000)
    expect(minted.body.username).toMatch(/^\d+:calls$/)
    expect(Number(minted.body.username.split(":")[0])).toBeGreaterThanOrEqual(now + 86_400 - 5)
    expect(minted.body).toMatchObject({ ttl: 86_400, uris: [turn.uri], expires_at: Number(minted.body.username.split(":")[0]) })
    // through the typed client too
    const typed = await call(gw, session, (c) => c.webrtc.turnCredentials({ payload: {} }))
    expect(typed.username).toMatch(/:calls$/)
    const relayed = await turn.relay(minted.body.username, minted.body.password)
    expect(relayed.sent, relayed.output).toBeGreaterThan(0)
    expect(relayed.received, relayed.output).toBe(relayed.sent)
    // a password for another username, or a tampered one, allocates nothing
    const tampered = await turn.relay(minted.body.username.replace(":calls", ":other"), minted.body.password)
    expect(tampered.received, tampered.output.slice(-500)).toBe(0)
    expect(tampered.output).toMatch(/Cannot complete Allocation/)
  })

  it("keeps stealth and admission as settings of their own; bad bodies are 400", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    expectRefused(await post("/v1/namespace/webrtc/stealth/enable", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    const stealth = await post("/v1/namespace/webrtc/stealth/enable", owner)
    expect(stealth.body, stealth.text).toMatchObject({ stealth: true, turn_uris: [STEALTH] })
    expect((await post("/v1/webrtc/turn/credentials", session)).body.uris).toEqual([STEALTH])
    expect((await post("/v1/namespace/webrtc/stealth/disable", owner)).body.turn_uris).toEqual([turn.uri])
    // a change made here is seen by the next credentials at once, within the same second too
    for (let i = 0; i < 3; i++) {
      expect((await post("/v1/webrtc/turn/credentials", session)).body.uris).toEqual([turn.uri])
      await post("/v1/namespace/webrtc/stealth/enable", owner)
      expect((await post("/v1/webrtc/turn/credentials", session)).body.uris).toEqual([STEALTH])
      await post("/v1/namespace/webrtc/stealth/disable", owner)
    }
    expect((await gw.request("GET", "/v1/webrtc/config", { token: runtimeKey })).body).toEqual({ require_admission: false })
    expectRefused(await gw.request("PUT", "/v1/webrtc/config", { token: runtimeKey, json: { require_admission: true } }), 403, "CONTROL_PLANE_REQUIRED")
    const set = await gw.request("PUT", "/v1/webrtc/config", { token: owner, json: { require_admission: true } })
    expect(set.body, set.text).toEqual({ require_admission: true })
    expect((await gw.request("GET", "/v1/namespace/webrtc/status", { token: session })).body.require_admission).toBe(true)
    for (const body of [{ require_admission: "yes" }, { require_admission: true, extra: 1 }, {}]) {
      expectRefused(await gw.request("PUT", "/v1/webrtc/config", { token: owner, json: body }), 400, "VALIDATION_FAILED")
    }
    expectRefused(await post("/v1/namespace/webrtc/enable", owner, { now: true }), 400, "VALIDATION_FAILED")
  })

  it("disables: the relay secret goes, credentials stop, stealth needs it on; settings stay for the next enable", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    const disabled = await post("/v1/namespace/webrtc/disable", owner)
    expect(disabled.body, disabled.text).toMatchObject({ enabled: false, require_admission: true })
    expect(registryRow("calls")?.["relay_secret_sealed"]).toBeNull()
    expectRefused(await post("/v1/webrtc/turn/credentials", session), 403, "FORBIDDEN")
    expectRefused(await post("/v1/namespace/webrtc/stealth/enable", owner), 403, "FORBIDDEN")
    const again = await post("/v1/namespace/webrtc/enable", owner)
    expect(again.body).toMatchObject({ enabled: true, require_admission: true })
    expect(registryRow("calls")?.["relay_secret_sealed"]).not.toBeNull()
  })

  it("answers 503 naming the settings on a gateway with no TURN server configured", async () => {
    const bare = await startGateway({ dataDir: gw.dataDir })
    try {
      await post("/v1/namespace/webrtc/enable", owner)
      const refused = await bare.request("POST", "/v1/webrtc/turn/credentials", { token: session, json: {} })
      expectRefused(refused, 503, "UNAVAILABLE")
      expect(refused.body.hint).toMatch(/PORTICO_TURN_URIS/)
      expect(refused.headers.get("retry-after")).not.toBeNull()
    } finally {
      await bare.stop()
    }
  })
})

/**
 * A join whose client goes away during the handshake leaves no participant behind on the media
 * server. A client that sends its upgrade and half-closes (its FIN with the request) leaves a
 * socket that is not destroyed but no longer readable: ws refuses to complete an upgrade on it,
 * destroys it and never calls back, and the join the media server had taken was never ended.
 */
describe("a signalling handshake its client leaves", () => {
  let gw: Gateway
  let session: string
  const member = Wallet.createRandom()
  const sfuBinary = path.join(process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin"), "portico-sfu")

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_SFU_BINARY: sfuBinary } })
    const owner = (await gw.cli(["namespace", "create", "halfway"])).api_key
    expect((await gw.request("POST", "/v1/namespace/webrtc/enable", { token: owner, json: {} })).status).toBe(200)
    const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: member.address, role: "runtime" } })
    expect(added.status, added.text).toBe(200)
    session = (await signIn(gw, "halfway", member)).access_token
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  const participants = async (room: string) => {
    const listed = await gw.request("GET", "/v1/webrtc/rooms", { token: session })
    expect(listed.status, listed.text).toBe(200)
    const found = (listed.body.rooms as Array<{ room: string; participants: Array<unknown> }>).find((r) => r.room === room)
    return found?.participants.length ?? 0
  }

  it("ends the join on the media server when the client half-closes before its upgrade completes", async () => {
    // the media server is up once a join through it is answered 101
    for (let tries = 0; ; tries++) {
      const probe = await new Promise<number>((resolve) => {
        const req = new URL(gw.url)
        const s = net.connect(Number(req.port), req.hostname, () =>
          s.write(`GET /v1/webrtc/signal?room=probe HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${session}\r\n\r\n`)
        )
        s.once("data", (d: Buffer) => {
          s.destroy()
          resolve(Number(d.toString("latin1").split(" ")[1]))
        })
        s.on("error", () => resolve(0))
      })
      if (probe === 101) break
      expect(tries, `the probe join was answered ${probe}`).toBeLessThan(50)
      await new Promise((r) => setTimeout(r, 200))
    }
    const halfClosed = Array.from({ length: 5 }, () =>
      new Promise<void>((resolve) => {
        const req = new URL(gw.url)
        const s = net.connect(Number(req.port), req.hostname, () =>
          // the request and the client's FIN together: the socket is half-closed when the gateway upgrades it
          s.end(`GET /v1/webrtc/signal?room=halfway HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${session}\r\n\r\n`)
        )
        s.resume()
        s.on("close", () => resolve())
        s.on("error", () => resolve())
      })
    )
    await Promise.all(halfClosed)
    // every join was let go of: the room empties (it would keep its participants forever)
    for (let tries = 0; (await participants("halfway")) > 0; tries++) {
      expect(tries, "participants left behind by half-closed handshakes").toBeLessThan(30)
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(await participants("probe")).toBe(0)
  }, 60_000)

  /** A WebSocket to the room through the gateway: its first frame (the welcome) and how it closed. */
  const joined = (room: string, token: string, protocols?: Array<string>) =>
    new Promise<{ readonly welcome: { type: string; peer_id: string }; readonly protocol: string; readonly closed: Promise<number> }>((resolve, reject) => {
      const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/webrtc/signal?room=${room}`, protocols, { headers: { authorization: `Bearer ${token}` } })
      const closed = new Promise<number>((done) => ws.once("close", (code) => done(code)))
      ws.once("message", (data) => resolve({ welcome: JSON.parse(String(data)), protocol: ws.protocol, closed }))
      ws.once("unexpected-response", (_req, res) => reject(new Error(`answered ${res.statusCode}`)))
      ws.once("error", reject)
    })

  it("closes a signed-out session's signalling socket with 4401, whether the media server or the gateway holds it", async () => {
    const session = (await signIn(gw, "halfway", member)).access_token
    // a plain join: the gateway hands the socket to its media server; one naming a subprotocol
    // stays on the gateway's own socket, which echoes the first one offered
    const handed = await joined("revoked", session)
    const kept = await joined("revoked", session, ["portico.signal", "other"])
    expect(handed.welcome.type).toBe("welcome")
    expect(kept.welcome.type).toBe("welcome")
    expect(kept.protocol).toBe("portico.signal")
    expect(await participants("revoked")).toBe(2)
    const started = Date.now()
    expect((await gw.request("POST", "/v1/auth/logout", { token: session, json: {} })).status).toBe(200)
    const codes = await Promise.all([handed.closed, kept.closed])
    expect(codes).toEqual([4401, 4401])
    expect(Date.now() - started).toBeLessThan(10_000)
    for (let tries = 0; (await participants("revoked")) > 0; tries++) {
      expect(tries, "the revoked participants stayed in the room").toBeLessThan(30)
      await new Promise((r) => setTimeout(r, 200))
    }
  }, 30_000)
})

/**
 * A socket handed to the media server is no longer the server's: the gateway's stop still waits
 * for the requests it is answering (node, had it sent the socket as a server connection, would
 * have asked the media server instead and closed at once).
 */
describe("a gateway that handed signalling sockets to its media server", () => {
  it("stops as any gateway does: a request still arriving is answered before it exits", async () => {
    const sfuBinary = path.join(process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin"), "portico-sfu")
    const gw = await startGateway({ env: { PORTICO_SFU_BINARY: sfuBinary } })
    try {
      const owner = (await gw.cli(["namespace", "create", "handing"])).api_key
      expect((await gw.request("POST", "/v1/namespace/webrtc/enable", { token: owner, json: {} })).status).toBe(200)
      const member = Wallet.createRandom()
      expect((await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: member.address, role: "runtime" } })).status).toBe(200)
      const session = (await signIn(gw, "handing", member)).access_token
      const url = `${gw.url.replace(/^http/, "ws")}/v1/webrtc/signal?room=r`
      for (let tries = 0; ; tries++) {
        const welcomed = await new Promise<boolean>((resolve) => {
          const ws = new WebSocket(url, { headers: { authorization: `Bearer ${session}` } })
          ws.once("message", () => {
            ws.close()
            ws.once("close", () => resolve(true))
          })
          ws.once("error", () => resolve(false))
        })
        if (welcomed) break
        expect(tries, "no join was welcomed").toBeLessThan(50)
        await new Promise((r) => setTimeout(r, 200))
      }
      const body = JSON.stringify({ dmap: "m", key: "k", value: "x".repeat(2000) })
      const { port, hostname } = new URL(gw.url)
      const socket = net.connect(Number(port), hostname)
      let answer = ""
      socket.on("data", (d: Buffer) => (answer += d.toString("latin1")))
      socket.on("error", () => {})
      const ended = new Promise<void>((resolve) => socket.once("close", () => resolve()))
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
      socket.write(`POST /v1/cache/put HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 1000)}`)
      await new Promise((r) => setTimeout(r, 300))
      const stopped = gw.stop()
      await new Promise((r) => setTimeout(r, 1000))
      socket.write(body.slice(1000))
      await Promise.race([ended, new Promise((r) => setTimeout(r, 5000))])
      expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 200 OK")
      expect(await stopped).toBe(0)
    } finally {
      await gw.stop()
    }
  }, 60_000)
})
