#!/usr/bin/env node
// Runs before `npm start` and `npm test`: installs the locked dependencies when they are missing
// or older than the lockfile, so a fresh clone needs only the two commands of the README.
import { spawnSync } from "node:child_process"
import { existsSync, statSync } from "node:fs"

const marker = "node_modules/.package-lock.json"
const stale = !existsSync(marker) || statSync(marker).mtimeMs < statSync("package-lock.json").mtimeMs
if (stale) {
  const env = { ...process.env }
  // better-sqlite3 compiles against the local Node headers when no prebuilt binary can be fetched.
  if (env.npm_config_nodedir === undefined && existsSync("/usr/include/node/node.h")) env.npm_config_nodedir = "/usr"
  // `npm install`, not `npm ci`: see .ci/run for why ci refuses the lockfile on this registry.
  const result = spawnSync("npm", ["install", "--no-fund", "--no-audit"], { stdio: "inherit", env })
  process.exit(result.status ?? 1)
}
