#!/usr/bin/env node
// Compiles src/ to dist/ with tsc (tsconfig.build.json) when dist/ is older than the sources, so
// `npm start` and the `portico` command run plain JavaScript instead of compiling TypeScript on
// every start, then bundles dist/ with esbuild into dist/bundle/, which is what bin/portico.mjs
// runs: one file per entry (the command, the SQLite worker) and a chunk per lazily imported part,
// instead of about 1,200 ES modules to resolve, read and compile, which took half of a gateway's
// start (docs/performance.md "Start-up"). dist/'s own modules stay for the typed client and the
// start-up bench's phases. It also bundles the web console (console/, docs/console.md) into
// dist/console/ for the browser. Run by scripts/ensure-deps.mjs (the install step) and by
// bin/portico.mjs when stale.
//
//   node scripts/build.mjs          # build when stale
//   node scripts/build.mjs --force  # build now
//
// Also importable: `ensureBuilt()` returns once dist/ is current.
import { spawnSync } from "node:child_process"
import { createRequire } from "node:module"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { brotliCompressSync, constants as zlibConstants, gzipSync } from "node:zlib"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
export const distDir = path.join(root, "dist")
export const bundleDir = path.join(distDir, "bundle")
const stampFile = path.join(distDir, ".build-stamp")
export const consoleDir = path.join(distDir, "console")
const consoleSources = path.join(root, "console")
const consoleManifest = path.join(consoleDir, "manifest.json")
// Inputs whose change can change the output; directories count too, since removing a file
// changes only its directory's mtime.
const configFiles = ["tsconfig.json", "tsconfig.build.json", "package-lock.json"].map((f) => path.join(root, f))

const newestMtime = (dir) => {
  let newest = statSync(dir).mtimeMs
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    const mtime = entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs
    if (mtime > newest) newest = mtime
  }
  return newest
}

/** Why dist/ needs a build, or undefined when it is current (or there are no sources to build). */
export const staleReason = () => {
  const src = path.join(root, "src")
  if (!existsSync(src)) return undefined
  if (!existsSync(stampFile)) return "dist/ has not been built yet"
  if (!existsSync(path.join(bundleDir, "main.js"))) return "dist/bundle/ has not been built yet"
  const built = statSync(stampFile).mtimeMs
  if (newestMtime(src) > built) return "src/ changed since the last build"
  if (configFiles.some((f) => existsSync(f) && statSync(f).mtimeMs > built)) return "the TypeScript settings or dependencies changed"
  return undefined
}

/**
 * Why dist/console/ needs a build when dist/ itself is current: the console's own sources changed
 * (a change under src/ rebuilds everything, the console with it, since it bundles the typed client).
 */
export const consoleStaleReason = () => {
  if (!existsSync(consoleSources)) return undefined
  if (!existsSync(consoleManifest)) return "dist/console/ has not been built yet"
  if (newestMtime(consoleSources) > statSync(consoleManifest).mtimeMs) return "console/ changed since the last build"
  return undefined
}

/** Runs tsc; throws when it emits nothing (its output is on stderr by then). */
export const build = (reason) => {
  process.stderr.write(`[build] compiling src/ to dist/ with tsc (${reason}; about 20 s the first time, less after)\n`)
  const started = Date.now()
  // The stamp's time is taken before compiling: a source edited during the build stays newer.
  const startedAt = new Date()
  const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
  const result = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8"
  })
  // tsc exits 2 when it found type errors but wrote the output anyway; `npm run typecheck` is the
  // place for those, so they do not stop the program from starting.
  if (result.status === 2) {
    const count = (result.stdout.match(/error TS\d+/g) ?? []).length
    process.stderr.write(`[build] tsc reported ${count} type error(s) (see \`npm run typecheck\`); JavaScript was written anyway\n`)
  } else if (result.status !== 0) {
    process.stderr.write(result.stdout + result.stderr)
    throw new Error(`tsc failed (exit ${result.status ?? result.signal}); dist/ was not updated`)
  }
  bundle()
  bundleConsoleOrSay()
  writeFileSync(stampFile, startedAt.toISOString() + "\n")
  utimesSync(stampFile, startedAt, startedAt)
  process.stderr.write(`[build] done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
}

/**
 * dist/bundle/: the command's entry, the SQLite worker's and the function runner's (processes of
 * their own, started from the file beside the chunk that starts them), with code splitting so a module imported lazily (the OpenAPI
 * document, ioredis, the UnixFS importer, each CLI command) stays a chunk loaded when first used.
 * Packages are bundled too, but the native addons, which load their binaries by path. CommonJS
 * packages inside an ES module bundle call `require`, which the banner gives each chunk. The
 * source maps lead back to src/ through tsc's maps, for `--enable-source-maps`.
 */
/**
 * Files of earlier builds in `dir` that this one did not write: kept a day, then removed. A
 * gateway still running from an earlier build loads its lazy chunks (named by their content, so
 * never overwritten) when it first needs them: removed at once, they broke its uploads (the
 * importer's chunk) with 503 until it was restarted.
 */
export const pruneEarlier = (dir, written, keepMs = 24 * 3600_000) => {
  const now = Date.now()
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const file = path.join(at, entry.name)
      if (entry.isDirectory()) walk(file)
      else if (!written.has(file) && now - statSync(file).mtimeMs > keepMs) rmSync(file, { force: true })
    }
  }
  if (existsSync(dir)) walk(dir)
}

const bundle = () => {
  // loaded here, not at the top: bin/portico.mjs imports this file on every command
  const esbuild = createRequire(import.meta.url)("esbuild")
  const result = esbuild.buildSync({
    entryPoints: {
      main: path.join(distDir, "main.js"),
      sqliteWorker: path.join(distDir, "layers", "sql", "sqliteWorker.js"),
      // the function runner's process and its threads, found beside the chunk that starts them
      // (src/layers/functions/FunctionRunner.ts: ./runner/functionRunner.js)
      "runner/functionRunner": path.join(distDir, "layers", "functions", "runner", "functionRunner.js"),
      "runner/instanceThread": path.join(distDir, "layers", "functions", "runner", "instanceThread.js")
    },
    outdir: bundleDir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: ["better-sqlite3", "bufferutil", "utf-8-validate", "tsx"],
    banner: { js: "import { createRequire as __porticoRequire } from 'node:module'; const require = __porticoRequire(import.meta.url);" },
    sourcemap: "linked",
    sourcesContent: false,
    metafile: true,
    logLevel: "silent"
  })
  for (const warning of result.warnings) process.stderr.write(`[build] esbuild: ${warning.text}\n`)
  pruneEarlier(bundleDir, new Set(Object.keys(result.metafile.outputs).map((file) => path.resolve(file))))
}

/**
 * dist/console/: the web console for the browser (console/main.tsx with Preact, its JSX compiled
 * by esbuild, and the typed client it calls the API through; console/console.css), minified, each
 * file named by its content hash so the gateway can let browsers keep it for good
 * (src/api/ConsolePage.ts). manifest.json names the script, the stylesheet and every file there is
 * to serve; it is written last, so a gateway never reads a manifest naming files not yet written.
 */
export const bundleConsole = () => {
  if (!existsSync(consoleSources)) return
  const esbuild = createRequire(import.meta.url)("esbuild")
  const result = esbuild.buildSync({
    entryPoints: [path.join(consoleSources, "main.tsx"), path.join(consoleSources, "console.css")],
    outdir: consoleDir,
    entryNames: "[name]-[hash]",
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: path.join(consoleSources, "tsconfig.json"),
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "linked",
    metafile: true,
    logLevel: "silent"
  })
  // a warning here is a broken source (esbuild recovers from a stylesheet's syntax errors, e.g. a
  // merge's markers, and would ship it half applied): the console is not built
  if (result.warnings.length > 0) {
    const where = (w) => (w.location === null ? "" : ` (${w.location.file}:${w.location.line})`)
    throw new Error(result.warnings.map((w) => `${w.text}${where(w)}`).join("; "))
  }
  const outputs = Object.keys(result.metafile.outputs).map((file) => path.basename(file))
  const entry = (ext) => {
    const found = Object.entries(result.metafile.outputs).find(([file, output]) => output.entryPoint !== undefined && file.endsWith(ext))
    if (found === undefined) throw new Error(`the console's ${ext} entry was not built`)
    return path.basename(found[0])
  }
  // the script and the stylesheet also compressed, so the gateway answers a browser's
  // Accept-Encoding without compressing on its path (the script is mostly the typed client and
  // Effect: ~860 KB, ~240 KB as br; brotli's quality 9 takes a tenth of a second where 11 takes two)
  for (const name of outputs.filter((file) => file.endsWith(".js") || file.endsWith(".css"))) {
    const bytes = readFileSync(path.join(consoleDir, name))
    writeFileSync(path.join(consoleDir, `${name}.br`), brotliCompressSync(bytes, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 9, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }))
    writeFileSync(path.join(consoleDir, `${name}.gz`), gzipSync(bytes, { level: 9 }))
  }
  writeFileSync(consoleManifest, JSON.stringify({ script: entry(".js"), style: entry(".css"), files: outputs }, null, 2) + "\n")
  // an open page of a gateway started before this build still asks for the files its manifest named
  const written = outputs.flatMap((name) => [name, `${name}.br`, `${name}.gz`]).map((name) => path.join(consoleDir, name))
  pruneEarlier(consoleDir, new Set([...written, consoleManifest]))
}

/**
 * The console is not what the gateway needs to run: a console that does not bundle is said, and
 * the gateway starts without it (`/console` answers 503 saying so); with no manifest written, the
 * next build tries again.
 */
const bundleConsoleOrSay = () => {
  try {
    bundleConsole()
  } catch (error) {
    rmSync(consoleDir, { recursive: true, force: true })
    process.stderr.write(`[build] the console (console/) could not be bundled, the gateway runs without it: ${error.message}\n`)
  }
}

const lockDir = path.join(distDir, ".build-lock")
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** Whether the process holding the lock is gone (killed mid-build, e.g. by Ctrl-C). */
const lockAbandoned = () => {
  try {
    const pid = Number(readFileSync(path.join(lockDir, "pid"), "utf8"))
    if (!Number.isInteger(pid) || pid <= 0) return Date.now() - statSync(lockDir).mtimeMs > 10_000
    process.kill(pid, 0)
    return false
  } catch (error) {
    // ESRCH: no such process; ENOENT: the lock is gone or its pid file is not written yet
    if (error.code === "ENOENT") return existsSync(lockDir) && Date.now() - statSync(lockDir).mtimeMs > 10_000
    return error.code === "ESRCH"
  }
}

/**
 * One build at a time: test files in parallel workers, `npm start` and a `portico` command may
 * all find dist/ stale at once. The lock is a directory holding its owner's pid; a lock whose
 * owner is gone is taken over.
 */
const withLock = (run) => {
  mkdirSync(distDir, { recursive: true })
  let told = false
  for (;;) {
    try {
      mkdirSync(lockDir)
      writeFileSync(path.join(lockDir, "pid"), String(process.pid))
      break
    } catch (error) {
      if (error.code !== "EEXIST") throw error
      if (lockAbandoned()) {
        rmSync(lockDir, { recursive: true, force: true })
        continue
      }
      if (!told) process.stderr.write("[build] waiting for another build of dist/ to finish\n")
      told = true
      sleep(200)
    }
  }
  try {
    return run()
  } finally {
    rmSync(lockDir, { recursive: true, force: true })
  }
}

export const ensureBuilt = () => {
  if (staleReason() === undefined && consoleStaleReason() === undefined) return
  withLock(() => {
    // another process may have built while this one waited
    const reason = staleReason()
    if (reason !== undefined) return build(reason)
    const consoleReason = consoleStaleReason()
    if (consoleReason !== undefined) {
      process.stderr.write(`[build] bundling the console (${consoleReason})\n`)
      bundleConsoleOrSay()
    }
  })
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    if (process.argv.includes("--force")) withLock(() => build("asked with --force"))
    else ensureBuilt()
  } catch (error) {
    process.stderr.write(`[build] ${error.message}\n`)
    process.exit(1)
  }
}
