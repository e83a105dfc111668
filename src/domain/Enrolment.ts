/**
 * What a wallet sign-in does with the device it binds (spec §3.1 and the device policy table of
 * §5.11): issue a session (enrolling or activating the device as needed), hold the device pending
 * an active device's approval, or refuse. Pure: the sign-in service reads the inputs from the
 * registry and carries out the answer.
 */
import { isControlPlaneRole, type Role } from "./Grants.js"
import type { DevicePolicy } from "./SessionPolicy.js"

/** A namespace's `device_policy`. */
export type { DevicePolicy }

/** The registry's record of the signing device's key, when that key is enrolled. */
export interface DeviceRecord {
  /** The account the key belongs to. */
  readonly wallet: string
  /** `active`, `pending` or `revoked` (a tombstone: the key never signs in again). */
  readonly status: string
}

export interface EnrolmentInput {
  readonly policy: DevicePolicy
  /** The wallet's role in the namespace: a control-plane role is held to `optional`. */
  readonly role: Role
  /** The signing wallet. */
  readonly wallet: string
  /** Whether the sign-in binds a device (its key and signature already checked). */
  readonly bindsDevice: boolean
  /** The record of the device's key, when enrolled; undefined for a key never seen. */
  readonly existing: DeviceRecord | undefined
  /**
   * How many active devices the account has. Read only where `needsActiveDevices` says the
   * answer depends on it; elsewhere any number gives the same answer.
   */
  readonly activeDevices: number
}

/** What happens to the device when a session is issued. */
export type IssueDevice =
  /** No device: a session bound to the account. */
  | "none"
  /** A key never seen: enrolled `active` with the session. */
  | "enrol"
  /** A pending device that no longer needs approval: made `active` with the session. */
  | "activate"
  /** An active device of this account. */
  | "existing"

export type EnrolmentRefusal = {
  readonly _tag: "Refuse"
  readonly status: 403
  readonly code: "DEVICE_REQUIRED" | "DEVICE_KEY_TAKEN" | "DEVICE_REVOKED"
  readonly reason: string
}

export type Enrolment =
  | { readonly _tag: "Issue"; readonly device: IssueDevice }
  /**
   * The device waits for an active device of the account (answer 202, no session): `enrol` adds
   * it as `pending`; `existing` is a pending device signing in again, which gets a fresh request
   * so that a lost answer, an expired request or a revoked approver never leaves it stuck.
   */
  | { readonly _tag: "Pending"; readonly device: "enrol" | "existing" }
  | EnrolmentRefusal

/** The policy a wallet is held to: a control-plane role is held to `optional` whatever the policy. */
export const effectivePolicy = (policy: DevicePolicy, role: Role): DevicePolicy =>
  isControlPlaneRole(role) ? "optional" : policy

const refusal = (code: EnrolmentRefusal["code"], reason: string): EnrolmentRefusal => ({
  _tag: "Refuse",
  status: 403,
  code,
  reason
})

/** Whether `decideEnrolment` reads `activeDevices` for this sign-in (so the service may skip the read). */
export const needsActiveDevices = (input: Omit<EnrolmentInput, "activeDevices">): boolean =>
  input.bindsDevice &&
  effectivePolicy(input.policy, input.role) === "approval" &&
  (input.existing === undefined || (input.existing.wallet === input.wallet && input.existing.status === "pending"))

export const decideEnrolment = (input: EnrolmentInput): Enrolment => {
  const policy = effectivePolicy(input.policy, input.role)
  if (!input.bindsDevice) {
    return policy === "optional" ? { _tag: "Issue", device: "none" } : refusal("DEVICE_REQUIRED", "this namespace needs a device-bound sign-in")
  }
  // The account's first device enrols; under approval every further one waits for an active one
  // (after every active device is revoked, the next one enrols as the first again).
  const waits = policy === "approval" && input.activeDevices > 0
  const existing = input.existing
  if (existing === undefined) return waits ? { _tag: "Pending", device: "enrol" } : { _tag: "Issue", device: "enrol" }
  if (existing.wallet !== input.wallet) return refusal("DEVICE_KEY_TAKEN", "this device key belongs to another account")
  if (existing.status === "pending") return waits ? { _tag: "Pending", device: "existing" } : { _tag: "Issue", device: "activate" }
  if (existing.status === "revoked") return refusal("DEVICE_REVOKED", "this device was revoked")
  return { _tag: "Issue", device: "existing" }
}
