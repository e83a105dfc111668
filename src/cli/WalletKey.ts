/**
 * A wallet key for the command line: a secp256k1 private key kept in a file as 0x + 64 hex, its
 * EIP-55 address, and EIP-191 `personal_sign` signatures, as a browser wallet would make them.
 */
import { secp256k1 } from "@noble/curves/secp256k1"
import { keccak_256 } from "@noble/hashes/sha3"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils"
import { Effect } from "effect"
import * as fs from "node:fs"
import { personalSignHash, toChecksumAddress } from "../domain/Siwe.js"
import { CliError } from "./Cli.js"

export interface WalletKey {
  readonly privateKey: Uint8Array
  /** EIP-55 checksummed. */
  readonly address: string
}

const fromPrivateKey = (privateKey: Uint8Array): WalletKey => {
  const publicKey = secp256k1.getPublicKey(privateKey, false)
  const lower = `0x${bytesToHex(keccak_256(publicKey.subarray(1)).subarray(12))}`
  return { privateKey, address: Effect.runSync(toChecksumAddress(lower)) }
}

export const newWalletKey = (): WalletKey => fromPrivateKey(secp256k1.utils.randomPrivateKey())

/** Writes the key to a new file (mode 0600); an existing file is never overwritten. */
export const writeWalletKey = (file: string, key: WalletKey): void => {
  try {
    fs.writeFileSync(file, `0x${bytesToHex(key.privateKey)}\n`, { mode: 0o600, flag: "wx" })
  } catch (error) {
    const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
    if (code === "EEXIST") throw new CliError(`${file} exists; a wallet key file is never overwritten`, 2)
    throw new CliError(`cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

export const readWalletKey = (file: string): WalletKey => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8").trim()
  } catch (error) {
    throw new CliError(`cannot read the wallet key file ${file}: ${error instanceof Error ? error.message : String(error)}`, 2)
  }
  const hex = text.startsWith("0x") ? text.slice(2) : text
  if (!/^[0-9a-fA-F]{64}$/.test(hex) || !secp256k1.utils.isValidPrivateKey(hex)) {
    throw new CliError(`${file} does not hold a wallet key (0x followed by 64 hex characters)`, 2)
  }
  return fromPrivateKey(hexToBytes(hex))
}

/** `personal_sign`: a 65-byte r||s||v signature (v = 27 or 28, low s) as 0x-hex. */
export const personalSign = (key: WalletKey, message: string): string => {
  const signature = secp256k1.sign(personalSignHash(message), key.privateKey, { lowS: true })
  return `0x${signature.toCompactHex()}${(27 + signature.recovery).toString(16)}`
}
