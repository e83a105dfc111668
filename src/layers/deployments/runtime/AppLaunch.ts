/**
 * One launch of a deployed app: its start command from `<version dir>/start.json` (written by the
 * prepare step), its private directories under the instance directory, a fresh workload token in
 * its token file, the environment (the tenant's plus the platform's names), and the sandboxed
 * process itself (Sandbox.launch with the record's limits, output to the app's log).
 *
 *     <instance dir>/versions/<n>/app         the app, read-only at /app
 *     <instance dir>/versions/<n>/start.json  {"argv": [...], "entry_point": "..."}
 *     <instance dir>/state, cache             private to the app's uid (0700)
 *     <instance dir>/run/token                the workload token (0600, the app's uid), read-only dir
 *     <instance dir>/logs/app.log             stdout and stderr (AppLogs.ts)
 */
import { Data, Effect, Either, Schema } from "effect"
import * as dns from "node:dns/promises"
import * as fs from "node:fs"
import { createServer, isIP } from "node:net"
import * as path from "node:path"
import { processEnvironment } from "../../../domain/DeploymentEnv.js"
import { writeTokenFile, type WorkloadTokensService } from "../../workload/WorkloadTokens.js"
import { type DeploymentRecord, sandboxUid } from "../DeploymentRecord.js"
import { launch, type SandboxHandle, type SandboxOptions, sandboxPaths } from "../sandbox/Sandbox.js"
import type { Allowance } from "../sandbox/SocketPolicy.js"
import { logFileOf, noteInLog } from "./AppLogs.js"

/**
 * Why a launch did not happen: `reason` is told to the developer (the 502's message, the app's
 * log) and names no host path; `detail`, when there is more, goes to the gateway's log only.
 */
export class LaunchFailed extends Data.TaggedError("LaunchFailed")<{ readonly reason: string; readonly detail?: string }> {}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error))

export interface StartCommand {
  readonly argv: ReadonlyArray<string>
  readonly entryPoint: string
}

const StartJson = Schema.parseJson(
  Schema.Struct({ argv: Schema.NonEmptyArray(Schema.String.pipe(Schema.minLength(1))), entry_point: Schema.String })
)

export const TOKEN_FILE_NAME = "token"

export const instancePaths = (instanceDir: string) => ({
  state: path.join(instanceDir, "state"),
  cache: path.join(instanceDir, "cache"),
  run: path.join(instanceDir, "run"),
  logs: path.join(instanceDir, "logs"),
  tokenFile: path.join(instanceDir, "run", TOKEN_FILE_NAME),
  logFile: logFileOf(instanceDir)
})

/** The version's start command; a missing or unreadable start.json is a launch failure. */
export const readStartCommand = (versionDir: string): Effect.Effect<StartCommand, LaunchFailed> =>
  Effect.try({
    try: () => fs.readFileSync(path.join(versionDir, "start.json"), "utf8"),
    catch: () => new LaunchFailed({ reason: "the version has no start command (start.json is missing)" })
  }).pipe(
    Effect.flatMap((text) => Schema.decodeUnknown(StartJson)(text)),
    Effect.map((parsed) => ({ argv: parsed.argv, entryPoint: parsed.entry_point })),
    Effect.catchTag("ParseError", () => Effect.fail(new LaunchFailed({ reason: "the version's start command (start.json) does not read" })))
  )

const makeDirs = (instanceDir: string): Effect.Effect<ReturnType<typeof instancePaths>, LaunchFailed> =>
  Effect.try({
    try: () => {
      const paths = instancePaths(instanceDir)
      // state and cache are chowned to the app and set 0700 by the sandbox at each launch
      for (const dir of [paths.state, paths.cache]) fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      // root's: the app reads its token through the read-only bind, never writes here
      fs.mkdirSync(paths.run, { recursive: true, mode: 0o755 })
      fs.chmodSync(paths.run, 0o755)
      fs.mkdirSync(paths.logs, { recursive: true, mode: 0o700 })
      return paths
    },
    catch: (error) => new LaunchFailed({ reason: "the app's directories could not be prepared", detail: errorText(error) })
  })

/**
 * Where the app may reach the gateway although the address is in a refused range (a single-node
 * box whose public address is loopback or private): every address the URL's host names, on its port.
 */
export const gatewayAllowances = (gatewayUrl: string | undefined): Effect.Effect<ReadonlyArray<Allowance>> =>
  Effect.promise(async () => {
    if (gatewayUrl === undefined) return []
    try {
      const url = new URL(gatewayUrl)
      const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80
      const host = url.hostname.replace(/^\[|\]$/g, "")
      const addresses = isIP(host) !== 0 ? [host] : (await dns.lookup(host, { all: true })).map((a) => a.address)
      return addresses.map((address) => ({ address, prefix: isIP(address) === 4 ? 32 : 128, port }))
    } catch {
      return []
    }
  })

export interface LaunchInput {
  readonly record: DeploymentRecord
  readonly instanceDir: string
  /** The tenant's environment (opened from the store). */
  readonly env: Readonly<Record<string, string>>
  readonly gatewayUrl: string | undefined
  readonly tokens: WorkloadTokensService
  readonly sandbox: SandboxOptions
}

/**
 * Whether nothing on this host listens on `port`: the gateway binds it for a moment on every
 * IPv4 address. Another process holding an app's port (a program outside Portico, or a second gateway
 * on the same machine with an overlapping PORTICO_APP_PORTS) would otherwise answer the app's
 * health checks and its traffic in its place.
 */
const portFree = (port: number): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const probe = createServer()
    // 0.0.0.0 collides with a listener on any IPv4 address and with a dual-stack `::` one; only
    // EADDRINUSE says taken (a host without some address family must not block every launch)
    probe.once("error", (error: NodeJS.ErrnoException) => resume(Effect.succeed(error.code !== "EADDRINUSE")))
    probe.listen({ port, host: "0.0.0.0", exclusive: true }, () => probe.close(() => resume(Effect.succeed(true))))
  })

/** Everything up to a running process; the caller stops the handle. */
export const launchApp = (input: LaunchInput): Effect.Effect<SandboxHandle, LaunchFailed> =>
  Effect.gen(function* () {
    const { record } = input
    const uid = sandboxUid(record)
    if (uid === undefined || record.port === undefined) return yield* new LaunchFailed({ reason: "a static site runs no process" })
    const command = yield* readStartCommand(path.join(input.instanceDir, record.artifact))
    if (!(yield* portFree(record.port))) {
      return yield* new LaunchFailed({
        reason: `port ${record.port} is in use by another process on this host`,
        detail: "stop whatever listens on it, or give the gateway a PORTICO_APP_PORTS range no other program uses"
      })
    }
    const paths = yield* makeDirs(input.instanceDir)
    const appDir = path.join(input.instanceDir, record.artifact, "app")
    // every launch mints a fresh token: a restarted app never starts with a stale one
    const token = yield* input.tokens.mint(record)
    yield* Effect.mapError(
      writeTokenFile(paths.tokenFile, token.token, { uid, gid: uid }),
      (error) => new LaunchFailed({ reason: "the workload token file could not be written", detail: error.message })
    )
    const platform = {
      PORT: String(record.port),
      ENTRY_POINT: command.entryPoint,
      PORTICO_ENTRYPOINT: command.entryPoint,
      PORTICO_NAMESPACE: record.namespace,
      PORTICO_STATE_DIR: sandboxPaths.state,
      PORTICO_CACHE_DIR: sandboxPaths.cache,
      PORTICO_TOKEN_FILE: `${sandboxPaths.run}/${TOKEN_FILE_NAME}`,
      ...(input.gatewayUrl === undefined ? {} : { PORTICO_GATEWAY_URL: input.gatewayUrl })
    }
    const env = processEnvironment(input.env, platform)
    if (Either.isLeft(env)) return yield* new LaunchFailed({ reason: env.left.message })
    const allow = yield* gatewayAllowances(input.gatewayUrl)
    yield* noteInLog(paths.logFile, `starting version ${record.version}: ${command.argv.join(" ")}`)
    return yield* Effect.mapError(
      launch(
        {
          deploymentId: record.id,
          uid,
          appDir,
          stateDir: paths.state,
          cacheDir: paths.cache,
          runDir: paths.run,
          port: record.port,
          env: env.right,
          argv: command.argv,
          limits: { memoryBytes: record.limits.memoryBytes, cpus: record.limits.cpuMillis / 1000, pids: record.limits.pids },
          logFile: paths.logFile,
          allow
        },
        input.sandbox
      ),
      (error) => new LaunchFailed({ reason: "the sandbox could not start the app", detail: error.detail })
    )
  })
