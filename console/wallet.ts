/**
 * The browser's wallet (EIP-1193 `window.ethereum`): its account, and `personal_sign` (EIP-191)
 * of the gateway's EIP-4361 message, as `portico login` signs it with a key file.
 */
import { RefusedError } from "./api.js"

interface Eip1193 {
  readonly request: (args: { readonly method: string; readonly params?: ReadonlyArray<unknown> }) => Promise<unknown>
}

const provider = (): Eip1193 => {
  const candidate = (window as unknown as { readonly ethereum?: Eip1193 }).ethereum
  if (candidate === undefined || typeof candidate.request !== "function") {
    throw new RefusedError({ error: "no browser wallet was found", code: "WALLET_MISSING", hint: "install or unlock an EIP-1193 wallet, or sign in with an API key" })
  }
  return candidate
}

const walletRefusal = (failure: unknown): RefusedError => {
  const detail = typeof failure === "object" && failure !== null ? (failure as { readonly code?: unknown; readonly message?: unknown }) : {}
  // EIP-1193: 4001 is the user's refusal
  if (detail.code === 4001) return new RefusedError({ error: "the wallet request was refused", code: "WALLET_REFUSED" })
  return new RefusedError({ error: `the wallet failed: ${String(detail.message ?? failure)}`, code: "WALLET_ERROR" })
}

/** Asks the wallet for its account: the address it will sign with. */
export const connectWallet = async (): Promise<string> => {
  const eth = provider()
  let accounts: unknown
  try {
    accounts = await eth.request({ method: "eth_requestAccounts" })
  } catch (failure) {
    throw walletRefusal(failure)
  }
  const first = Array.isArray(accounts) ? accounts[0] : undefined
  if (typeof first !== "string") throw new RefusedError({ error: "the wallet named no account", code: "WALLET_ERROR" })
  return first
}

const hexOf = (text: string) =>
  "0x" + Array.from(new TextEncoder().encode(text), (byte) => byte.toString(16).padStart(2, "0")).join("")

/** `personal_sign` of `message` by `address`: the signature's hex. */
export const personalSign = async (message: string, address: string): Promise<string> => {
  let signature: unknown
  try {
    signature = await provider().request({ method: "personal_sign", params: [hexOf(message), address] })
  } catch (failure) {
    throw walletRefusal(failure)
  }
  if (typeof signature !== "string") throw new RefusedError({ error: "the wallet answered no signature", code: "WALLET_ERROR" })
  return signature
}
