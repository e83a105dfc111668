/**
 * Real-time media on three real nodes (docs/webrtc.md, "Signalling" and "Rooms across the cluster";
 * test/support/cluster.ts: each node a gateway, its media server and a voter of a three-voter
 * rqlite registry in a network namespace of its own), relay-only through one real coturn: two
 * users joining a room through two different gateways meet on the node the rendezvous hash names,
 * their media and data cross it, the rooms route of a third gateway lists them there, and their
 * joins reach a subscriber on that third gateway (pub/sub on the cluster's Redis). Then the room's
 * node, made the registry's leader, is killed: both sockets close, the peers rejoin through
 * surviving gateways past the election, and the room is placed on a surviving node where media
 * flows again, and the rooms route names the lost node unreachable. Runs in a child vitest inside a
 * loopback-only network namespace, as the other `*.cluster.test.ts` files do.
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { Wallet } from "ethers"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { placeRoom } from "../../src/domain/SfuTicket.js"
import { type Cluster, type ClusterNode, startCluster } from "../support/cluster.js"
import { hasTurnServer, startTurnServer, type TurnServer } from "../support/coturn.js"
import { type Reply, requestTo } from "../support/gateway.js"
import { connected, JoinRefused, joinRoom, type MediaPeer, until } from "../support/mediaPeers.js"
import { runInLoopbackNetns } from "../support/netns.js"
import { IN_NETNS } from "../support/storageEngines.js"
import { waitFor } from "../support/wait.js"

const SUITE = "real-time media on three nodes"
const CASES = 2

if (process.env[IN_NETNS] !== "1") {
  it("passes the real-time media suite on three nodes in a loopback-only network namespace", async () => {
    const { code, output, passed } = await runInLoopbackNetns("test/e2e/webrtc.cluster.test.ts", SUITE)
    expect(code, output).toBe(0)
    expect(passed, output).toBe(CASES)
    expect(output).not.toMatch(/\d+ failed/)
  }, 600_000)
} else {
  const SECRET = "turn-secret-" + "7".repeat(20)
  /**
   * coturn's address: not 127.0.0.1, which each node's namespace keeps as its own loopback, but
   * one of this namespace's, which the nodes reach through it as they reach Redis.
   */
  const TURN_ADDRESS = "127.0.0.30"
  const NAMESPACE = "calls"
  const sfuBinary = path.join(process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin"), "portico-sfu")

  const send = (node: ClusterNode, method: string, route: string, options: { token?: string; json?: unknown; ms?: number } = {}): Promise<Reply> =>
    requestTo(node.url, method, route, { ...options, ms: options.ms ?? 30_000 })
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

  interface Participant {
    readonly user: string
  }
  interface Listed {
    readonly room: string
    readonly node: string
    readonly participants: ReadonlyArray<Participant>
  }

  describe(SUITE, () => {
    let turn: TurnServer
    let cluster: Cluster
    let n: ReadonlyArray<ClusterNode>
    let owner: string
    const operator = Wallet.createRandom()
    const wallets = { alice: Wallet.createRandom(), bob: Wallet.createRandom() }
    const user = (w: { readonly address: string }) => w.address.toLowerCase()
    const tokens: Record<keyof typeof wallets, string> = { alice: "", bob: "" }
    const peers: Array<MediaPeer> = []
    const sockets: Array<WebSocket> = []

    const withLogs = async <A>(run: () => Promise<A>): Promise<A> => {
      try {
        return await run()
      } catch (error) {
        const logs = n.map((node) => node.logs().slice(-3000)).join("\n")
        if (process.env["WEBRTC_DEBUG"] !== undefined) (await import("node:fs")).appendFileSync(process.env["WEBRTC_DEBUG"], [...n.map((node) => node.logs()), turn.logs()].join("\n=====\n"))
        throw new Error(`${error instanceof Error ? error.message : String(error)}\n${logs}`)
      }
    }
    const roomsOn = async (node: ClusterNode) => {
      const listed = await send(node, "GET", "/v1/webrtc/rooms", { token: owner, ms: 10_000 })
      expect(listed.status, listed.text).toBe(200)
      return listed.body as { namespace: string; rooms: Array<Listed>; unreachable: Array<string> }
    }
    /** Every node's rooms route answers, and names no node unreachable: every media server is up. */
    const allMediaUp = () =>
      waitFor("every node's media server up, as every gateway sees it", async () => {
        for (const node of n) {
          const listed = await send(node, "GET", "/v1/webrtc/rooms", { token: owner, ms: 10_000 }).catch(() => undefined)
          if (listed?.status !== 200 || listed.body.unreachable.length !== 0) return false
        }
        return true
      }, 60_000, 250)
    /** The room's node as every gateway places it while `nodes` are up. */
    const hostOf = (room: string, nodes: ReadonlyArray<ClusterNode>) => n.findIndex((node) => node.id === placeRoom(NAMESPACE, room, nodes.map((x) => x.id)))

    /** Joins through `node`, retrying what the gateway says to retry (503, 429) for up to 20 s. */
    const join = async (node: ClusterNode, token: string, room: string): Promise<MediaPeer> => {
      const end = Date.now() + 20_000
      for (;;) {
        try {
          const peer = await joinRoom(node.url, token, room)
          peers.push(peer)
          return peer
        } catch (error) {
          if (!(error instanceof JoinRefused) || (error.status !== 503 && error.status !== 429) || Date.now() > end) throw error
          await sleep(500)
        }
      }
    }
    /** A subscriber to a topic on `node`'s pub/sub socket: the frames it hears. */
    const subscribe = async (node: ClusterNode, topic: string) => {
      const frames: Array<Record<string, unknown>> = []
      const ws = new WebSocket(`${node.url.replace(/^http/, "ws")}/v1/pubsub/ws?topic=${encodeURIComponent(topic)}`, { headers: { authorization: `Bearer ${owner}` } })
      sockets.push(ws)
      ws.on("message", (raw) => frames.push(JSON.parse(raw.toString())))
      await new Promise((resolve, reject) => {
        ws.once("open", resolve)
        ws.once("error", reject)
      })
      await until(() => frames.some((f) => f["type"] === "subscribed"), 5_000, "the subscription")
      return { events: () => frames.filter((f) => f["type"] === "event") as Array<{ event: string; body: { user: string; node: string; room: string } }> }
    }
    /** Both connected through the media server, and `from`'s RTP and data reaching `to`. */
    const mediaFlows = async (from: MediaPeer, to: MediaPeer, what: string) => {
      await until(() => connected(from, to), 20_000, `both peers connected (${what})`)
      const before = (await to.stats()).rtp
      await until(async () => {
        await from.sendRtp(20, 5)
        return (await to.stats()).rtp >= before + 20
      }, 20_000, `RTP arriving (${what})`)
      const text = `data: ${what}`
      await until(async () => {
        await from.sendData(text).catch(() => {})
        return (await to.stats()).data.includes(text)
      }, 10_000, `data arriving (${what})`)
    }

    beforeAll(async () => {
      if (!hasTurnServer()) throw new Error("coturn is missing: bash scripts/engines.sh coturn")
      execFileSync("ip", ["addr", "add", `${TURN_ADDRESS}/32`, "dev", "lo"])
      turn = await startTurnServer(SECRET, TURN_ADDRESS)
      cluster = await startCluster({
        env: {
          PORTICO_OPERATORS: operator.address.toLowerCase(),
          PORTICO_SFU_BINARY: sfuBinary,
          PORTICO_TURN_URIS: turn.uri,
          PORTICO_TURN_SECRET: SECRET
        }
      })
      n = cluster.nodes
      const challenged = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
      const verified = await send(n[0]!, "POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
      expect(verified.status, verified.text).toBe(200)
      const created = await send(n[0]!, "POST", "/v1/namespaces", { token: verified.body.access_token, json: { name: NAMESPACE } })
      expect(created.status, created.text).toBe(201)
      owner = created.body.api_key
      const enabled = await send(n[0]!, "POST", "/v1/namespace/webrtc/enable", { token: owner, json: {} })
      expect(enabled.status, enabled.text).toBe(200)
      for (const name of ["alice", "bob"] as const) {
        const wallet = wallets[name]
        const added = await send(n[0]!, "POST", "/v1/namespace/members", { token: owner, json: { wallet: wallet.address, role: "runtime" } })
        expect(added.status, `${name}: ${added.text}`).toBe(200)
        const challenge = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace: NAMESPACE } })
        const session = await send(n[0]!, "POST", "/v1/auth/verify", { json: { message: challenge.body.message, signature: await wallet.signMessage(challenge.body.message) } })
        expect(session.status, session.text).toBe(200)
        tokens[name] = session.body.access_token
      }
      await allMediaUp()
    }, 300_000)
    afterAll(async () => {
      for (const socket of sockets) socket.close()
      for (const peer of peers) await peer.close().catch(() => {})
      await cluster?.stop()
      await turn?.stop()
    }, 120_000)
    // a case that failed half-way leaves no node down for the next one
    beforeEach(async () => {
      await Promise.all(n.map((node) => node.restart()))
      await allMediaUp()
    }, 180_000)

    it("meets two users joining through two gateways on the room's one node, and tells a third gateway's subscriber", () =>
      withLogs(async () => {
        const room = "standup"
        const h = hostOf(room, n)
        const [other, third] = [n[(h + 1) % 3]!, n[(h + 2) % 3]!]
        const topic = await subscribe(third, `_portico/webrtc/${room}`)
        // alice through the room's own node, bob through another, which relays him there
        const a = await join(n[h]!, tokens.alice, room)
        expect(a.welcome["participants"]).toEqual([])
        const b = await join(other, tokens.bob, room)
        expect(b.welcome["participants"]).toEqual([expect.objectContaining({ user: user(wallets.alice) })])
        await a.next("participant-joined")
        await mediaFlows(a, b, "alice to bob")
        await mediaFlows(b, a, "bob to alice")

        const listed = await roomsOn(third)
        expect(listed.namespace).toBe(NAMESPACE)
        expect(listed.unreachable).toEqual([])
        expect(listed.rooms.map((r) => [r.room, r.node])).toEqual([[room, n[h]!.id]])
        expect(listed.rooms[0]!.participants.map((p) => p.user).sort()).toEqual([user(wallets.alice), user(wallets.bob)].sort())

        // the room's node published the joins; the subscriber on the third gateway heard them through Redis
        await until(() => topic.events().length >= 2, 10_000, "both joins on the room's topic")
        expect(topic.events().map((e) => [e.event, e.body.user, e.body.node, e.body.room])).toEqual([
          ["webrtc.join", user(wallets.alice), n[h]!.id, room],
          ["webrtc.join", user(wallets.bob), n[h]!.id, room]
        ])
        await b.close()
        await until(() => topic.events().length >= 3, 10_000, "bob's leave on the room's topic")
        expect(topic.events()[2]).toMatchObject({ event: "webrtc.leave", body: { user: user(wallets.bob), node: n[h]!.id, reason: "left" } })
        await a.close()
      }))

    it("moves a room whose node (the registry's leader) is lost: both sockets close, the peers rejoin through survivors and meet on a surviving node", () =>
      withLogs(async () => {
        // a room on the registry's leader, so that its node's loss is also an election (the
        // gateways' credential store refuses joins with a retryable 503 meanwhile)
        const leader = await cluster.leaderNode()
        let room = "failover"
        for (let i = 0; hostOf(room, n) !== leader; i++) room = `failover-${i}`
        const h = hostOf(room, n)
        const lost = n[h]!
        const [other, third] = [n[(h + 1) % 3]!, n[(h + 2) % 3]!]
        const a = await join(lost, tokens.alice, room)
        const b = await join(other, tokens.bob, room)
        await mediaFlows(a, b, "before the loss")
        expect((await roomsOn(third)).rooms.map((r) => r.node)).toEqual([lost.id])

        await lost.kill()
        // alice's socket was the lost gateway's own: dropped (1006); bob's was relayed by a
        // surviving gateway, which closes it when the lost node's end drops (1006 is not sendable: 1011)
        const closedWith = await Promise.race([Promise.all([a.closed, b.closed]), sleep(10_000).then(() => "timed out")])
        expect(closedWith).toEqual([1006, 1011])
        await a.close()
        await b.close()

        // both rejoin through survivors, retrying their 503s: the registry's election, and the lost
        // node's health, which a gateway keeps up to 2 s, so a join may first be placed there
        const survivors = [other, third]
        const moved = n[hostOf(room, survivors)]!
        const a2 = await join(third, tokens.alice, room)
        const b2 = await join(other, tokens.bob, room)
        expect(b2.welcome["participants"]).toEqual([expect.objectContaining({ user: user(wallets.alice) })])
        await mediaFlows(a2, b2, "after the move, alice to bob")
        await mediaFlows(b2, a2, "after the move, bob to alice")

        // the killed node is still a member (inactive, not retired): the survivors ask it and name it
        for (const node of survivors) {
          const listed = await roomsOn(node)
          expect(listed.unreachable, node.id).toEqual([lost.id])
          expect(listed.rooms.map((r) => [r.room, r.node]), node.id).toEqual([[room, moved.id]])
          expect(listed.rooms[0]!.participants.map((p) => p.user).sort()).toEqual([user(wallets.alice), user(wallets.bob)].sort())
        }
        await a2.close()
        await b2.close()

        await lost.restart()
        await allMediaUp()
        expect((await roomsOn(lost)).unreachable).toEqual([])
      }))
  })
}
