/**
 * The codes namespace backup and restore refuse with (the routes declare the same list): a public
 * key or archive refused (400), a restore into a namespace holding data or of content no longer
 * retrievable (409), over the caps (413), the transfer slot taken (429), a database homed on
 * another node or a store down (503).
 */
import { Code, type ErrorCode } from "../../../domain/Errors.js"
import { refuse, type Refused } from "../../Refused.js"

export const BackupRefusals = [
  "VALIDATION_FAILED",
  "BAD_REQUEST",
  "NOT_FOUND",
  "CONFLICT",
  "NAMESPACE_NOT_EMPTY",
  "PAYLOAD_TOO_LARGE",
  "RATE_LIMITED",
  "UNAVAILABLE",
  "HOME_NODE_UNREACHABLE"
] as const satisfies ReadonlyArray<ErrorCode>

export type BackupCode = (typeof BackupRefusals)[number]
export type BackupRefused = Refused<BackupCode>

/** A refusal of another family (SQL, the transfer slot) as one of backup's: its code when backup has it, else 503. */
export const asBackupRefusal = (r: Refused): BackupRefused =>
  (BackupRefusals as ReadonlyArray<string>).includes(r.code)
    ? (r as BackupRefused)
    : refuse(Code.UNAVAILABLE, r.reason, "retry shortly", 5)
