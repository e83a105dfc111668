/**
 * Grants, roles and key profiles (spec §5.4). A grant is a capability name, optionally narrowed
 * to keys (`cache:key=<map>/*`). Roles belong to wallets; profiles are how keys are minted.
 */
import { Schema } from "effect"

export const GrantName = Schema.Literal(
  "admin",
  "namespace-write",
  "members-write",
  "operator",
  "db:write",
  "secrets:write",
  "push:write",
  "cache",
  "storage",
  "storage-read",
  "invoke",
  "proxy",
  "webrtc",
  "pubsub"
)
export type GrantName = typeof GrantName.Type

/** Member roles, plus `user`: a signed-in wallet that is not a member (namespaces with `sign_in: open`). */
export const Role = Schema.Literal("owner", "admin", "developer", "runtime", "reader", "user")
export type Role = typeof Role.Type

/** What a key was minted as; `custom` is a key minted from an explicit scope list. */
export const KeyRole = Schema.Literal("owner", "admin", "runtime", "custom")
export type KeyRole = typeof KeyRole.Type

export const KeyProfile = Schema.Literal("admin", "runtime")
export type KeyProfile = typeof KeyProfile.Type

/** A key's lifetime in whole days, as `POST /v1/namespace/keys` and `portico keys create` take it. */
export const KeyLifetimeDays = Schema.Int.pipe(Schema.between(1, 3650))

/**
 * A grant as written on the wire and stored: a name, optionally narrowed: `cache:key=<pattern>`
 * to cache keys, `pubsub:topic=<pattern>` to topics. The pattern holds no whitespace, control
 * character or lone surrogate (they would be stored mangled or print as something else), and at
 * most 255 code points.
 */
const grantPattern = /^([a-z-]+(?::write)?)(?::(key|topic)=([^\s\p{Cc}\p{Cs}]{1,255}))?$/u

/** A topic pattern: the characters of a topic (PubSubRules.ts `TOPIC_SHAPE`) and `*`. */
const TOPIC_PATTERN = /^[A-Za-z0-9._~:/@+=*-]+$/

/** Which grant each narrowing applies to: the cache's keys, pub/sub's topics. */
const narrowings: Readonly<Record<string, GrantName>> = { key: "cache", topic: "pubsub" }

/** Parsed grant: the name plus the pattern it is narrowed to, if any (keys for `cache`, topics for `pubsub`). */
export interface Grant {
  readonly name: GrantName
  readonly pattern: string | undefined
}

const grantNames: ReadonlySet<string> = new Set(GrantName.literals)

/** Parses one grant string; undefined when it is not a known grant. */
export const parseGrant = (text: string): Grant | undefined => {
  const match = grantPattern.exec(text)
  if (match === null) return undefined
  const name = match[1]
  if (name === undefined || !grantNames.has(name)) return undefined
  // Only the cache (by key) and pub/sub (by topic) may be narrowed: "admin" narrowed to keys
  // would mean nothing, and `cache:topic=` names the wrong thing.
  const pattern = match[3]
  if (pattern === undefined) return { name: name as GrantName, pattern: undefined }
  if (narrowings[match[2] ?? ""] !== name) return undefined
  // With neither `/` nor `*` a cache pattern can match no joined `<map>/<key>`: a key minted with
  // it would hold a grant that reaches nothing, so it is refused rather than silently useless. A
  // topic pattern without `*` names one topic, which is useful as it is.
  if (name === "cache" && !pattern.includes("/") && !pattern.includes("*")) return undefined
  // likewise a topic pattern with a character no topic has (a comma, a quote) can match none
  if (name === "pubsub" && !TOPIC_PATTERN.test(pattern)) return undefined
  return { name: name as GrantName, pattern }
}

/** A grant as written on the wire: `cache:key=<pattern>`, `pubsub:topic=<pattern>`, or the name. */
export const grantText = (grant: Grant): string =>
  grant.pattern === undefined ? grant.name : `${grant.name}:${grant.name === "pubsub" ? "topic" : "key"}=${grant.pattern}`

/**
 * `grantPattern`'s narrowing for a JSON Schema reader (no `u` flag there): no whitespace, no C0 or
 * C1 control, no BOM (JavaScript's `\s` holds U+FEFF, Python's does not), and a `/` or `*`.
 */
const NARROWED_CHAR = "[^\\s\\x00-\\x1f\\x7f-\\x9f\\ufeff]"
export const NARROWED_CACHE_GRANT = `^cache:key=${NARROWED_CHAR}*[/*]${NARROWED_CHAR}*$`
export const NARROWED_PUBSUB_GRANT = "^pubsub:topic=[A-Za-z0-9._~:/@+=*-]+$"

/** A grant string checked by Schema: the only way scopes enter the system. */
export const GrantString = Schema.String.pipe(
  Schema.filter((s) => parseGrant(s) !== undefined, {
    message: () =>
      "unknown grant; known: " + GrantName.literals.join(", ") + " (cache may be narrowed: cache:key=<map>/*; pubsub: pubsub:topic=<pattern>, of a topic's characters and *)",
    jsonSchema: {
      type: "string",
      minLength: 1,
      anyOf: [
        { enum: [...GrantName.literals] },
        // 10 characters of `cache:key=` and at most 255 of pattern
        { pattern: NARROWED_CACHE_GRANT, maxLength: 265 },
        // 13 characters of `pubsub:topic=` and at most 255 of pattern
        { pattern: NARROWED_PUBSUB_GRANT, maxLength: 268 }
      ]
    }
  })
).annotations({
  identifier: "Grant",
  description: "A grant name, or `cache:key=<map>/*` narrowed to keys, or `pubsub:topic=<pattern>` narrowed to topics (`*` matches any run)"
})

/** The grants an app's clients use; everything else is the control plane. */
export const dataPlane: ReadonlyArray<GrantName> = [
  "cache",
  "storage",
  "storage-read",
  "invoke",
  "proxy",
  "webrtc",
  "pubsub",
  "push:write"
]

/** Grants each wallet role holds. */
export const roleGrants: Record<Role, ReadonlyArray<GrantName>> = {
  owner: ["admin", "namespace-write", "members-write", "db:write", "secrets:write", ...dataPlane],
  admin: ["admin", "namespace-write", "members-write", "db:write", "secrets:write", ...dataPlane],
  developer: ["db:write", "secrets:write", ...dataPlane],
  runtime: ["invoke", "storage", "storage-read", "push:write", "webrtc", "proxy", "pubsub", "cache"],
  // spec §5.4: "a signed-in user's session holds [cache]", whatever the role
  reader: ["storage-read", "cache"],
  // An app's end user: the data plane an app's client needs, never the control plane.
  user: ["cache", "storage", "storage-read", "invoke", "proxy", "webrtc", "pubsub"]
}

/**
 * Grants of each key profile. The runtime profile leaves out `cache`: spec §5.4 says the cache
 * grant must be named explicitly when minting a key.
 */
export const profileGrants: Record<KeyProfile, ReadonlyArray<GrantName>> = {
  admin: roleGrants.admin,
  runtime: ["invoke", "storage", "storage-read", "push:write", "webrtc", "proxy", "pubsub"]
}

/** Roles at or above developer form the control plane (spec §5.5). */
export const isControlPlaneRole = (role: Role): boolean => role === "owner" || role === "admin" || role === "developer"

/** Whether `key` (already joined as `<map>/<key>`) matches a narrowing pattern; `*` matches any run. */
export const matchesKeyPattern = (pattern: string, key: string): boolean => {
  const parts = pattern.split("*")
  if (parts.length === 1) return pattern === key
  let at = 0
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? ""
    if (i === 0) {
      if (!key.startsWith(part)) return false
      at = part.length
    } else if (i === parts.length - 1) {
      return key.length - part.length >= at && key.endsWith(part)
    } else {
      const found = key.indexOf(part, at)
      if (found < 0) return false
      at = found + part.length
    }
  }
  return true
}

/**
 * A cache narrowing split into the map it names and the glob over keys in that map. Map names
 * may hold `/`, so the joined `<map>/<key>` alone is ambiguous: `cache:key=m1/*` would reach map
 * `m1/secrets` too. The map part is everything before the last `/` that precedes the first `*`
 * and must equal the dmap exactly; the rest globs the key. A pattern with no `/` before its first
 * `*` (`*`, `app*`) names no map: it globs the joined `<map>/<key>` as written.
 */
export const cacheScope = (pattern: string): { readonly map: string | undefined; readonly keys: string } => {
  const star = pattern.indexOf("*")
  const slash = pattern.lastIndexOf("/", star < 0 ? pattern.length : star)
  return slash < 0 ? { map: undefined, keys: pattern } : { map: pattern.slice(0, slash), keys: pattern.slice(slash + 1) }
}

/** Whether a narrowing pattern reaches `key` in `dmap`. */
export const cacheGrantReaches = (pattern: string, dmap: string, key: string): boolean => {
  const scope = cacheScope(pattern)
  return scope.map === undefined ? matchesKeyPattern(pattern, `${dmap}/${key}`) : scope.map === dmap && matchesKeyPattern(scope.keys, key)
}

/** Whether a narrowing pattern could reach some key of `dmap` (a scan of any other map is refused). */
export const cacheGrantReachesMap = (pattern: string, dmap: string): boolean => {
  const scope = cacheScope(pattern)
  if (scope.map !== undefined) return scope.map === dmap
  const literal = pattern.slice(0, pattern.indexOf("*") < 0 ? pattern.length : pattern.indexOf("*"))
  const prefix = `${dmap}/`
  return prefix.startsWith(literal) || literal.startsWith(prefix)
}
