/**
 * `portico wallet new|address` and `portico login`: a wallet signs in the way a browser wallet
 * does, over HTTP against a running gateway (challenge, personal_sign, verify).
 */
import { CliError, type Parsed, stringOption, usageError } from "./Cli.js"
import { newWalletKey, personalSign, readWalletKey, writeWalletKey } from "./WalletKey.js"

export const DEFAULT_URL = "http://127.0.0.1:6001"

export const walletNew = async (parsed: Parsed): Promise<void> => {
  const out = stringOption(parsed, "out")
  if (out === undefined) throw usageError("wallet new needs --out FILE (the private key goes there, never to the terminal)")
  const key = newWalletKey()
  writeWalletKey(out, key)
  process.stdout.write(key.address + "\n")
}

export const walletAddress = async (parsed: Parsed): Promise<void> => {
  const file = stringOption(parsed, "wallet-key-file")
  if (file === undefined) throw usageError("wallet address needs --wallet-key-file FILE")
  process.stdout.write(readWalletKey(file).address + "\n")
}

/** POSTs JSON; a refusal becomes one line with the gateway's own error, code and hint. */
const post = async (base: string, route: string, body: unknown): Promise<Record<string, unknown>> => {
  let res: Response
  try {
    res = await fetch(new URL(route, base), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000)
    })
  } catch (error) {
    const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
    throw new CliError(`cannot reach the gateway at ${base} (${reason}): is it running (npm start)? Set --url or PORTICO_URL`)
  }
  const text = await res.text()
  let answer: unknown
  try {
    answer = JSON.parse(text)
  } catch {
    answer = undefined
  }
  const record = typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>) : {}
  if (!res.ok) {
    const parts = [record["error"] ?? text.slice(0, 200), record["code"] === undefined ? "" : ` (${String(record["code"])})`]
    const hint = record["hint"] === undefined ? "" : `: ${String(record["hint"])}`
    throw new CliError(`${route} answered ${res.status}: ${String(parts[0])}${parts[1]}${hint}`)
  }
  return record
}

export const login = async (parsed: Parsed): Promise<void> => {
  const namespace = stringOption(parsed, "namespace")
  const file = stringOption(parsed, "wallet-key-file")
  if (file === undefined) throw usageError("login needs --wallet-key-file FILE (make one with `portico wallet new --out FILE`)")
  const base = stringOption(parsed, "url") ?? process.env["PORTICO_URL"] ?? DEFAULT_URL
  try {
    new URL(base)
  } catch {
    throw usageError(`--url must be an http(s) URL such as ${DEFAULT_URL}, not ${JSON.stringify(base)}`)
  }
  const key = readWalletKey(file)
  // no --namespace: the platform realm, to create namespaces or act as an operator (docs/namespaces.md)
  const challenge = await post(base, "/v1/auth/challenge", { wallet: key.address, ...(namespace === undefined ? {} : { namespace }) })
  const message = challenge["message"]
  if (typeof message !== "string") throw new CliError("/v1/auth/challenge answered without a message")
  const session = await post(base, "/v1/auth/verify", { message, signature: personalSign(key, message) })
  if (parsed.values["json"] === true) {
    process.stdout.write(JSON.stringify(session) + "\n")
    return
  }
  const token = session["access_token"]
  if (typeof token !== "string") throw new CliError("/v1/auth/verify answered without an access token")
  process.stdout.write(token + "\n")
}
