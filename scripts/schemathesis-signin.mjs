/**
 * Dev tool for scripts/schemathesis.sh: signs a fresh wallet in to a running gateway with a
 * device-bound session and prints its access token. The wallet is added as an admin member with
 * the API key given, so the session reaches the routes that need a signed-in session (storage,
 * fetch capabilities) with the grants an admin holds.
 *
 * usage: node scripts/schemathesis-signin.mjs <gateway url> <namespace> <admin api key>
 */
import { Wallet } from "ethers"
import * as jose from "jose"
import { webcrypto } from "node:crypto"

const [url, namespace, apiKey] = process.argv.slice(2)
if (url === undefined || namespace === undefined || apiKey === undefined) {
  console.error("usage: node scripts/schemathesis-signin.mjs <gateway url> <namespace> <admin api key>")
  process.exit(2)
}

const post = async (path, json, token) => {
  const headers = { "content-type": "application/json" }
  if (token !== undefined) headers["authorization"] = `Bearer ${token}`
  const res = await fetch(url + path, { method: "POST", headers, body: JSON.stringify(json) })
  const body = await res.json().catch(() => undefined)
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`)
  return body
}

const wallet = Wallet.createRandom()
await post("/v1/namespace/members", { wallet: wallet.address, role: "admin" }, apiKey)

const subtle = webcrypto.subtle
const pair = await subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
const jwk = await subtle.exportKey("jwk", pair.publicKey)
const deviceId = await jose.calculateJwkThumbprint(jwk)
const signWithDevice = async (text) =>
  Buffer.from(await subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))).toString("base64url")

const { message } = await post("/v1/auth/challenge", { wallet: wallet.address, namespace, device_id: deviceId })
const session = await post("/v1/auth/verify", {
  message,
  signature: await wallet.signMessage(message),
  device_key: jwk,
  device_signature: await signWithDevice(message),
  device_label: "schemathesis"
})
if (typeof session.access_token !== "string") throw new Error("verify answered no access token: " + JSON.stringify(session))
process.stdout.write(session.access_token + "\n")
