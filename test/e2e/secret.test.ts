/**
 * A gateway given another root secret than the one its registry was sealed under says so in one
 * line, naming the setting that fixes it, instead of dying with AES-GCM's "unable to authenticate
 * data".
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { wrongSecretMessage } from "../../src/cli/failure.js"
import { ensureDist, errorLines, runPortico } from "../support/cli.js"
import { startGateway } from "../support/gateway.js"

describe("a registry sealed under another root secret", () => {
  let dataDir: string
  beforeAll(async () => {
    ensureDist()
    const gw = await startGateway()
    dataDir = gw.dataDir
    // the first start seals the token signing key under <dataDir>/secret.key
    expect((await gw.request("GET", "/.well-known/jwks.json")).status).toBe(200)
    expect(await gw.stop()).toBe(0)
  }, 180_000)

  const otherSecret = () => randomBytes(32).toString("hex")

  it("stops `portico serve` with one line naming PORTICO_SECRET, exit 1", async () => {
    const ran = await runPortico(["serve", "--port", "0", "--data-dir", dataDir], { env: { PORTICO_SECRET: otherSecret() } })
    expect(ran.code).toBe(1)
    expect(errorLines(ran)).toEqual([`portico: ${wrongSecretMessage}`])
    expect(wrongSecretMessage).toContain("PORTICO_SECRET must be the cluster's root secret")
    expect(ran.stdout).not.toContain('"msg":"listening"')
  })

  it("stops a registry command the same way", async () => {
    const ran = await runPortico(["namespace", "create", "sealed", "--data-dir", dataDir], { env: { PORTICO_SECRET: otherSecret() } })
    expect(ran.code).toBe(1)
    expect(errorLines(ran)).toEqual([`portico: ${wrongSecretMessage}`])
  })

  it("starts with the secret the message points to", async () => {
    const secret = fs.readFileSync(path.join(dataDir, "secret.key"), "utf8").trim()
    const gw = await startGateway({ dataDir, env: { PORTICO_SECRET: secret } })
    expect((await gw.request("GET", "/v1/health")).status).toBe(200)
    expect(await gw.stop()).toBe(0)
  })

  it("reports a malformed PORTICO_SECRET as what it is", async () => {
    const ran = await runPortico(["serve", "--port", "0", "--data-dir", dataDir], { env: { PORTICO_SECRET: "short" } })
    expect(ran.code).toBe(1)
    expect(errorLines(ran)).toEqual(["portico: root secret: PORTICO_SECRET must be 32 bytes, hex or base64"])
  })
})
