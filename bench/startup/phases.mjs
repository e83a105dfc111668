/**
 * bench/startup's breakdown by phase: the steps `portico serve` takes, each timed on its own, in
 * one plain node process on the compiled dist/ (plain JavaScript so no loader such as tsx sits in
 * the module loading it measures). The data dir must be one no gateway runs on.
 *
 *   node bench/startup/phases.mjs <dist dir> <data dir> <port> [host of a deployed app]...
 *
 * Prints one JSON object, each phase's [wall, CPU] milliseconds (CPU: the whole process's user and
 * system time, all threads; on a busy machine the wall time stretches and the CPU time much less):
 * - boot: node's own start, up to this file's first line (performance.now() counts from the
 *   process's start);
 * - modules: importing what `portico serve` imports (the config, the gateway and every module it
 *   pulls in: Effect, the HTTP stack, the services);
 * - registry: opening the registry and checking its migrations, alone;
 * - services: building every service layer (the registry again, the sealer, the SQLite worker
 *   processes, the content engine, ...), then closing it;
 * - gateway: `serveGateway` to listening, the same services again plus the HTTP app, the fast lane,
 *   the host routing and the listen (a second build: the JIT is warmer than at a real start);
 * - health: the first `/health` answer after listening;
 * - resume: from listening until every app host given answers 200 (null when one did not in 30 s).
 */
import * as http from "node:http"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

const boot = [performance.now(), (process.cpuUsage().user + process.cpuUsage().system) / 1000]
const [dist, dataDir, port, ...hosts] = process.argv.slice(2)
const at = (file) => pathToFileURL(path.join(dist, file)).href
const cpuMs = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}
/** Runs `run`, answers [[wall ms, CPU ms], its value]. */
const timed = async (run) => {
  const started = performance.now()
  const cpu = cpuMs()
  const value = await run()
  return [[performance.now() - started, cpuMs() - cpu], value]
}

const [modules, loaded] = await timed(async () => {
  const { Effect, Layer, Scope, Exit } = await import("effect")
  const { PorticoConfig } = await import(at("layers/config/PorticoConfig.js"))
  const { serveGateway } = await import(at("api/Gateway.js"))
  await import(at("api/AccessLog.js"))
  const { registryLayer } = await import(at("layers/registry/registryLayer.js"))
  const { servicesLayer } = await import(at("layers/Services.js"))
  return { Effect, Layer, Scope, Exit, PorticoConfig, serveGateway, registryLayer, servicesLayer }
})
const { Effect, Layer, Scope, Exit, PorticoConfig, serveGateway, registryLayer, servicesLayer } = loaded
const settings = await Effect.runPromise(PorticoConfig.pipe(Effect.provide(PorticoConfig.fromEnv({ dataDir, port: Number(port) }))))

/** Builds `layer` in a scope of its own, answers the milliseconds, then closes the scope. */
const buildTime = async (layer) => {
  const scope = Effect.runSync(Scope.make())
  const [ms] = await timed(() => Effect.runPromise(Layer.buildWithScope(layer, scope)))
  await Effect.runPromise(Scope.close(scope, Exit.void))
  return ms
}
const registry = await buildTime(registryLayer(settings))
const services = await buildTime(servicesLayer(settings))

const get = (host) =>
  new Promise((resolve) => {
    const request = http.request({ host: "127.0.0.1", port: Number(port), path: host === undefined ? "/health" : "/", headers: host === undefined ? {} : { host } }, (response) => {
      response.resume()
      resolve(response.statusCode ?? 0)
    })
    request.on("error", () => resolve(0))
    request.end()
  })
/** Polls until `host` (or /health) answers 200; gives up after 30 s, and `resume` is then null. */
let gaveUp = false
const until = async (host) => {
  const deadline = performance.now() + 30_000
  while ((await get(host)) !== 200) {
    if (performance.now() > deadline) {
      gaveUp = true
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const scope = Effect.runSync(Scope.make())
const [gateway] = await timed(() => Effect.runPromise(Scope.extend(serveGateway(settings), scope)))
const listened = performance.now()
const listenedCpu = cpuMs()
const [health] = await timed(() => until(undefined))
await Promise.all(hosts.map(until))
const resume = gaveUp ? null : [performance.now() - listened, cpuMs() - listenedCpu]
await Effect.runPromise(Scope.close(scope, Exit.void))
process.stdout.write(JSON.stringify({ boot, modules, registry, services, gateway, health, resume }) + "\n")
process.exit(0)
