/**
 * The operator settings (spec §4.9, docs/operators.md): their names as the routes spell them,
 * their defaults, and the rule each value must meet, as one Schema per setting. The schema is the
 * route's request schema (so the OpenAPI document states the rule and a value outside it is 400
 * before any handler) and the service's check before it stores a value (so what the registry
 * holds is always usable). Each decodes its wire forms to the text the registry stores.
 */
import { Either, ParseResult, Schema } from "effect"

export const SETTING_NAMES = [
  "namespace-creation",
  "max-namespaces-per-wallet",
  "auto-update",
  "update-channel",
  "update-window",
  "release-repo"
] as const
export type SettingName = (typeof SETTING_NAMES)[number]

export const isSettingName = (name: string): name is SettingName => (SETTING_NAMES as ReadonlyArray<string>).includes(name)

/** Defaults: only operators create namespaces until an operator opens it up. */
export const SETTING_DEFAULTS: Readonly<Record<SettingName, string>> = {
  "namespace-creation": "operators",
  "max-namespaces-per-wallet": "10",
  "auto-update": "off",
  "update-channel": "stable",
  "update-window": "",
  "release-repo": ""
}

export type NamespaceCreation = "operators" | "allowlist" | "open"

const NAMESPACES_PER_WALLET_MAX = 10000

const namespaceCreation = Schema.Literal("operators", "allowlist", "open").annotations({
  message: () => ({ message: "namespace-creation is operators, allowlist or open", override: true }),
  description: "who may create namespaces: operators, allowlist (operators and the creators allowlist) or open"
})

/**
 * Spec §4.9 says "integer 1 to 10000": a JSON integer is the value itself; the digit string the
 * route took first is kept (no sign, no leading zero), so both spellings of one number store alike.
 */
const namespacesPerWallet = Schema.transform(
  Schema.Union(
    Schema.Int.pipe(Schema.between(1, NAMESPACES_PER_WALLET_MAX)),
    Schema.String.pipe(Schema.pattern(/^(?:10000|[1-9][0-9]{0,3})$/))
  ),
  Schema.String,
  { strict: true, decode: (value) => String(value), encode: (text) => text }
).annotations({
  message: () => ({ message: "max-namespaces-per-wallet is an integer from 1 to 10000 (a JSON integer, or its decimal digits as a string)", override: true }),
  description: "namespaces one wallet may own, 1 to 10000: a JSON integer, or the same number as decimal digits (no sign, no leading zero)"
})

const autoUpdate = Schema.Literal("off", "notify", "auto").annotations({
  message: () => ({ message: "auto-update is off, notify or auto", override: true }),
  description: "off, notify or auto; stored for the updater (this gateway does not update itself)"
})

const updateChannel = Schema.String.pipe(Schema.pattern(/^[a-z0-9-]{1,32}$/)).annotations({
  message: () => ({ message: "update-channel is 1-32 characters of a-z, 0-9 and -", override: true }),
  description: "1-32 characters of a-z, 0-9 and -"
})

const hours = /^(?:([01][0-9]|2[0-3])-([01][0-9]|2[0-3]))?$/

/** A pattern states the form; that the two hours differ is a filter, which the description says (the jsonSchema annotation replaces the description, so it holds it). */
const updateWindow = Schema.String.pipe(
  Schema.pattern(hours),
  Schema.filter((value) => {
    const m = hours.exec(value)
    return m !== null && (value === "" || m[1] !== m[2])
  })
).annotations({
  message: () => ({ message: "update-window is HH-HH (two different UTC hours 00-23) or empty", override: true }),
  jsonSchema: { type: "string", pattern: hours.source, description: "HH-HH, two different UTC hours 00-23 (22-04 wraps midnight), or empty for none" }
})

const isHttpsUrl = (value: string): boolean => {
  // the URL parser would take a space or a control character and encode it: written so, the
  // value is not the URL it is stored as, so it is refused
  if (/[\s\u0000-\u001f\u007f]/.test(value)) return false
  try {
    const url = new URL(value)
    return url.protocol === "https:" && url.hostname.length > 0 && url.username === "" && url.password === ""
  } catch {
    return false
  }
}

const releaseRepo = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter((value) => value === "" || isHttpsUrl(value))
).annotations({
  message: () => ({ message: "release-repo is an https URL (no credentials, at most 2048 characters) or empty", override: true }),
  jsonSchema: {
    type: "string",
    maxLength: 2048,
    anyOf: [{ const: "" }, { format: "uri", pattern: "^https://" }],
    description: "an https URL without credentials, at most 2048 characters, or empty"
  }
})

/** Each setting's value: its wire forms, decoded to the text the registry stores. */
export const SETTING_VALUES = {
  "namespace-creation": namespaceCreation,
  "max-namespaces-per-wallet": namespacesPerWallet,
  "auto-update": autoUpdate,
  "update-channel": updateChannel,
  "update-window": updateWindow,
  "release-repo": releaseRepo
} as const satisfies Record<SettingName, Schema.Schema.AnyNoContext>

/** Why `value` is unusable for `name`, or undefined when it may be stored (as given). */
export const settingRefusal = (name: SettingName, value: string): string | undefined =>
  Either.match(Schema.decodeUnknownEither(SETTING_VALUES[name] as Schema.Schema.AnyNoContext)(value), {
    onLeft: (error) => ParseResult.TreeFormatter.formatErrorSync(error),
    onRight: () => undefined
  })
