/**
 * The codes namespace backup and restore refuse with (src/layers/namespaces/backup; the routes in
 * src/api/groups/NamespaceBackupGroup.ts declare the same list): a public key or archive refused
 * (400), a restore into a namespace holding data (409 NAMESPACE_NOT_EMPTY) or of content no longer
 * retrievable (409 CONFLICT), over the caps (413), the transfer slot taken (429), a database homed
 * on another node or a store down (503).
 */
import type { ErrorCode } from "./Errors.js"

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
