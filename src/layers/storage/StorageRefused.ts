/** The refusals of the storage services, in the storage family's codes, so they stay HTTP-free. */
import { Code, type StorageCode } from "../../domain/Errors.js"
import { refuse, type Refused } from "../Refused.js"

export { refuse }
export type StorageRefused = Refused<StorageCode>

/** The registry or the engine did not answer in time: retry (spec §4.4). */
export const storeDown = (what = "the content registry is unavailable") =>
  refuse(Code.UNAVAILABLE, what, "retry shortly", 2)

export const notCanonical = (text: string) =>
  refuse(
    Code.VALIDATION_FAILED,
    `"${text.length > 80 ? text.slice(0, 80) + "…" : text}" is not a CID in canonical form`,
    "send a CIDv1 in lowercase base32 (bafy…) or a CIDv0 in base58btc (Qm…)"
  )

/**
 * The namespace holds the content, but the embedded engine of this gateway has none of its
 * blocks: another gateway of the cluster stored it (an upload there, a backup taken on a
 * database's home node). Retrying here will not change that: the hint says where to read it.
 */
export const heldElsewhere = () =>
  refuse(
    Code.UNAVAILABLE,
    "the content is held by another gateway of this cluster: the embedded content engine keeps blocks on the node that stored them",
    "read it through the gateway that stored it (for a database backup, the database's home node), or run the cluster content engine so every gateway reaches it"
  )

export const noContent = () =>
  refuse(Code.NOT_FOUND, "this namespace holds no content with that CID", "upload it first")
