#!/usr/bin/env node
// The deployment sandbox before `npm start` (scripts/ensure-deps.mjs calls ensureSandbox as the
// prestart step; `node scripts/ensure-sandbox.mjs` runs it alone). The embedded defaults include
// running apps, which needs bubblewrap and the helpers scripts/engines.sh builds. When one is
// missing and we are root, it is installed, as `npm test` does for its engines; when that cannot
// be done (not root, no gcc, no network for apt-get) one line says what to run and the start goes
// on: the gateway serves static sites, and a dynamic deploy's 503 names the same command. Present
// helpers cost three stat calls.
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const COMMAND = "bash scripts/engines.sh sandbox"
const LATER = "until then the gateway serves static sites, and dynamic deploys answer 503"

export const ensureSandbox = () => {
  const engines = process.env.PORTICO_ENGINES_DIR ?? ".engines/bin"
  const needed = ["/usr/bin/bwrap", `${engines}/portico-sandbox-bpf`, `${engines}/portico-sandbox-exec`]
  if (needed.every((file) => existsSync(file))) return
  if (process.getuid?.() !== 0) {
    process.stderr.write(`[sandbox] apps need the deployment sandbox: run \`sudo ${COMMAND}\` once (${LATER})\n`)
    return
  }
  process.stderr.write(`[sandbox] installing the deployment sandbox for apps (${COMMAND}; once)\n`)
  const result = spawnSync("bash", ["scripts/engines.sh", "sandbox"], { stdio: ["ignore", "inherit", "inherit"] })
  if (result.status !== 0) process.stderr.write(`[sandbox] \`${COMMAND}\` failed (its reason is above): ${LATER}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) ensureSandbox()
