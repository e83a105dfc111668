/**
 * Preparing an uploaded version of a dynamic app to run (docs/deployments.md, "Preparing an
 * app"): the checks that the app can start at all (a Go app's `app` is an x86-64 ELF executable,
 * a Next.js standalone build has its `server.js`), the Node.js start rule and server-side install
 * (NpmInstall.ts), and the start command written to `<versionDir>/start.json` for the runtime.
 * Runs before the runtime starts anything, so an unusable upload is refused without a start.
 */
import { Context, Effect, Either, Layer } from "effect"
import { closeSync, existsSync, lstatSync, openSync, readSync, realpathSync, renameSync, writeFileSync, chmodSync } from "node:fs"
import * as fs from "node:fs"
import * as path from "node:path"
import type { AppBuildCode } from "../../../domain/Errors.js"
import { checkInstallInputs, startCommand } from "../../../domain/NodeInstall.js"
import { refuse, type Refused } from "../../Refused.js"
import { type DeploymentRecord, sandboxUid } from "../DeploymentRecord.js"
import type { Limits } from "../sandbox/Cgroups.js"
import { defaultSandboxOptions, type SandboxOptions } from "../sandbox/Sandbox.js"
import { LOCKFILES, runNpmInstall } from "./NpmInstall.js"

export type BuildRefused = Refused<AppBuildCode>

export interface PrepareInput {
  readonly type: "nextjs" | "go" | "nodejs"
  /** `<instance dir>/versions/<n>`: holds `app/` (the extracted archive) and receives `start.json`. */
  readonly versionDir: string
  /** Node.js only: the upload's `skip_install=true`. */
  readonly skipInstall: boolean
  readonly record: DeploymentRecord
  /** Runs before the Node.js install starts (the caller records an `installing` event); not when nothing is installed. */
  readonly onInstall?: (timeoutMs: number) => Effect.Effect<void>
}

/** What the runtime runs in the sandbox (working directory /app), and what ENTRY_POINT carries. */
export interface StartSpec {
  readonly argv: ReadonlyArray<string>
  readonly entryPoint: string
}

export interface AppBuildsService {
  readonly prepare: (input: PrepareInput) => Effect.Effect<StartSpec, BuildRefused>
}

export interface AppBuildsOptions {
  /** The install's time limit (spec §4.8: 4 minutes). */
  readonly installTimeoutMs?: number
  /** The install's cgroup limits (its own, not the app's: npm needs more than a small app). */
  readonly installLimits?: Limits
  readonly sandbox?: SandboxOptions
  /** The Node.js binary the sandbox runs (must be under /usr, the only host tree bound there). */
  readonly node?: string
  /** npm's entry script (under /usr as well). */
  readonly npmCli?: string
}

export const INSTALL_TIMEOUT_MS = 4 * 60 * 1000
export const DEFAULT_INSTALL_LIMITS: Limits = { memoryBytes: 1024 * 1024 * 1024, cpus: 1, pids: 512 }

const START_FILE = "start.json"

/** The node and npm the sandbox can run: host files under /usr, which the sandbox binds read-only. */
export const findNodeTools = (): { readonly node: string | undefined; readonly npmCli: string | undefined } => {
  const underUsr = (file: string) => (file.startsWith("/usr/") && existsSync(file) ? file : undefined)
  const node = ["/usr/bin/node", "/usr/local/bin/node", process.execPath].map(underUsr).find((f) => f !== undefined)
  const npmCli = ["/usr/bin/npm", "/usr/local/bin/npm"]
    .flatMap((link) => {
      try {
        return [realpathSync(link)]
      } catch {
        return []
      }
    })
    .concat(["/usr/lib/node_modules/npm/bin/npm-cli.js", "/usr/local/lib/node_modules/npm/bin/npm-cli.js"])
    .map(underUsr)
    .find((f) => f !== undefined)
  return { node, npmCli }
}

const invalid = (reason: string, hint: string): BuildRefused => refuse("VALIDATION_FAILED", reason, hint)

/** 64-bit, little-endian, executable or position-independent, machine x86-64. */
export const isElfX8664 = (header: Uint8Array): boolean =>
  header.length >= 20 &&
  header[0] === 0x7f && header[1] === 0x45 && header[2] === 0x4c && header[3] === 0x46 &&
  header[4] === 2 && header[5] === 1 &&
  (header[16] === 2 || header[16] === 3) && header[17] === 0 &&
  header[18] === 0x3e && header[19] === 0

const readHead = (file: string, bytes: number): Uint8Array => {
  const fd = openSync(file, "r")
  try {
    const buffer = new Uint8Array(bytes)
    const read = readSync(fd, buffer, 0, bytes, 0)
    return buffer.subarray(0, read)
  } finally {
    closeSync(fd)
  }
}

const goHint = "build it with CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o app, or deploy with `portico deploy`, which does"

const prepareGo = (appDir: string): Effect.Effect<StartSpec, BuildRefused> =>
  Effect.suspend(() => {
    const binary = path.join(appDir, "app")
    const stat = existsSync(binary) || isLink(binary) ? lstatSync(binary) : undefined
    if (stat === undefined) return Effect.fail(invalid("a Go upload needs the compiled server as `app` at the archive's root", goHint))
    if (!stat.isFile()) return Effect.fail(invalid("`app` is not a regular file", goHint))
    if (!isElfX8664(readHead(binary, 20))) return Effect.fail(invalid("`app` is not a Linux x86-64 (ELF 64-bit) executable", goHint))
    // the archive keeps execute bits; an upload that lost them still runs (the file is ours, root's)
    chmodSync(binary, 0o755)
    return Effect.succeed({ argv: ["./app"], entryPoint: "app" })
  })

const isLink = (file: string): boolean => {
  try {
    return lstatSync(file).isSymbolicLink()
  } catch {
    return false
  }
}

const prepareNext = (appDir: string, node: string): Effect.Effect<StartSpec, BuildRefused> =>
  Effect.suspend(() => {
    const server = path.join(appDir, "server.js")
    if (!existsSync(server) || !lstatSync(server).isFile())
      return Effect.fail(
        invalid(
          "a Next.js upload needs the standalone output (`server.js` at the archive's root)",
          "set `output: 'standalone'` in next.config and upload .next/standalone with .next/static and public copied in, or deploy with `portico deploy --ssr`, which does"
        )
      )
    return Effect.succeed({ argv: [node, "server.js"], entryPoint: "server.js" })
  })

/**
 * The largest package file read: package.json is a few KB, a lockfile of a large app a few MB.
 * A file past it is refused rather than read whole and parsed on the gateway's event loop (an
 * archive may unpack to 1 GiB).
 */
export const PACKAGE_JSON_MAX_BYTES = 1024 * 1024
export const LOCKFILE_MAX_BYTES = 32 * 1024 * 1024

/** Reads an upload's JSON file; absent is undefined, one past `maxBytes` or unreadable JSON a 400 naming the file. */
const readJson = (appDir: string, file: string, maxBytes: number): Effect.Effect<unknown, BuildRefused> =>
  Effect.gen(function* () {
    const full = path.join(appDir, file)
    // followed if a link: the archive reader refused links leaving the app's tree
    const stat = yield* Effect.promise(() => fs.promises.stat(full).catch(() => undefined))
    if (stat === undefined) return undefined
    if (!stat.isFile()) return yield* Effect.fail(invalid(`${file} is not a regular file`, "upload it as a file"))
    if (stat.size > maxBytes) return yield* Effect.fail(invalid(`${file} is ${stat.size} bytes, over the ${maxBytes / 1024 / 1024} MiB the server reads`, "trim it, or upload the app with its node_modules"))
    const text = yield* Effect.promise(() => fs.promises.readFile(full, "utf8"))
    return yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (error) => invalid(`${file} is not valid JSON`, error instanceof Error ? error.message : String(error))
    })
  })

/** Whether npm would fetch anything: dependencies npm installs without dev ones (`--omit=dev`). */
const hasDependencies = (packageJson: unknown): boolean =>
  typeof packageJson === "object" && packageJson !== null &&
  ["dependencies", "optionalDependencies", "peerDependencies"].some((field) => {
    const deps = (packageJson as Record<string, unknown>)[field]
    return typeof deps === "object" && deps !== null && Object.keys(deps).length > 0
  })

const writeStartFile = (versionDir: string, start: StartSpec): Effect.Effect<void, BuildRefused> =>
  Effect.try({
    try: () => {
      // written whole by rename, so the runtime never reads half a command
      const target = path.join(versionDir, START_FILE)
      const temp = `${target}.${process.pid}.tmp`
      writeFileSync(temp, `${JSON.stringify({ argv: start.argv, entry_point: start.entryPoint })}\n`, { mode: 0o644 })
      renameSync(temp, target)
    },
    catch: (error) => refuse("UNAVAILABLE", "the start command could not be written", String(error))
  })

export const makeAppBuilds = (options: AppBuildsOptions = {}): AppBuildsService => {
  const found = findNodeTools()
  const node = options.node ?? found.node
  const npmCli = options.npmCli ?? found.npmCli
  const sandbox = options.sandbox ?? defaultSandboxOptions()
  const noNode = refuse("UNAVAILABLE", "this gateway has no Node.js under /usr to run the app with", "install nodejs on the node")

  const prepareNode = (input: PrepareInput, appDir: string): Effect.Effect<StartSpec, BuildRefused> =>
    Effect.gen(function* () {
      if (node === undefined || npmCli === undefined) return yield* Effect.fail(noNode)
      const packageJson = yield* readJson(appDir, "package.json", PACKAGE_JSON_MAX_BYTES)
      const start = startCommand(packageJson)
      if (Either.isLeft(start)) return yield* Effect.fail(invalid(start.left.message, "fix package.json's `main` or `scripts.start`"))
      // npm start runs npm itself in the sandbox (prestart, npm_* variables, node_modules/.bin
      // on PATH, as on the developer's machine); it needs no network and writes only under HOME.
      const argv =
        start.right.kind === "npm-start" ? [node, npmCli, "start", "--no-update-notifier", "--logs-max=0"] : [node, start.right.argv[1]]
      // Without an uploaded node_modules (or skip_install) the server installs, so the install's
      // inputs are checked whether or not a runtime dependency is listed: npm resolves the dev
      // dependencies, overrides and workspaces of the whole tree before it omits what it does not
      // install, and would fetch a git or URL spec among them.
      const installs = packageJson !== undefined && !input.skipInstall && !existsSync(path.join(appDir, "node_modules"))
      if (installs) {
        const packageLock = yield* readJson(appDir, LOCKFILES[1], LOCKFILE_MAX_BYTES)
        const shrinkwrap = yield* readJson(appDir, LOCKFILES[0], LOCKFILE_MAX_BYTES)
        const checked = checkInstallInputs({
          packageJson,
          ...(packageLock !== undefined ? { packageLock } : {}),
          ...(shrinkwrap !== undefined ? { shrinkwrap } : {})
        })
        if (Either.isLeft(checked)) {
          const refusal = checked.left
          return yield* Effect.fail(
            refusal._tag === "DependencyRefused"
              ? refuse("DEPENDENCY_REFUSED", refusal.message, `to use '${refusal.dependency}', upload the app with its node_modules installed (the server then installs nothing)`)
              : invalid(refusal.message, "fix the file, or delete the lockfile and let the server resolve")
          )
        }
      }
      if (installs && hasDependencies(packageJson)) {
        const uid = sandboxUid(input.record)
        if (uid === undefined || input.record.port === undefined)
          return yield* Effect.fail(refuse("UNAVAILABLE", "the deployment has no port, so no sandbox identity to install as"))
        const timeoutMs = options.installTimeoutMs ?? INSTALL_TIMEOUT_MS
        if (input.onInstall !== undefined) yield* input.onInstall(timeoutMs)
        yield* runNpmInstall({
          appDir,
          workDir: input.versionDir,
          sandboxId: `${input.record.id}-install`,
          uid,
          port: input.record.port,
          timeoutMs,
          limits: options.installLimits ?? DEFAULT_INSTALL_LIMITS,
          node,
          npmCli,
          sandbox
        })
      }
      return { argv, entryPoint: start.right.entryPoint }
    })

  const prepare = (input: PrepareInput): Effect.Effect<StartSpec, BuildRefused> =>
    Effect.gen(function* () {
      const appDir = path.join(input.versionDir, "app")
      if (!existsSync(appDir)) return yield* Effect.fail(refuse("UNAVAILABLE", `the version's app directory is missing (${appDir})`))
      const start =
        input.type === "go"
          ? yield* prepareGo(appDir)
          : input.type === "nextjs"
            ? node === undefined
              ? yield* Effect.fail(noNode)
              : yield* prepareNext(appDir, node)
            : yield* prepareNode(input, appDir)
      yield* writeStartFile(input.versionDir, start)
      return start
    })

  return { prepare }
}

export class AppBuilds extends Context.Tag("portico/AppBuilds")<AppBuilds, AppBuildsService>() {
  static readonly layer = (options: AppBuildsOptions = {}) => Layer.sync(AppBuilds, () => makeAppBuilds(options))
  static readonly Live = AppBuilds.layer()

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"): it reads nothing; a build runs only when one is asked for. */
  static readonly Test = AppBuilds.Live
}
