/**
 * The signed-in credential: an API key pasted in, or a wallet's session (EIP-1193 `personal_sign`
 * of the gateway's EIP-4361 message, then `/v1/auth/verify`). It is kept in this tab's
 * sessionStorage, never a cookie: the gateway never receives it but as `Authorization` (or `?jwt=`
 * on a WebSocket), so there is nothing for another site to ride (no CSRF), and it is gone when
 * the tab closes. A wallet session is refreshed a minute before its access token expires; signing
 * out of one (a namespace's or the platform realm's) ends it at the gateway (`POST
 * /v1/auth/logout`), its refresh token with it.
 */
import { NamespaceName } from "../src/client.js"
import { call, forgetClients, type Refusal, RefusedError, refusalOf } from "./api.js"
import { deviceFor, type DeviceProof, forgetDevice, keptDevice, type ProofAction, proofOf } from "./device.js"
import { connectWallet, personalSign } from "./wallet.js"

export interface Whoami {
  readonly namespace: string
  readonly subject: string
  readonly method: string
  readonly role: string
  readonly grants: ReadonlyArray<string>
}

export type Credential =
  | { readonly kind: "key"; readonly token: string; readonly whoami: Whoami }
  | {
      readonly kind: "wallet"
      readonly token: string
      readonly refreshToken: string
      /** When the access token expires, Unix ms. */
      readonly expiresAt: number
      readonly refreshedAt: number
      readonly sessionId: string
      /** This browser's device id, for a device-bound session (device.ts holds its key). */
      readonly deviceId?: string | undefined
      readonly whoami: Whoami
    }

/** The realm a wallet signs in to without a namespace (docs/namespaces.md): operators' and creators'. */
export const PLATFORM_REALM = "portico"

const STORAGE_KEY = "portico.console.credential"
type Listener = (credential: Credential | undefined, notice: Refusal | undefined) => void
const listeners = new Set<Listener>()
let current: Credential | undefined = (() => {
  try {
    const kept = sessionStorage.getItem(STORAGE_KEY)
    return kept === null ? undefined : (JSON.parse(kept) as Credential)
  } catch {
    return undefined
  }
})()
let notice: Refusal | undefined
let refreshTimer: ReturnType<typeof setTimeout> | undefined

const publish = () => {
  for (const listener of listeners) listener(current, notice)
}

const set = (credential: Credential | undefined, why?: Refusal) => {
  current = credential
  notice = why
  if (credential === undefined) sessionStorage.removeItem(STORAGE_KEY)
  else sessionStorage.setItem(STORAGE_KEY, JSON.stringify(credential))
  scheduleRefresh()
  publish()
}

export const currentCredential = () => current
export const currentNotice = () => notice
export const subscribe = (listener: Listener) => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

const whoami = (token: string) => call(token, (c) => c.auth.whoami())

/**
 * Who a platform-realm session is: its wallet, and `operator` when the namespace listing says it
 * sees every namespace (an operator's), else `creator`; the console shows the operator's pages to
 * operators only.
 */
const platformWhoami = async (token: string, wallet: string): Promise<Whoami> => {
  const listed = await call(token, (c) => c.namespaceCreate.listNamespaces())
  return { namespace: PLATFORM_REALM, subject: wallet, method: "jwt", role: listed.all ? "operator" : "creator", grants: [] }
}

/** Signs in with an API key (or any bearer token): kept once the gateway says whose it is. */
export const signInWithKey = async (token: string) => {
  const trimmed = token.trim()
  if (trimmed === "") throw new RefusedError({ error: "paste an API key first", code: "VALIDATION_FAILED" })
  set({ kind: "key", token: trimmed, whoami: await whoami(trimmed) })
}

/**
 * Signs in with the browser's wallet: to `namespace`, or to the platform realm when it is empty.
 * With `device`, the session is bound to this browser's device key (device.ts), made and enrolled
 * at its first sign-in: the challenge names the device, and the device signs the very message the
 * wallet signs.
 */
export const signInWithWallet = async (namespace: string, device?: { readonly label: string }) => {
  const wallet = await connectWallet()
  const name = namespace.trim()
  let realm: NamespaceName | undefined
  try {
    realm = name === "" ? undefined : NamespaceName.make(name)
  } catch {
    throw new RefusedError({ error: `"${name}" is not a namespace name`, code: "VALIDATION_FAILED", hint: "3-63 of a-z, 0-9 and inner hyphens" })
  }
  if (device !== undefined && realm === undefined) {
    throw new RefusedError({ error: "a device is bound to a namespace's account", code: "VALIDATION_FAILED", hint: "type the namespace, or sign in without binding a device" })
  }
  const key = device === undefined || realm === undefined ? undefined : await deviceFor(realm, wallet)
  const challenge = await call(undefined, (c) =>
    c.auth.challenge({ payload: { wallet, ...(realm === undefined ? {} : { namespace: realm }), ...(key === undefined ? {} : { device_id: key.id }) } })
  )
  const signature = await personalSign(challenge.message, wallet)
  const label = device?.label.trim() ?? ""
  const deviceSignature = key === undefined ? undefined : await key.sign(challenge.message)
  const answer = await call(undefined, (c) =>
    c.auth.verify({
      payload: {
        message: challenge.message,
        signature,
        ...(key === undefined || deviceSignature === undefined
          ? {}
          : { device_key: key.jwk, device_signature: deviceSignature, ...(label === "" ? {} : { device_label: label }) })
      }
    })
  ).catch(async (failure: unknown) => {
    // a revoked device's key never signs in again: forget it, so the next sign-in enrols a new one
    if (key !== undefined && realm !== undefined && refusalOf(failure).code === "DEVICE_REVOKED") {
      await forgetDevice(realm, wallet)
      throw new RefusedError({ ...refusalOf(failure), hint: "this browser's device key was revoked and is forgotten: sign in again to enrol a new one" })
    }
    throw failure
  })
  if (!("access_token" in answer)) {
    throw new RefusedError({ error: "this sign-in waits for approval from one of the account's devices", code: "DEVICE_PENDING", hint: `user code ${answer.user_code}` })
  }
  const now = Date.now()
  set({
    kind: "wallet",
    token: answer.access_token,
    refreshToken: answer.refresh_token,
    expiresAt: now + answer.expires_in * 1000,
    refreshedAt: now,
    sessionId: answer.session_id,
    deviceId: answer.device_id,
    // a platform-realm token reaches no namespace route, whoami included (docs/namespaces.md): the
    // session's own answer says who it is
    whoami: answer.namespace === PLATFORM_REALM ? await platformWhoami(answer.access_token, answer.subject) : await whoami(answer.access_token)
  })
}

/**
 * A proof by this browser's device for `action` on `binding`, when the signed-in session is
 * device-bound; undefined for any other credential (which sends none). A device-bound session
 * whose key this browser no longer holds cannot prove anything: said as DEVICE_KEY_MISSING.
 */
export const deviceProof = async (action: ProofAction, binding: string): Promise<DeviceProof | undefined> => {
  const credential = current
  if (credential === undefined || credential.kind !== "wallet" || credential.deviceId === undefined) return undefined
  const key = await keptDevice(credential.whoami.namespace, credential.whoami.subject)
  if (key === undefined || key.id !== credential.deviceId) {
    throw new RefusedError({ error: "this browser no longer holds the session's device key", code: "DEVICE_KEY_MISSING", hint: "sign out and sign in again" })
  }
  return proofOf(key, action, credential.whoami.namespace, binding)
}

/** Refreshes a wallet session now: a new access token, and the refresh token rotated. */
export const refreshNow = async () => {
  const credential = current
  if (credential === undefined || credential.kind !== "wallet") return
  try {
    const proof = await deviceProof("refresh", credential.refreshToken)
    const answer = await call(undefined, (c) =>
      c.auth.refresh({ payload: { refresh_token: credential.refreshToken, ...(proof === undefined ? {} : { device_proof: proof }) } })
    )
    const now = Date.now()
    forgetClients()
    set({ ...credential, token: answer.access_token, refreshToken: answer.refresh_token, expiresAt: now + answer.expires_in * 1000, refreshedAt: now })
  } catch (failure) {
    // a session the gateway no longer refreshes is over: say why on the sign-in page
    forgetClients()
    set(undefined, refusalOf(failure))
  }
}

function scheduleRefresh() {
  if (refreshTimer !== undefined) clearTimeout(refreshTimer)
  refreshTimer = undefined
  const credential = current
  if (credential === undefined || credential.kind !== "wallet") return
  // a minute before expiry; at once (nearly) for a session kept from a page opened long ago
  const due = Math.max(1_000, credential.expiresAt - Date.now() - 60_000)
  refreshTimer = setTimeout(() => void refreshNow(), due)
}

/**
 * Signs out: a wallet's session, of a namespace or of the platform realm, is ended at the gateway
 * first (`POST /v1/auth/logout`: its access and refresh tokens stop working); a key is only
 * forgotten here (revoke it on the keys page).
 */
export const signOut = async () => {
  const credential = current
  let why: Refusal | undefined
  if (credential?.kind === "wallet") {
    try {
      const proof = await deviceProof("end-session", credential.sessionId)
      await call(credential.token, (c) => c.auth.logout({ payload: proof === undefined ? {} : { device_proof: proof } }))
    } catch (failure) {
      const refusal = refusalOf(failure)
      // an expired or ended session is over anyway; anything else is said
      if (refusal.code !== "INVALID_TOKEN" && refusal.code !== "TOKEN_EXPIRED") why = refusal
    }
  }
  forgetClients()
  set(undefined, why)
}

/**
 * Forgets the session here without calling the gateway: for a session the gateway has already
 * ended (its device revoked from this very page), saying why on the sign-in page.
 */
export const endedElsewhere = (why: Refusal) => {
  forgetClients()
  set(undefined, why)
}

/** An access token for a WebSocket's `?jwt=`: a session's own, or a key exchanged for a 15-minute JWT. */
export const socketToken = async (): Promise<string> => {
  const credential = current
  if (credential === undefined) throw new RefusedError({ error: "sign in first", code: "UNAUTHORIZED" })
  if (credential.kind === "wallet") return credential.token
  const exchanged = await call(credential.token, (c) => c.auth.token({ payload: {} }))
  return exchanged.access_token
}

// a page opened with a session kept from before resumes its refreshing
scheduleRefresh()
