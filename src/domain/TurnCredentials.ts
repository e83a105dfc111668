/**
 * TURN credentials in the TURN REST scheme (draft-uberti-behave-turn-rest-00), which coturn checks
 * with `use-auth-secret`: the username is `<expiry>:<namespace>` (expiry in Unix seconds), the
 * password the base64 HMAC-SHA1 of the username under the secret the TURN servers share with the
 * gateways. Nothing is stored: the server recomputes the password and refuses a username whose
 * expiry has passed (docs/webrtc.md, "TURN").
 */
import { createHmac } from "node:crypto"

export interface TurnCredential {
  readonly username: string
  readonly password: string
  /** Unix seconds after which the TURN servers refuse it. */
  readonly expiresAt: number
}

export const turnCredential = (secret: string, namespace: string, nowSeconds: number, ttlSeconds: number): TurnCredential => {
  const expiresAt = Math.floor(nowSeconds) + ttlSeconds
  const username = `${expiresAt}:${namespace}`
  return { username, password: createHmac("sha1", secret).update(username).digest("base64"), expiresAt }
}
