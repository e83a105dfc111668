#!/usr/bin/env node
// Runs before `npm start` and `npm test`: installs the locked dependencies when they are missing
// or older than the lockfile, links the `portico` command, compiles src/ to dist/ when stale, and
// before `npm start` installs the deployment sandbox when it can, so a fresh clone needs only the
// two commands of the README.
import { spawnSync } from "node:child_process"
import { existsSync, lstatSync, mkdirSync, readlinkSync, rmSync, statSync, symlinkSync } from "node:fs"
import { ensureBuilt } from "./build.mjs"
import { ensureSandbox } from "./ensure-sandbox.mjs"

const marker = "node_modules/.package-lock.json"
const stale = !existsSync(marker) || statSync(marker).mtimeMs < statSync("package-lock.json").mtimeMs
if (stale) {
  process.stderr.write("[deps] installing the locked dependencies (npm install; once, or after package-lock.json changes)\n")
  const env = { ...process.env }
  // better-sqlite3 compiles against the local Node headers when no prebuilt binary can be fetched.
  if (env.npm_config_nodedir === undefined && existsSync("/usr/include/node/node.h")) env.npm_config_nodedir = "/usr"
  // `npm install`, not `npm ci`: see .ci/run for why ci refuses the lockfile on this registry.
  const result = spawnSync("npm", ["install", "--no-fund", "--no-audit"], { stdio: "inherit", env })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

// `npx portico` runs node_modules/.bin/portico. package.json declares no `bin`: for the root
// package's own bin npx first loads the whole installed tree (about 0.3 s more per command), while
// a link in node_modules/.bin it runs directly (docs/cli.md).
const link = "node_modules/.bin/portico"
const target = "../../bin/portico.mjs"
const linked = (() => {
  try {
    return lstatSync(link).isSymbolicLink() && readlinkSync(link) === target
  } catch {
    return false
  }
})()
if (!linked) {
  mkdirSync("node_modules/.bin", { recursive: true })
  rmSync(link, { force: true })
  symlinkSync(target, link)
}

try {
  ensureBuilt()
} catch (error) {
  process.stderr.write(`[build] ${error.message}\n`)
  process.exit(1)
}

// `npm start`: apps need the deployment sandbox (scripts/ensure-sandbox.mjs installs it when it can).
if (process.env.npm_lifecycle_event === "prestart") ensureSandbox()
