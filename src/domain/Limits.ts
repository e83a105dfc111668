/**
 * Limits the API states in its schemas: the services enforce them and the route definitions
 * describe them, so they live here where both (and the typed client) can read them.
 */

/** Browser origins a namespace may admit (docs/api.md, "Browsers and CORS"). */
export const MAX_CORS_ORIGINS = 32

/** Fetch capabilities: how many one request mints and how long they live, in seconds (spec §4.4). */
export const FETCH_CAP_LIMITS = { minCount: 1, maxCount: 64, minTtl: 3600, maxTtl: 604800 } as const

/** A pin's status as the storage routes report it (spec §4.4). */
export const PIN_STATUSES = ["pinned", "pinning", "queued", "unpinned", "error", "unknown"] as const
export type PinStatusName = (typeof PIN_STATUSES)[number]
