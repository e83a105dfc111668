/**
 * A namespace's session policy (spec §4.5, §5.11) as the API shows it: `device_policy` optional |
 * required | approval, and `sign_in` members | open.
 */
import { Schema } from "effect"

export const DevicePolicy = Schema.Literal("optional", "required", "approval")
export type DevicePolicy = typeof DevicePolicy.Type
export const SignInPolicy = Schema.Literal("members", "open")
export type SignInPolicy = typeof SignInPolicy.Type
