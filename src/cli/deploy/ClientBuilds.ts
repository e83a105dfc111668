/**
 * What `portico deploy` builds on the developer's machine before packing (spec §4.8: "the client
 * compiles" Go; Next.js is built with standalone output for --ssr, otherwise exported), and which
 * files then make the archive. The gateway never compiles: it receives what runs.
 *
 *   static, nodejs   the directory as it is (node_modules included when present: the gateway
 *                    uses an uploaded node_modules as it is)
 *   go               `go build` (CGO_ENABLED=0 GOOS=linux GOARCH=amd64) into a temporary
 *                    directory; the archive is that binary as `app` at the root plus the app's
 *                    asset directories (ASSET_DIRS) when present; sources are not sent
 *   nextjs --ssr     `next build` with `output: "standalone"` in next.config; the archive is
 *                    .next/standalone (server.js at its root) plus .next/static and public/
 *                    copied in where server.js looks for them; uploaded as nextjs
 *   nextjs           `next build` with `output: "export"` in next.config; out/ uploaded as static
 *
 * Build tools write their output to stderr here, so stdout stays the command's result.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import type { DeploymentType } from "../../domain/DeploymentRules.js"
import { CliError } from "../Cli.js"
import { nextConfigFile } from "./AppType.js"
import type { PackSource } from "./Pack.js"

/** A Go app's directories shipped beside its binary (templates, files it serves); everything else stays home. */
export const ASSET_DIRS = ["static", "templates", "public", "assets"] as const

export interface PreparedApp {
  /** The type the upload is made as (a Next.js export is `static`). */
  readonly type: DeploymentType
  readonly sources: ReadonlyArray<PackSource>
}

const isDir = (dir: string): boolean => {
  try {
    return fs.statSync(dir).isDirectory()
  } catch {
    return false
  }
}

/** Runs a build tool in `cwd`, its output on our stderr; resolves with its exit code. */
const runBuildTool = (file: string, args: ReadonlyArray<string>, cwd: string, env: Readonly<Record<string, string>>): Promise<number> =>
  new Promise((resolve, reject) => {
    const child = spawn(file, [...args], { cwd, env: { ...process.env, ...env }, stdio: ["ignore", 2, 2] })
    child.once("error", reject)
    child.once("close", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
  })

/** True when the file starts with the ELF magic: what a linux build writes. */
export const isElf = (file: string): boolean => {
  const fd = fs.openSync(file, "r")
  try {
    const magic = Buffer.alloc(4)
    return fs.readSync(fd, magic, 0, 4, 0) === 4 && magic.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * `go build -trimpath -o <out> .` in `dir` for the target in `env`, announced on stderr as
 * `building: go build (<label>)`; a one-line CliError when go cannot run (with `install` as the
 * way out) or the build fails. Apps (below) and functions (src/cli/functions.ts) build through it.
 */
export const goBuild = async (dir: string, out: string, env: Readonly<Record<string, string>>, label: string, install: string): Promise<void> => {
  process.stderr.write(`building: go build (${label})\n`)
  let code: number
  try {
    code = await runBuildTool("go", ["build", "-trimpath", "-o", out, "."], dir, env)
  } catch (error) {
    throw new CliError(`cannot run go (${error instanceof Error ? error.message : String(error)}): ${install}`)
  }
  if (code !== 0) throw new CliError(`go build failed (exit ${code}); its output is above`)
}

export const buildGo = async (dir: string, workDir: string): Promise<PreparedApp> => {
  if (!fs.existsSync(path.join(dir, "go.mod"))) throw new CliError(`a Go app needs go.mod at its root (${dir}); run \`go mod init <module>\` there`)
  const binary = path.join(workDir, "app")
  const target = { CGO_ENABLED: "0", GOOS: "linux", GOARCH: "amd64" }
  await goBuild(dir, binary, target, "CGO_ENABLED=0 GOOS=linux GOARCH=amd64", "install Go (https://go.dev/dl/) or put it on PATH")
  if (!fs.existsSync(binary) || !isElf(binary)) throw new CliError("go build wrote no linux executable (is the root package `main`?)")
  const assets = ASSET_DIRS.filter((name) => isDir(path.join(dir, name))).map((name) => ({ from: path.join(dir, name), as: name }))
  return { type: "go", sources: [{ from: binary, as: "app" }, ...assets] }
}

/** `next`'s command script as the app itself would load it (its own node_modules, or a parent's). */
const nextBin = (dir: string): string => {
  try {
    return createRequire(path.join(dir, "package.json")).resolve("next/dist/bin/next")
  } catch {
    throw new CliError(`next is not installed for ${dir}: run \`npm install\` there first`)
  }
}

/** The config's `output`, as written: a literal `output: "standalone"` or `"export"` somewhere in next.config. */
const configSays = (config: string, output: "standalone" | "export"): boolean =>
  new RegExp(`output\\s*:\\s*["'\`]${output}["'\`]`).test(fs.readFileSync(config, "utf8"))

export const buildNext = async (dir: string, ssr: boolean): Promise<PreparedApp> => {
  const config = nextConfigFile(dir)
  const wanted = ssr ? "standalone" : "export"
  // Next.js has one supported switch for each output, the config's `output`; the client does not
  // rewrite the developer's config, it says what to add before spending a build on it.
  if (config === undefined || !configSays(config, wanted)) {
    const where = config === undefined ? "a next.config.mjs" : path.basename(config)
    throw new CliError(
      ssr
        ? `--ssr deploys Next.js's standalone server: add output: "standalone" to ${where} (next.config's nextConfig object)`
        : `without --ssr a Next.js app is exported and served as a static site: add output: "export" to ${where}, or deploy with --ssr and output: "standalone"`
    )
  }
  const bin = nextBin(dir)
  process.stderr.write(`building: next build (output: ${wanted})\n`)
  // Telemetry off: the build must not send anything off this machine on the developer's behalf.
  const code = await runBuildTool(process.execPath, [bin, "build"], dir, { NEXT_TELEMETRY_DISABLED: "1" })
  if (code !== 0) throw new CliError(`next build failed (exit ${code}); its output is above`)
  if (!ssr) {
    const out = path.join(dir, "out")
    if (!isDir(out)) throw new CliError(`next build wrote no out/ directory in ${dir} (is output: "export" in effect?)`)
    return { type: "static", sources: [{ from: out, as: "" }] }
  }
  const standalone = path.join(dir, ".next", "standalone")
  if (!fs.existsSync(path.join(standalone, "server.js"))) {
    throw new CliError(
      `next build wrote no .next/standalone/server.js in ${dir}: output: "standalone" must be in effect, and server.js at the standalone root ` +
        "(an outputFileTracingRoot above the app nests it; deploy the app from that root instead)"
    )
  }
  const sources: Array<PackSource> = [{ from: standalone, as: "" }]
  const staticDir = path.join(dir, ".next", "static")
  if (isDir(staticDir)) sources.push({ from: staticDir, as: ".next/static" })
  const publicDir = path.join(dir, "public")
  if (isDir(publicDir)) sources.push({ from: publicDir, as: "public" })
  return { type: "nextjs", sources }
}

/** The build for a type (none for static and nodejs) and the sources of its archive. */
export const prepareApp = async (dir: string, type: DeploymentType, options: { readonly ssr: boolean; readonly workDir: string }): Promise<PreparedApp> => {
  switch (type) {
    case "go":
      return buildGo(dir, options.workDir)
    case "nextjs":
      return buildNext(dir, options.ssr)
    case "static":
    case "nodejs":
      return { type, sources: [{ from: dir, as: "" }] }
  }
}
