/**
 * The function runner's jail (src/layers/functions/RunnerJail.ts) starts the runner's code from
 * wherever the checkout is. A checkout under /tmp (`git clone … /tmp/x && npm start`, as a new
 * user tries Portico) once lost it: the jail's private /tmp was mounted after the checkout's bind,
 * over it, so node found no runner file and every invoke answered 503 FUNCTION_UNAVAILABLE.
 *
 * The command is spawned as the gateway spawns it; as root with bwrap (this machine, CI) that is
 * the jail, otherwise a plain child process, which must run the same file too.
 */
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { runnerCommand } from "../../../src/layers/functions/RunnerJail.js"

const run = (file: string, args: ReadonlyArray<string>, uid: number | undefined) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const proc = spawn(file, [...args], { stdio: ["ignore", "pipe", "pipe"], env: {}, cwd: "/", ...(uid === undefined ? {} : { uid, gid: uid }) })
    let stdout = ""
    let stderr = ""
    proc.stdout.on("data", (chunk) => (stdout += chunk))
    proc.stderr.on("data", (chunk) => (stderr += chunk))
    proc.on("error", reject)
    proc.on("exit", (code) => resolve({ code, stdout, stderr }))
  })

describe("the function runner's jail", () => {
  const base = mkdtempSync(path.join(tmpdir(), "portico-jail-"))
  afterAll(() => rmSync(base, { recursive: true, force: true }))

  it("runs the runner's file from a checkout under /tmp, with a data directory beside it hidden", async () => {
    const checkout = path.join(base, "checkout")
    const dataDir = path.join(base, "data")
    mkdirSync(path.join(checkout, "dist", "bundle", "runner"), { recursive: true })
    mkdirSync(dataDir, { recursive: true })
    writeFileSync(path.join(checkout, "package.json"), "{}\n")
    writeFileSync(path.join(dataDir, "secret.key"), "not for tenants\n")
    const entry = path.join(checkout, "dist", "bundle", "runner", "functionRunner.js")
    writeFileSync(
      entry,
      `const fs = require("node:fs"); process.stdout.write("runner ran; data dir " + (fs.existsSync(${JSON.stringify(dataDir)} + "/secret.key") ? "visible" : "hidden"))\n`
    )
    const command = runnerCommand(entry, [entry], dataDir)
    const answer = await run(command.file, command.args, command.uid)
    expect(answer.stderr).toBe("")
    expect(answer.code).toBe(0)
    // outside the jail (not root, or no bwrap) the runner is a plain child process that sees the host's files
    expect(answer.stdout).toBe(`runner ran; data dir ${command.jailed ? "hidden" : "visible"}`)
  })
})
