/**
 * A separate Node process trusts the APNs stand-in only through NODE_EXTRA_CA_CERTS (how the e2e
 * gateway will), and without it the untrusted certificate is a per-device failure, not a crash.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApnsStandIn, makeP8Key, startApnsStandIn } from "../support/apnsStandIn.js"

let apns: ApnsStandIn
const credential = { teamId: "TEAM123456", keyId: "CAKEY12345", bundleId: "com.example.app", p8Key: makeP8Key(), environment: "production" }
const script = path.join(import.meta.dirname, "fixtures", "sendOnce.ts")

const sendFromChild = (env: Record<string, string>, token: string): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const childEnv: Record<string, string | undefined> = { ...process.env, ...env }
    if (!("NODE_EXTRA_CA_CERTS" in env)) delete childEnv["NODE_EXTRA_CA_CERTS"]
    execFile(process.execPath, ["--import", "tsx", script, apns.url, JSON.stringify(credential), token], { env: childEnv, timeout: 30_000 }, (error, stdout, stderr) => {
      if (error !== null) return reject(new Error(`${error.message}\n${stderr}`))
      resolve(JSON.parse(stdout))
    })
  })

beforeAll(async () => {
  apns = await startApnsStandIn()
  apns.addKey(credential)
})
afterAll(async () => {
  await apns.stop()
})

describe("trusting the APNs stand-in from another process", () => {
  it("delivers with NODE_EXTRA_CA_CERTS pointing at the test CA", async () => {
    expect(await sendFromChild({ NODE_EXTRA_CA_CERTS: apns.caFile }, "aa".repeat(32))).toMatchObject({ outcome: "ok", status: 200 })
    expect(apns.received.map((r) => r.token)).toContain("aa".repeat(32))
  })

  it("reports an untrusted certificate as a failed device, not a crash", async () => {
    expect(await sendFromChild({}, "bb".repeat(32))).toEqual({ outcome: "failed", status: 0, reason: "ConnectionFailed" })
  })
})
