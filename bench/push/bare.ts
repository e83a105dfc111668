/**
 * The anchor of bench/push: a bare Node `http2` client posting the same APNs requests the gateway
 * sends (same path, headers, payload and provider token form) over one connection, as many
 * streams at a time as the gateway's APNs client keeps (500), with nothing else around it.
 *
 * Driven over stdin by run.ts: each `go` line posts one request per device token and prints
 * `{"ms":…,"ok":…}` on stdout. Settings come from the environment the driver sets:
 * BARE_URL, BARE_CA_FILE, BARE_KEY (JSON: teamId, keyId, bundleId, p8Key), BARE_TOKENS (count),
 * BARE_PAYLOAD (the APNs JSON the gateway sends).
 */
import { SignJWT } from "jose"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http2 from "node:http2"
import * as readline from "node:readline"
import { deviceTokens } from "./tokens.js"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`${name} is not set`)
  return value
}

const url = env("BARE_URL")
const ca = fs.readFileSync(env("BARE_CA_FILE"))
const key = JSON.parse(env("BARE_KEY")) as { teamId: string; keyId: string; bundleId: string; p8Key: string }
const tokens = deviceTokens(Number(env("BARE_TOKENS")))
const payload = env("BARE_PAYLOAD")
const CONCURRENCY = 500

const jwt = await new SignJWT({ iss: key.teamId, iat: Math.floor(Date.now() / 1000) })
  .setProtectedHeader({ alg: "ES256", kid: key.keyId })
  .sign(crypto.createPrivateKey(key.p8Key))

const session = http2.connect(url, { ca })
session.on("error", (e) => {
  console.error("bare client session error", e)
  process.exit(1)
})

const post = (token: string) =>
  new Promise<number>((resolve) => {
    const stream = session.request({
      ":method": "POST",
      ":path": "/3/device/" + token,
      authorization: "bearer " + jwt,
      "apns-topic": key.bundleId,
      "apns-push-type": "alert",
      "apns-priority": "10",
      "content-type": "application/json"
    })
    let status = 0
    stream.on("response", (headers) => {
      status = Number(headers[":status"] ?? 0)
    })
    stream.on("data", () => undefined)
    stream.on("end", () => resolve(status))
    stream.on("error", () => resolve(0))
    stream.end(payload)
  })

const round = async () => {
  const started = performance.now()
  let next = 0
  let ok = 0
  const worker = async () => {
    while (next < tokens.length) {
      const token = tokens[next++] as string
      if ((await post(token)) === 200) ok++
    }
  }
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, tokens.length) }, worker))
  return { ms: performance.now() - started, ok }
}

const lines = readline.createInterface({ input: process.stdin })
for await (const line of lines) {
  if (line.trim() !== "go") continue
  process.stdout.write(JSON.stringify(await round()) + "\n")
}
session.close()
