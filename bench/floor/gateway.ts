/**
 * The real gateway as a floor-benchmark target: a fresh data dir, a namespace and its owner key,
 * then `serveGateway` on the given port. Prints `HEADER authorization: Bearer …` (an API key, or
 * with mode `jwt` a token exchanged from it) and then READY, as run.ts expects.
 *
 *   node --import tsx bench/floor/gateway.ts <port> key|jwt
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { serveGateway } from "../../src/api/Gateway.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { Authenticator } from "../../src/layers/auth/Authenticator.js"
import { testSettings } from "../../src/layers/config/PorticoConfig.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"

const port = Number(process.argv[2])
const mode = process.argv[3] ?? "key"
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-"))
const settings = testSettings(dataDir, { port, logRequests: process.env.FLOOR_GATEWAY_LOG === "1" })

const program = Effect.gen(function* () {
  const token = yield* Effect.gen(function* () {
    const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("bench", undefined, "bench"))
    if (mode !== "jwt") return created.ownerKey.apiKey
    return yield* Effect.flatMap(Authenticator, (a) => a.exchange(created.ownerKey.record))
  }).pipe(Effect.provide(Layer.orDie(servicesLayer(settings))))
  yield* serveGateway(settings)
  process.stdout.write(`HEADER authorization: Bearer ${token}\nREADY\n`)
  yield* Effect.async<void>((resume) => {
    process.once("SIGTERM", () => resume(Effect.void))
  })
}).pipe(Effect.scoped)

Effect.runPromise(program).then(
  () => {
    fs.rmSync(dataDir, { recursive: true, force: true })
    process.exit(0)
  },
  (e: unknown) => {
    process.stderr.write(String(e) + "\n")
    process.exit(1)
  }
)
