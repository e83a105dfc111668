/**
 * `portico serve`: the gateway in this process until SIGINT/SIGTERM.
 */
import { Effect } from "effect"
import * as path from "node:path"
import { localNodeId, PorticoConfig } from "../layers/config/PorticoConfig.js"
import { type Parsed, stringOption, usageError, wholeNumberOption } from "./Cli.js"
import { runCommand } from "./failure.js"

/** `--port`: 0 (any free port, as the tests start gateways) to 65535, refused before anything starts. */
const portOption = (parsed: Parsed): number | undefined => {
  const port = wholeNumberOption(parsed, "port")
  if (port !== undefined && port > 65535) throw usageError("--port must be a port, 0-65535 (0: any free port)")
  return port
}

export const serve = (parsed: Parsed): Promise<void> => {
  const port = portOption(parsed)
  const host = stringOption(parsed, "host")
  const dataDir = stringOption(parsed, "data-dir")
  const invite = stringOption(parsed, "join")
  return runCommand(
    Effect.gen(function* () {
      if (invite !== undefined) {
        // the join writes what the configuration below reads: the cluster's root secret and registry
        const { joinCluster } = yield* Effect.promise(() => import("./join.js"))
        const dir = path.resolve(dataDir ?? process.env["PORTICO_DATA_DIR"] ?? "./data")
        const outcome = yield* joinCluster(invite, dir, process.env["PORTICO_NODE_ID"] ?? localNodeId(dir))
        process.stdout.write(
          JSON.stringify({ level: "info", msg: outcome.kind === "joined" ? "joined the cluster" : "joined before: the invite is not used", ...(outcome.kind === "joined" ? { by: outcome.by } : {}) }) + "\n"
        )
      }
      const settings = yield* PorticoConfig.pipe(
        Effect.provide(
          PorticoConfig.fromEnv({
            ...(port === undefined ? {} : { port }),
            ...(host === undefined ? {} : { host }),
            ...(dataDir === undefined ? {} : { dataDir })
          })
        )
      )
      // Loaded here so registry commands do not pay for the HTTP stack and the docs bundle.
      const { serveGateway } = yield* Effect.promise(() => import("../api/Gateway.js"))
      const { logLine } = yield* Effect.promise(() => import("../api/AccessLog.js"))
      const listening = yield* serveGateway(settings)
      logLine({
        level: "info",
        msg: "listening",
        port: listening.port,
        host: listening.host,
        registry: settings.registry.engine,
        url: `http://${listening.host}:${listening.port}`
      })
      // Serve until SIGINT/SIGTERM; closing the scope then drains in-flight requests.
      yield* Effect.async<void>((resume) => {
        const stop = () => resume(Effect.void)
        process.once("SIGINT", stop)
        process.once("SIGTERM", stop)
      })
      logLine({ level: "info", msg: "shutting down" })
    }).pipe(Effect.scoped)
  )
}
