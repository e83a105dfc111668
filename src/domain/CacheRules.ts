/** The cache's limits and parsers (spec §4.1, §8), pure so both engines and the API share them. */

/** Map name + key: 255 bytes, the map name counting its UTF-8 length plus 2. */
export const KEY_BOUND_BYTES = 255
/** One entry, key and encoding included. */
export const ENTRY_MAX_BYTES = 1024 * 1024
/** TTLs are at most 10 years. */
export const TTL_MAX_MS = 10 * 365.25 * 86_400_000
/** Keys per mget call. */
export const MGET_MAX_KEYS = 1000
/** Default per-namespace memory bound on one node. */
export const NAMESPACE_MAX_BYTES = 256 * 1024 * 1024

const utf8 = (s: string) => Buffer.byteLength(s, "utf8")

/** Bytes a dmap and key count against the 255-byte bound. */
export const keyBytes = (dmap: string, key: string): number => utf8(dmap) + 2 + utf8(key)

/** Bytes an entry counts against the 1 MiB bound and the namespace's memory: map, key and value text. */
export const entryBytes = (dmap: string, key: string, json: string): number => keyBytes(dmap, key) + utf8(json)

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000
}

/**
 * A Go-style duration (`30m`, `1h30m`, `1.5h`, `500ms`, `0s`) in milliseconds; `0` alone is
 * allowed. Undefined when unparsable, negative, unit-less or over 10 years.
 */
export const parseTtl = (text: string): number | undefined => {
  if (text === "0") return 0
  if (!/^(?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|s|m|h))+$/.test(text)) return undefined
  let total = 0
  for (const part of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|s|m|h)/g)) {
    const unit = UNIT_MS[part[2] ?? ""]
    if (unit === undefined) return undefined
    total += Number(part[1]) * unit
  }
  return Number.isFinite(total) && total <= TTL_MAX_MS ? Math.ceil(total) : undefined
}
