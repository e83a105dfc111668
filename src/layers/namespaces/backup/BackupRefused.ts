/** Namespace backup's refusals, typed with its codes (src/domain/NamespaceBackup.ts). */
import { Code } from "../../../domain/Errors.js"
import { type BackupCode, BackupRefusals } from "../../../domain/NamespaceBackup.js"
import { refuse, type Refused } from "../../Refused.js"

export { type BackupCode, BackupRefusals }
export type BackupRefused = Refused<BackupCode>

/** A refusal of another family (SQL, the transfer slot) as one of backup's: its code when backup has it, else 503. */
export const asBackupRefusal = (r: Refused): BackupRefused =>
  (BackupRefusals as ReadonlyArray<string>).includes(r.code)
    ? (r as BackupRefused)
    : refuse(Code.UNAVAILABLE, r.reason, "retry shortly", 5)
