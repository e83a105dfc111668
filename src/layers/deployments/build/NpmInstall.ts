/**
 * The server-side install of a Node.js app's dependencies (spec §4.8; docs/deployments.md,
 * "Preparing an app"). npm runs in the deployment's sandbox, as the deployment's uid, in a fresh
 * build directory that holds copies of package.json and the lockfile only (never the tenant's
 * .npmrc or code), with lifecycle scripts off, configuration files of ours (empty) and no
 * environment of the gateway's, able to connect only to the registry proxy (RegistryProxy.ts),
 * and killed at its time limit. Its node_modules is moved into the app, root-owned with tidy
 * modes, only when npm succeeded: a failed install leaves nothing in the app.
 */
import { Effect } from "effect"
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, chmodSync, chownSync, lchownSync } from "node:fs"
import * as path from "node:path"
import type { AppBuildCode } from "../../../domain/Errors.js"
import { PUBLIC_REGISTRY } from "../../../domain/NodeInstall.js"
import { refuse, type Refused } from "../../Refused.js"
import { launch, type SandboxHandle, type SandboxOptions, sandboxPaths } from "../sandbox/Sandbox.js"
import type { Limits } from "../sandbox/Cgroups.js"
import { cidr } from "../sandbox/SocketPolicy.js"
import { startRegistryProxy } from "./RegistryProxy.js"

/** The lockfiles npm reads, in npm's order of preference; copied into the build when present. */
export const LOCKFILES = ["npm-shrinkwrap.json", "package-lock.json"] as const

/** What an install is given: where the app is, who runs it, and how long it may take. */
export interface InstallSpec {
  /** The extracted app (`versionDir/app`); receives `node_modules` on success. */
  readonly appDir: string
  /** Holds the temporary build directory (same filesystem as appDir, so the move is a rename). */
  readonly workDir: string
  /** Names the install's cgroups apart from the running app's (`<deployment id>-install`). */
  readonly sandboxId: string
  readonly uid: number
  /** The one port the sandbox's rules need; npm binds none. */
  readonly port: number
  readonly timeoutMs: number
  readonly limits: Limits
  readonly node: string
  readonly npmCli: string
  readonly sandbox: SandboxOptions
  /** Host name of the public registry the proxy admits (registry.npmjs.org). */
  readonly registryHost?: string
}

type InstallRefused = Refused<AppBuildCode>

/** Every IPv4 and IPv6 destination. */
const everywhere = ["0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1"].map(cidr)

/** The host system's CA bundle: npm (Node) trusts only its own CA list unless told. */
const systemCaFile = "/etc/ssl/certs/ca-certificates.crt"

/** Lines npm prints around the cause: its error code fields, the log's path, usage text, advice. */
const npmNoise = [/^code\b/, /^errno\b/, /^syscall\b/, /^A complete log of this run/, /^Note that you can also install/, /^tarball, folder, http url/, /^\d{3}\s*$/, /^$/]

/**
 * The line naming why npm failed: the first `npm error` line that is not one of its code fields
 * or notes (npm prints the cause first, then usage text and advice, so the last line says little).
 */
export const npmErrorLine = (log: string): string | undefined => {
  for (const raw of log.split(/\r?\n/)) {
    const match = /^npm (?:error|ERR!)\s?(.*)$/.exec(raw)
    if (match === null) continue
    const text = match[1]!.replace(/^\d{3}\s+/, "").trim()
    if (npmNoise.some((noise) => noise.test(text))) continue
    return text.length > 300 ? `${text.slice(0, 297)}...` : text
  }
  return undefined
}

/** Root-owned, 0755 directories and executables, 0644 files; links kept (inside node_modules), anything else removed. */
const tidy = (dir: string): void => {
  for (const name of readdirSync(dir)) {
    const entry = path.join(dir, name)
    const stat = lstatSync(entry)
    if (stat.isSymbolicLink()) lchownSync(entry, 0, 0)
    else if (stat.isDirectory()) {
      tidy(entry)
      chownSync(entry, 0, 0)
      chmodSync(entry, 0o755)
    } else if (stat.isFile()) {
      chownSync(entry, 0, 0)
      chmodSync(entry, (stat.mode & 0o111) !== 0 ? 0o755 : 0o644)
    } else rmSync(entry, { force: true })
  }
}

const failed = (reason: string, hint?: string): InstallRefused => refuse("INSTALL_FAILED", reason, hint)

const waitExit = (handle: SandboxHandle, timeoutMs: number) =>
  Effect.promise(() => handle.exited).pipe(
    Effect.timeoutTo({ duration: timeoutMs, onSuccess: (exit) => ({ exit }), onTimeout: () => ({ exit: undefined }) })
  )

/**
 * Runs `npm ci` (a lockfile was uploaded) or `npm install` (none) for the app's package.json and
 * moves the result into `appDir/node_modules`. The dependency refusals (checkInstallInputs) are
 * the caller's, before this runs.
 */
export const runNpmInstall = (spec: InstallSpec): Effect.Effect<void, InstallRefused> =>
  Effect.acquireUseRelease(
    Effect.try({
      try: () => {
        const build = mkdtempSync(path.join(spec.workDir, ".install-"))
        chmodSync(build, 0o700)
        const dirs = { project: path.join(build, "project"), home: path.join(build, "home"), config: path.join(build, "config") }
        for (const dir of Object.values(dirs)) mkdirSync(dir, { mode: 0o755 })
        // Copies of package.json and the lockfile only; nothing else of the upload is in the build.
        const lockfiles: Array<string> = []
        for (const file of ["package.json", ...LOCKFILES]) {
          const source = path.join(spec.appDir, file)
          if (!existsSync(source)) continue
          writeFileSync(path.join(dirs.project, file), readFileSync(source), { mode: 0o644 })
          if (file !== "package.json") lockfiles.push(file)
        }
        // npm's user and global configuration: empty files of ours, bound read-only.
        for (const file of ["npmrc-user", "npmrc-global"]) writeFileSync(path.join(dirs.config, file), "", { mode: 0o644 })
        return { build, dirs, hasLockfile: lockfiles.length > 0, log: path.join(build, "install.log") }
      },
      catch: (error) => refuse("UNAVAILABLE", "the install's build directory could not be made", String(error))
    }),
    ({ dirs, hasLockfile, log }) =>
      Effect.gen(function* () {
        const proxy = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () => startRegistryProxy(spec.registryHost ?? new URL(PUBLIC_REGISTRY).hostname),
            catch: (error) => refuse("UNAVAILABLE", "the install's registry proxy did not start", String(error))
          }),
          (proxy) => Effect.promise(() => proxy.close())
        )
        const proxyUrl = `http://127.0.0.1:${proxy.port}`
        // In the sandbox: the config directory is /app (read-only), the project the state
        // directory (npm writes node_modules there), the home and npm cache the cache directory.
        const env: Record<string, string> = {
          PATH: "/usr/local/bin:/usr/bin:/bin",
          HOME: sandboxPaths.cache,
          npm_config_userconfig: `${sandboxPaths.app}/npmrc-user`,
          npm_config_globalconfig: `${sandboxPaths.app}/npmrc-global`,
          npm_config_cache: `${sandboxPaths.cache}/npm`,
          npm_config_https_proxy: proxyUrl,
          npm_config_proxy: proxyUrl,
          npm_config_update_notifier: "false",
          ...(existsSync(systemCaFile) ? { npm_config_cafile: systemCaFile } : {})
        }
        const argv = [
          spec.node, spec.npmCli, hasLockfile ? "ci" : "install",
          `--prefix=${sandboxPaths.state}`, "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev",
          `--registry=${PUBLIC_REGISTRY}`, "--no-update-notifier"
        ]
        // released with the scope whatever happens (time limit, interruption, failure): npm and
        // every process it started end, and the cgroups go; after a normal exit this is a no-op
        const sandboxed = launch(
          {
            deploymentId: spec.sandboxId,
            uid: spec.uid,
            appDir: dirs.config,
            stateDir: dirs.project,
            cacheDir: dirs.home,
            port: spec.port,
            env,
            argv,
            limits: spec.limits,
            logFile: log,
            // every address refused but the proxy: the registry is the one place reached
            // (as halves: the socket programs' compiler takes prefixes of 1 and more)
            refuse: everywhere,
            allow: [{ ...cidr("127.0.0.1/32"), port: proxy.port }]
          },
          spec.sandbox
        ).pipe(Effect.mapError((error) => refuse("UNAVAILABLE", "the install's sandbox could not start", error.detail)))
        const handle = yield* Effect.acquireRelease(sandboxed, (handle) => Effect.promise(() => handle.stop(1000)))
        const { exit } = yield* waitExit(handle, spec.timeoutMs)
        if (exit === undefined) {
          return yield* Effect.fail(
            failed(`the install did not finish within ${Math.round(spec.timeoutMs / 1000)} s`, "upload the app with its node_modules, or trim its dependencies")
          )
        }
        if (exit.code !== 0) {
          const text = existsSync(log) ? readFileSync(log, "utf8") : ""
          const line = npmErrorLine(text)
          return yield* Effect.fail(
            failed(`npm ${hasLockfile ? "ci" : "install"} failed${exit.signal ? ` (${exit.signal})` : ` (exit ${exit.code})`}`, line ?? "npm gave no error line")
          )
        }
        const modules = path.join(dirs.project, "node_modules")
        if (!existsSync(modules)) return
        yield* Effect.try({
          try: () => {
            tidy(modules)
            chownSync(modules, 0, 0)
            chmodSync(modules, 0o755)
            renameSync(modules, path.join(spec.appDir, "node_modules"))
          },
          catch: (error) => refuse("UNAVAILABLE", "the installed node_modules could not be moved into the app", String(error))
        })
      }).pipe(Effect.scoped),
    ({ build }) => Effect.sync(() => rmSync(build, { recursive: true, force: true }))
  )
