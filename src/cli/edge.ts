/**
 * `portico edge config`: prints the Caddy configuration of this node's TLS edge (docs/edge.md,
 * src/edge/CaddyConfig.ts), reading the node's settings as `portico serve` does, and makes the
 * node's edge token if the gateway has not yet.
 */
import { Effect } from "effect"
import * as path from "node:path"
import { caddyConfig, LETS_ENCRYPT } from "../edge/CaddyConfig.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { edgeToken } from "../layers/edge/EdgeAccess.js"
import { type Parsed, stringOption, usageError, wholeNumberOption } from "./Cli.js"
import { runCommand } from "./failure.js"

const port = (parsed: Parsed, name: string, fallback: number): number => {
  const value = wholeNumberOption(parsed, name) ?? fallback
  if (value < 1 || value > 65535) throw usageError(`--${name} must be a port, 1-65535`)
  return value
}

const list = (raw: string | undefined): ReadonlyArray<string> | undefined =>
  raw === undefined ? undefined : raw.split(",").map((s) => s.trim()).filter((s) => s !== "")

export const edgeConfig = (parsed: Parsed): Promise<void> => {
  // the command line's mistakes first, as usage errors (exit 2), before any setting is read
  if (parsed.values["internal-ca"] === true && stringOption(parsed, "acme-ca") !== undefined) {
    throw usageError("--internal-ca and --acme-ca name two certificate authorities: give one")
  }
  const httpsPort = port(parsed, "https-port", 443)
  const httpPort = port(parsed, "http-port", 80)
  return runCommand(
    Effect.gen(function* () {
      const dataDirOption = stringOption(parsed, "data-dir")
      const settings = yield* PorticoConfig.pipe(Effect.provide(PorticoConfig.fromEnv(dataDirOption === undefined ? {} : { dataDir: dataDirOption })))
      const dataDir = path.resolve(settings.dataDir)
      edgeToken(dataDir)
      const gatewayHost = settings.host === "0.0.0.0" || settings.host === "::" ? "127.0.0.1" : settings.host
      const config = caddyConfig({
        gateway: stringOption(parsed, "gateway") ?? `http://${gatewayHost}:${settings.port}`,
        dataDir,
        baseDomain: settings.baseDomain,
        acmeDirectory: stringOption(parsed, "acme-ca") ?? LETS_ENCRYPT,
        internalCa: parsed.values["internal-ca"] === true,
        email: stringOption(parsed, "email"),
        trustedRoots: list(stringOption(parsed, "trusted-roots")),
        wildcard: parsed.values["wildcard"] === true,
        resolvers: list(stringOption(parsed, "resolvers")),
        httpsPort,
        httpPort,
        listenHost: stringOption(parsed, "listen")
      })
      process.stdout.write(`${JSON.stringify(config)}\n`)
    })
  )
}
