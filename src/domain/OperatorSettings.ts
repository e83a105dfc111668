/**
 * The operator settings (spec §4.9, docs/operators.md): their names as the routes spell them,
 * their defaults, and the rule each value must meet. A value is checked here before it is stored,
 * so what the registry holds is always usable.
 */

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

const httpsUrl = (value: string): boolean => {
  if (value.length > 2048) return false
  try {
    const url = new URL(value)
    return url.protocol === "https:" && url.hostname.length > 0 && url.username === "" && url.password === ""
  } catch {
    return false
  }
}

const hour = (text: string): boolean => /^\d{2}$/.test(text) && Number(text) <= 23

/** Why `value` is unusable for `name`, or undefined when it may be stored (as given). */
export const settingRefusal = (name: SettingName, value: string): string | undefined => {
  switch (name) {
    case "namespace-creation":
      return ["operators", "allowlist", "open"].includes(value) ? undefined : "namespace-creation is operators, allowlist or open"
    case "max-namespaces-per-wallet":
      return /^[1-9]\d{0,4}$/.test(value) && Number(value) <= 10000 ? undefined : "max-namespaces-per-wallet is an integer from 1 to 10000"
    case "auto-update":
      return ["off", "notify", "auto"].includes(value) ? undefined : "auto-update is off, notify or auto"
    case "update-channel":
      return /^[a-z0-9-]{1,32}$/.test(value) ? undefined : "update-channel is 1-32 characters of a-z, 0-9 and -"
    case "update-window": {
      if (value === "") return undefined
      const m = /^(\d{2})-(\d{2})$/.exec(value)
      return m !== null && hour(m[1]!) && hour(m[2]!) && m[1] !== m[2] ? undefined : "update-window is HH-HH (two different UTC hours 00-23) or empty"
    }
    case "release-repo":
      return value === "" || httpsUrl(value) ? undefined : "release-repo is an https URL (no credentials) or empty"
  }
}
