/**
 * Targets of the cache benchmark, one per process: `bare` (node:http over an in-process Map doing
 * the same JSON work as the gateway's get/put) and `gateway` (the real gateway, embedded engine,
 * API key with the cache grant). Each prints `HEADER …` lines and READY.
 *
 *   node --import tsx bench/cache/servers.ts bare|gateway <port>
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { serveGateway } from "../../src/api/Gateway.js"
import { testSettings } from "../../src/layers/config/PorticoConfig.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { ApiKeys } from "../../src/layers/keys/ApiKeys.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"

const kind = process.argv[2] ?? "bare"
const port = Number(process.argv[3])
const value = JSON.stringify("v".repeat(98))

const bare = () => {
  const map = new Map<string, string>()
  const token = "Bearer bench"
  http
    .createServer((req, res) => {
      let body = ""
      req.on("data", (c: Buffer) => (body += c.toString()))
      req.on("end", () => {
        if (req.headers.authorization !== token) {
          res.writeHead(401).end()
          return
        }
        const input = JSON.parse(body) as { dmap: string; key: string; value?: unknown }
        const slot = `${input.dmap.length}:${input.dmap}:${input.key}`
        let out: string
        if (req.url === "/v1/cache/put") {
          map.set(slot, JSON.stringify(input.value))
          out = JSON.stringify({ status: "ok", key: input.key, dmap: input.dmap })
        } else {
          out = `{"key":${JSON.stringify(input.key)},"value":${map.get(slot) ?? "null"},"dmap":${JSON.stringify(input.dmap)}}`
        }
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) }).end(out)
      })
    })
    .listen(port, "127.0.0.1", () => {
      map.set("5:bench:hot", value)
      process.stdout.write("HEADER authorization: Bearer bench\nREADY\n")
    })
}

const gateway = () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-cache-bench-"))
  const settings = testSettings(dataDir, { port })
  const program = Effect.gen(function* () {
    const token = yield* Effect.gen(function* () {
      yield* Effect.flatMap(Namespaces, (ns) => ns.create("bench", undefined, "bench"))
      const minted = yield* Effect.flatMap(ApiKeys, (k) =>
        k.prepare({ namespace: "bench", role: "custom", scopes: ["cache"], label: "bench", expiresAt: undefined, createdBy: "bench" })
      )
      yield* Effect.flatMap(RegistryStore, (s) => s.exec(minted.statement))
      return minted.apiKey
    }).pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
    const listening = yield* serveGateway(settings)
    yield* Effect.promise(() =>
      fetch(`http://127.0.0.1:${listening.port}/v1/cache/put`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: `{"dmap":"bench","key":"hot","value":${value}}`
      })
    )
    process.stdout.write(`HEADER authorization: Bearer ${token}\nREADY\n`)
    yield* Effect.async<void>((resume) => {
      process.once("SIGTERM", () => resume(Effect.void))
    })
  }).pipe(Effect.scoped)
  Effect.runPromise(program).then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(String(e) + "\n")
      process.exit(1)
    }
  )
}

if (kind === "bare") bare()
else gateway()
