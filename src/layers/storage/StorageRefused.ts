/** The refusals of the storage services, in statuses, so they stay HTTP-free. */
import { Code } from "../../domain/Errors.js"
import { refuse, Refused as StorageRefused } from "../Refused.js"

export { refuse, StorageRefused }

/** The registry or the engine did not answer in time: retry (spec §4.4). */
export const storeDown = (what = "the content registry is unavailable") =>
  refuse(503, Code.UNAVAILABLE, what, "retry shortly", 2)

export const notCanonical = (text: string) =>
  refuse(
    400,
    Code.VALIDATION_FAILED,
    `"${text.length > 80 ? text.slice(0, 80) + "…" : text}" is not a CID in canonical form`,
    "send a CIDv1 in lowercase base32 (bafy…) or a CIDv0 in base58btc (Qm…)"
  )

export const noContent = () =>
  refuse(404, Code.NOT_FOUND, "this namespace holds no content with that CID", "upload it first")
