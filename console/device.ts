/**
 * This browser as a device (docs/auth.md, spec §2.5): a P-256 key pair made with WebCrypto, its
 * private half non-extractable (script can sign with it, never read it), kept in IndexedDB (which
 * holds a CryptoKey as it is, not its bytes). One key per namespace and wallet, since a device key
 * belongs to one account of one namespace. The device id is the public JWK's RFC 7638 thumbprint;
 * signatures are WebCrypto's ECDSA over SHA-256, the 64-byte r||s form the gateway takes, in
 * base64url; proofs are `{iat, id, sig}` over the lines `portico-device-proof-v1`, action,
 * namespace, binding, iat, id.
 */
import { RefusedError } from "./api.js"

export interface PublicJwk {
  readonly kty: string
  readonly crv: string
  readonly x: string
  readonly y: string
}

export interface DeviceKey {
  readonly id: string
  readonly jwk: PublicJwk
  readonly sign: (text: string) => Promise<string>
}

export type ProofAction = "refresh" | "approve" | "claim" | "revoke" | "end-session"

export interface DeviceProof {
  readonly iat: number
  readonly id: string
  readonly sig: string
}

const DB_NAME = "portico.console.devices"
const STORE = "keys"

const slotOf = (namespace: string, wallet: string) => `${namespace}:${wallet.toLowerCase()}`

const base64url = (bytes: Uint8Array) => {
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

const unavailable = (why: string) =>
  new RefusedError({ error: `this browser cannot hold a device key: ${why}`, code: "DEVICE_KEY_UNAVAILABLE", hint: "sign in without binding a device" })

const request = <A>(req: IDBRequest<A>) =>
  new Promise<A>((resolve, reject) => {
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })

const openDb = async (): Promise<IDBDatabase> => {
  if (typeof indexedDB === "undefined" || crypto.subtle === undefined) throw unavailable("no IndexedDB or WebCrypto (a secure context is needed)")
  const open = indexedDB.open(DB_NAME, 1)
  open.onupgradeneeded = () => open.result.createObjectStore(STORE)
  return request(open)
}

interface Kept {
  readonly id: string
  readonly jwk: PublicJwk
  readonly privateKey: CryptoKey
}

const withStore = async <A>(mode: IDBTransactionMode, use: (store: IDBObjectStore) => IDBRequest<A>): Promise<A> => {
  const db = await openDb()
  try {
    return await request(use(db.transaction(STORE, mode).objectStore(STORE)))
  } finally {
    db.close()
  }
}

/** RFC 7638: SHA-256 of the required members in lexicographic order, no spaces. */
const thumbprint = async (jwk: PublicJwk) => {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y })
  return base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonical))))
}

const asDevice = (kept: Kept): DeviceKey => ({
  id: kept.id,
  jwk: kept.jwk,
  sign: async (text) =>
    base64url(new Uint8Array(await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, kept.privateKey, new TextEncoder().encode(text))))
})

/** This browser's key for `wallet` in `namespace`, if it has one. */
export const keptDevice = async (namespace: string, wallet: string): Promise<DeviceKey | undefined> => {
  const kept = (await withStore("readonly", (s) => s.get(slotOf(namespace, wallet)))) as Kept | undefined
  return kept === undefined ? undefined : asDevice(kept)
}

/** This browser's key for `wallet` in `namespace`, made now (non-extractable) when there is none. */
export const deviceFor = async (namespace: string, wallet: string): Promise<DeviceKey> => {
  const known = await keptDevice(namespace, wallet)
  if (known !== undefined) return known
  let pair: CryptoKeyPair
  try {
    pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"])
  } catch (failure) {
    throw unavailable(String(failure))
  }
  const exported = await crypto.subtle.exportKey("jwk", pair.publicKey)
  const jwk: PublicJwk = { kty: String(exported.kty), crv: String(exported.crv), x: String(exported.x), y: String(exported.y) }
  const kept: Kept = { id: await thumbprint(jwk), jwk, privateKey: pair.privateKey }
  await withStore("readwrite", (s) => s.put(kept, slotOf(namespace, wallet)))
  return asDevice(kept)
}

/** Forgets this browser's key for `wallet` in `namespace` (a revoked device's key never signs in again). */
export const forgetDevice = (namespace: string, wallet: string) => withStore("readwrite", (s) => s.delete(slotOf(namespace, wallet)))

/** A fresh proof by `device` for one action on one binding (spent once by the gateway). */
export const proofOf = async (device: DeviceKey, action: ProofAction, namespace: string, binding: string): Promise<DeviceProof> => {
  const iat = Math.floor(Date.now() / 1000)
  const id = base64url(crypto.getRandomValues(new Uint8Array(24)))
  const sig = await device.sign(["portico-device-proof-v1", action, namespace, binding, String(iat), id].join("\n"))
  return { iat, id, sig }
}
