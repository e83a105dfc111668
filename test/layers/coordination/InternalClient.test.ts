/**
 * The internal client (src/layers/coordination/InternalClient.ts): paths read from the internal
 * group, a typed call signed for the node it goes to and accepted there once (verified as
 * PeerGate does, over the body as received), a streamed update whose MAC covers its envelope, and
 * a node neither in PORTICO_PEERS nor registered refused before anything is sent.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { mkdtempSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { InternalGroup } from "../../../src/api/groups/InternalGroup.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { Membership } from "../../../src/layers/cluster/Membership.js"
import { Coordination, ENVELOPE_HEADER } from "../../../src/layers/coordination/Coordination.js"
import { internalClient, internalPath } from "../../../src/layers/coordination/InternalClient.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const nodeLayer = (nodeId: string, peers: ReadonlyMap<string, string>) =>
  Coordination.Live.pipe(
    Layer.provide(Membership.Live),
    Layer.provide(
      Layer.mergeAll(
        Sealer.Test,
        SqliteRegistryStore.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "portico-client-")), "registry.db") }),
        PorticoConfig.layer(testSettings(mkdtempSync(path.join(tmpdir(), "portico-client-data-")), { nodeId, peers }))
      )
    )
  )

interface Received {
  readonly path: string
  readonly headers: Record<string, string | undefined>
  readonly body: string
  readonly refused: string | undefined
}

let server: http.Server
let nodeA: ManagedRuntime.ManagedRuntime<Coordination, unknown>
let nodeB: ManagedRuntime.ManagedRuntime<Coordination, unknown>
let nodeBUrl = ""
const received: Array<Received> = []
/** What node-b's gateway verifies: the JSON body, or a streamed update's envelope. */
const signedText = (p: string, headers: Record<string, string | undefined>, body: string) => (p === internalPath("deploymentUpdate") ? (headers[ENVELOPE_HEADER] ?? "") : body)

beforeAll(async () => {
  // node-b: a listener verifying each call as PeerGate does, answering 200 or 403
  nodeB = ManagedRuntime.make(nodeLayer("node-b", new Map()))
  const b = await nodeB.runPromise(Coordination)
  server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : v]))
      const body = Buffer.concat(chunks).toString("utf8")
      const p = req.url ?? "/"
      void Effect.runPromise(b.verify("POST", p, signedText(p, headers, body), headers, req.socket.remoteAddress, false)).then((refused) => {
        received.push({ path: p, headers, body, refused })
        res.writeHead(refused === undefined ? 200 : 403, { "content-type": "application/json" })
        res.end(JSON.stringify(refused === undefined ? { ok: true } : { error: refused, code: "COORDINATION_REFUSED" }))
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  nodeBUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  nodeA = ManagedRuntime.make(nodeLayer("node-a", new Map([["node-b", nodeBUrl]])))
})
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await nodeA.dispose()
  await nodeB.dispose()
})

describe("the internal client", () => {
  it("reads every route's path from the internal group", () => {
    for (const endpoint of Object.values(InternalGroup.endpoints)) expect(internalPath(endpoint.name)).toBe(endpoint.path)
    expect(internalPath("evict")).toBe("/v1/internal/storage/evict")
    expect(internalPath("deploymentUpdate")).toBe("/v1/internal/deployments/update")
  })

  it("sends a typed call to the route's path, signed for the node it goes to, accepted there once", async () => {
    const client = internalClient(await nodeA.runPromise(Coordination))
    const answer = await Effect.runPromise(client.call("node-b", "evict", { cid: "bafkqaaa" }, "5 seconds"))
    expect(answer.status, answer.text).toBe(200)
    const call = received.at(-1)!
    expect(call).toMatchObject({ path: "/v1/internal/storage/evict", body: '{"cid":"bafkqaaa"}', refused: undefined })
    // the same request again (its nonce spent) is a replay
    const again = await fetch(nodeBUrl + call.path, {
      method: "POST",
      headers: Object.fromEntries(Object.entries(call.headers).filter((e): e is [string, string] => e[1] !== undefined && e[0] !== "content-length")),
      body: call.body
    })
    expect(again.status).toBe(403)
    expect(received.at(-1)!.refused).toBe("coordination call replayed")
  })

  it("streams an update's body, its MAC over the envelope header", async () => {
    const client = internalClient(await nodeA.runPromise(Coordination))
    async function* body() {
      yield new TextEncoder().encode("part one, ")
      yield new TextEncoder().encode("part two")
    }
    const envelope = { namespace: "shop", name: "api", type: "nodejs" } as Parameters<typeof client.update>[1]
    const answer = await Effect.runPromise(client.update("node-b", envelope, "multipart/form-data; boundary=x", body(), "5 seconds"))
    expect(answer.status, answer.text).toBe(200)
    expect(received.at(-1)).toMatchObject({ path: "/v1/internal/deployments/update", body: "part one, part two", refused: undefined })
    expect(JSON.parse(received.at(-1)!.headers[ENVELOPE_HEADER]!)).toEqual(envelope)
  })

  it("refuses a node neither in PORTICO_PEERS nor registered without sending anything", async () => {
    const client = internalClient(await nodeA.runPromise(Coordination))
    const before = received.length
    const failed = await Effect.runPromise(Effect.flip(client.call("node-z", "telemetry", {}, "5 seconds")))
    expect(failed).toMatchObject({ _tag: "PeerUnreachable", nodeId: "node-z", detail: expect.stringMatching(/^no such node/) })
    expect(received.length).toBe(before)
  })
})
