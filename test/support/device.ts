/**
 * A device key as a device-bound client holds one (docs/auth.md): a P-256 key pair, its public JWK,
 * the JWK thumbprint that is the device id, and signing with the private key (base64url ES256).
 */
import * as jose from "jose"
import { webcrypto } from "node:crypto"

export interface Device {
  readonly jwk: jose.JWK
  readonly id: string
  readonly sign: (text: string) => Promise<string>
}

export const newDevice = async (): Promise<Device> => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = (await webcrypto.subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
  return {
    jwk,
    id: await jose.calculateJwkThumbprint(jwk),
    sign: async (text) =>
      Buffer.from(await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))).toString("base64url")
  }
}
