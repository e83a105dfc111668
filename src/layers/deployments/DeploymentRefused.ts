/** A deployment record service's refusal, in the deployment family's codes (src/domain/Errors.ts). */
import type { DeploymentRecordCode } from "../../domain/Errors.js"
import type { Refused } from "../Refused.js"

export type DeploymentRefused = Refused<DeploymentRecordCode>
