/**
 * The enrolment decision against the device policy table (spec §5.11) and the device states
 * (spec §3.1): policy optional / required / approval × no device, first device, further device,
 * the account's own active or pending device, a tombstoned key, another account's key, and a
 * wallet with a control-plane role (held to optional).
 */
import { describe, expect, it } from "vitest"
import { decideEnrolment, type DevicePolicy, type EnrolmentInput, needsActiveDevices } from "../../src/domain/Enrolment.js"
import type { Role } from "../../src/domain/Grants.js"

const me = "0x" + "11".repeat(20)
const other = "0x" + "22".repeat(20)

const input = (patch: Partial<EnrolmentInput>): EnrolmentInput => ({
  policy: "optional",
  role: "user",
  wallet: me,
  bindsDevice: true,
  existing: undefined,
  activeDevices: 0,
  ...patch
})

const policies: ReadonlyArray<DevicePolicy> = ["optional", "required", "approval"]
const issue = (device: string) => ({ _tag: "Issue", device })
const pending = (device: string) => ({ _tag: "Pending", device })
const refused = (code: string) => expect.objectContaining({ _tag: "Refuse", status: 403, code })

describe("decideEnrolment: the device policy table (spec §5.11)", () => {
  it("a sign-in binding no device: a session under optional, DEVICE_REQUIRED under required and approval", () => {
    expect(decideEnrolment(input({ bindsDevice: false, policy: "optional" }))).toEqual(issue("none"))
    expect(decideEnrolment(input({ bindsDevice: false, policy: "required" }))).toEqual(refused("DEVICE_REQUIRED"))
    expect(decideEnrolment(input({ bindsDevice: false, policy: "approval", activeDevices: 3 }))).toEqual(refused("DEVICE_REQUIRED"))
  })

  it("the account's first device enrols active under every policy", () => {
    for (const policy of policies) expect(decideEnrolment(input({ policy, activeDevices: 0 }))).toEqual(issue("enrol"))
  })

  it("a further new device enrols active under optional and required, and waits (pending) under approval", () => {
    expect(decideEnrolment(input({ policy: "optional", activeDevices: 2 }))).toEqual(issue("enrol"))
    expect(decideEnrolment(input({ policy: "required", activeDevices: 2 }))).toEqual(issue("enrol"))
    expect(decideEnrolment(input({ policy: "approval", activeDevices: 1 }))).toEqual(pending("enrol"))
  })
})

describe("decideEnrolment: an enrolled key (spec §3.1)", () => {
  it("the account's own active device signs in under every policy", () => {
    for (const policy of policies) {
      expect(decideEnrolment(input({ policy, existing: { wallet: me, status: "active" }, activeDevices: 1 }))).toEqual(issue("existing"))
    }
  })

  it("a pending device signing in again gets a fresh request while an active device can approve it", () => {
    expect(decideEnrolment(input({ policy: "approval", existing: { wallet: me, status: "pending" }, activeDevices: 1 }))).toEqual(
      pending("existing")
    )
  })

  it("a pending device that no longer needs approval is activated: policy relaxed, or no active device left", () => {
    const waiting = { wallet: me, status: "pending" }
    expect(decideEnrolment(input({ policy: "optional", existing: waiting, activeDevices: 1 }))).toEqual(issue("activate"))
    expect(decideEnrolment(input({ policy: "required", existing: waiting, activeDevices: 1 }))).toEqual(issue("activate"))
    // after every active device of the account is revoked, the next sign-in enrols as the first
    expect(decideEnrolment(input({ policy: "approval", existing: waiting, activeDevices: 0 }))).toEqual(issue("activate"))
  })

  it("a tombstoned key never signs in again, under every policy and whatever the role", () => {
    for (const policy of policies) {
      for (const role of ["user", "owner"] as const) {
        for (const activeDevices of [0, 1]) {
          expect(decideEnrolment(input({ policy, role, existing: { wallet: me, status: "revoked" }, activeDevices }))).toEqual(
            refused("DEVICE_REVOKED")
          )
        }
      }
    }
  })

  it("a key of another account is refused whatever its state, before its state is looked at", () => {
    for (const policy of policies) {
      for (const status of ["active", "pending", "revoked"]) {
        expect(decideEnrolment(input({ policy, existing: { wallet: other, status }, activeDevices: 1 }))).toEqual(
          refused("DEVICE_KEY_TAKEN")
        )
      }
    }
  })
})

describe("decideEnrolment: a control-plane role is held to optional (spec §5.11)", () => {
  const controlPlane: ReadonlyArray<Role> = ["owner", "admin", "developer"]
  const endUsers: ReadonlyArray<Role> = ["user", "reader", "runtime"]

  it("owner, admin and developer sign in without a device under every policy; end users do not", () => {
    for (const policy of policies) {
      for (const role of controlPlane) expect(decideEnrolment(input({ policy, role, bindsDevice: false }))).toEqual(issue("none"))
      for (const role of endUsers) {
        expect(decideEnrolment(input({ policy, role, bindsDevice: false }))).toEqual(
          policy === "optional" ? issue("none") : refused("DEVICE_REQUIRED")
        )
      }
    }
  })

  it("their further devices enrol without approval, and their pending devices are activated", () => {
    for (const role of controlPlane) {
      expect(decideEnrolment(input({ policy: "approval", role, activeDevices: 2 }))).toEqual(issue("enrol"))
      expect(decideEnrolment(input({ policy: "approval", role, existing: { wallet: me, status: "pending" }, activeDevices: 2 }))).toEqual(
        issue("activate")
      )
    }
  })
})

describe("needsActiveDevices", () => {
  const cases: Array<EnrolmentInput> = []
  for (const policy of policies) {
    for (const role of ["user", "admin"] as const) {
      for (const bindsDevice of [true, false]) {
        for (const existing of [
          undefined,
          { wallet: me, status: "active" },
          { wallet: me, status: "pending" },
          { wallet: me, status: "revoked" },
          { wallet: other, status: "pending" }
        ]) {
          cases.push(input({ policy, role, bindsDevice, existing }))
        }
      }
    }
  }

  it("is true exactly where the count of active devices changes the answer", () => {
    for (const c of cases) {
      const changes = JSON.stringify(decideEnrolment({ ...c, activeDevices: 0 })) !== JSON.stringify(decideEnrolment({ ...c, activeDevices: 1 }))
      expect([c, needsActiveDevices(c)]).toEqual([c, changes])
    }
  })
})
