import { wideRefusal } from "../../domain/Errors.js"
import type { Refused } from "../../layers/Refused.js"

/** A service's refusal as the API error of its status. */
export const refusedHttp = (e: Refused) => wideRefusal(e.status, e.reason, e.code, e.hint, e.retryAfterSeconds)
