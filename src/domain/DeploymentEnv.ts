/**
 * A deployment's environment (spec §2.7, §8): which names and values are allowed, the names the
 * platform sets, how the environment is rendered for the app's process and how big that may be,
 * and a change set applied to the current environment. Pure and client-safe.
 */
import { Either } from "effect"
import { type DeploymentFieldInvalid, invalid } from "./DeploymentRules.js"

/** The names the platform sets for every app (spec §2.7, `SVC_` spelled `PORTICO_`): never set or removed by a tenant. */
export const PLATFORM_ENV_NAMES = [
  "PORT",
  "ENTRY_POINT",
  "PORTICO_ENTRYPOINT",
  "PORTICO_NAMESPACE",
  "PORTICO_GATEWAY_URL",
  "PORTICO_STATE_DIR",
  "PORTICO_CACHE_DIR",
  "PORTICO_TOKEN_FILE"
] as const
export type PlatformEnvName = (typeof PLATFORM_ENV_NAMES)[number]
const platformNames: ReadonlySet<string> = new Set(PLATFORM_ENV_NAMES)

export const isPlatformEnvName = (name: string): name is PlatformEnvName => platformNames.has(name)

/**
 * Names that make a process load or run code other than its own: the dynamic loader's (`LD_*`),
 * glibc's (`GLIBC_TUNABLES`, `GCONV_PATH`), Node's and Go's runtime switches (`NODE_OPTIONS`,
 * `GODEBUG`) and the shell's start-up file (`BASH_ENV`). The sandbox gives a tenant's environment
 * to the app alone, so these could only reach the tenant's own process; they are refused anyway,
 * so that no later change to how processes start can turn one into code run by the platform.
 */
const injectionNames: ReadonlySet<string> = new Set(["NODE_OPTIONS", "GODEBUG", "GLIBC_TUNABLES", "GCONV_PATH", "BASH_ENV"])
export const isInjectionEnvName = (name: string): boolean => name.startsWith("LD_") || injectionNames.has(name)

/** Why a tenant may not set `name` (`platform`: what to say of a platform name), or undefined when it may. */
const reservedReason = (name: string, platform: string): string | undefined =>
  isPlatformEnvName(name)
    ? platform
    : isInjectionEnvName(name)
      ? "reserved by the platform: dynamic-loader and runtime-injection variables (LD_*, NODE_OPTIONS, GODEBUG, GLIBC_TUNABLES, GCONV_PATH, BASH_ENV) cannot be set"
      : undefined

/** Spec §8: one value is at most 64 KiB of UTF-8. */
export const ENV_VALUE_MAX_BYTES = 64 * 1024
/** Spec §8: the rendered environment (platform names included) is at most 224 KiB. */
export const ENV_RENDERED_MAX_BYTES = 224 * 1024
/**
 * What the platform's own entries may take of the rendered environment. The tenant's variables are
 * checked against 224 KiB less this, so a change is accepted or refused by its own content, never
 * by the length of a path or URL the platform chooses later.
 */
export const PLATFORM_ENV_RESERVE_BYTES = 4 * 1024
/** A variable name: POSIX-ish, at most 128 characters. */
export const ENV_NAME_MAX_LENGTH = 128
const namePattern = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/

export type Environment = Readonly<Record<string, string>>

const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length
// a lone surrogate has no UTF-8 form: it would be stored or passed to the process as U+FFFD
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A variable name: `[A-Za-z_][A-Za-z0-9_]*`, 1-128 characters (what shells and `env` accept). */
export const envName = (field: string, name: unknown): Either.Either<string, DeploymentFieldInvalid> =>
  typeof name === "string" && namePattern.test(name)
    ? Either.right(name)
    : invalid(field, `a variable name is 1-${ENV_NAME_MAX_LENGTH} characters of A-Z, a-z, 0-9 and '_', not starting with a digit`)

/** A value: a string, valid UTF-8 (no lone surrogate), no NUL, at most 64 KiB. */
export const envValue = (field: string, value: unknown): Either.Either<string, DeploymentFieldInvalid> => {
  if (typeof value !== "string") return invalid(field, "a value is a string")
  if (value.includes("\u0000")) return invalid(field, "a value may not contain NUL")
  if (loneSurrogate.test(value)) return invalid(field, "a value must be valid UTF-8")
  if (utf8Bytes(value) > ENV_VALUE_MAX_BYTES) return invalid(field, `a value is at most ${ENV_VALUE_MAX_BYTES} bytes`)
  return Either.right(value)
}

/**
 * The rendered environment: `NAME=value` entries each ended by NUL, sorted by name. That is the
 * form the process receives (execve's envp, `/proc/<pid>/environ`), the only one that carries
 * any value unchanged: values may hold newlines and quotes but never NUL.
 */
export const renderEnvironment = (env: Environment): Uint8Array =>
  new TextEncoder().encode(
    Object.keys(env)
      .sort()
      .map((name) => `${name}=${env[name]}\u0000`)
      .join("")
  )

/** The rendered size of `env` in bytes, without building it. */
export const renderedBytes = (env: Environment): number => {
  let total = 0
  for (const [name, value] of Object.entries(env)) total += utf8Bytes(name) + 1 + utf8Bytes(value) + 1
  return total
}

/** A rendered environment read back (the inverse of renderEnvironment). */
export const parseRenderedEnvironment = (bytes: Uint8Array): Environment => {
  const entries: Array<[string, string]> = []
  for (const entry of new TextDecoder().decode(bytes).split("\u0000")) {
    const equals = entry.indexOf("=")
    if (equals > 0) entries.push([entry.slice(0, equals), entry.slice(equals + 1)])
  }
  return Object.fromEntries(entries)
}

/** A tenant environment whole (names, values, no platform name, size): 400 naming the first bad field. */
export const checkEnvironment = (env: Environment, field = "env"): Either.Either<Environment, DeploymentFieldInvalid> => {
  for (const [name, value] of Object.entries(env)) {
    const checkedName = envName(`${field}.${name}`, name)
    if (Either.isLeft(checkedName)) return Either.left(checkedName.left)
    const reserved = reservedReason(name, "set by the platform; it cannot be set or removed")
    if (reserved !== undefined) return invalid(`${field}.${name}`, reserved)
    const checkedValue = envValue(`${field}.${name}`, value)
    if (Either.isLeft(checkedValue)) return Either.left(checkedValue.left)
  }
  const size = renderedBytes(env)
  const room = ENV_RENDERED_MAX_BYTES - PLATFORM_ENV_RESERVE_BYTES
  if (size > room) return invalid(field, `the environment renders to ${size} bytes; at most ${room} (${ENV_RENDERED_MAX_BYTES} with the platform's own)`)
  return Either.right(env)
}

/**
 * The environment the process starts with: the tenant's variables and the platform's. The
 * platform's entries must fit their reserve; a tenant entry with a platform name cannot reach here
 * (checkEnvironment refuses it) and would lose to the platform's anyway.
 */
export const processEnvironment = (tenant: Environment, platform: Partial<Record<PlatformEnvName, string>>): Either.Either<Environment, DeploymentFieldInvalid> => {
  const own: Environment = Object.fromEntries(Object.entries(platform).filter((entry): entry is [string, string] => entry[1] !== undefined))
  if (renderedBytes(own) > PLATFORM_ENV_RESERVE_BYTES) return invalid("platform", `the platform's variables exceed their ${PLATFORM_ENV_RESERVE_BYTES}-byte reserve`)
  return Either.right({ ...tenant, ...own })
}

/** `env/set`: variables to set (or replace) and names to remove. */
export interface EnvChange {
  readonly set?: Readonly<Record<string, unknown>>
  readonly unset?: ReadonlyArray<unknown>
}

export interface AppliedEnvChange {
  readonly env: Environment
  /** False when the change leaves the environment as it was (the caller need not restart the app). */
  readonly changed: boolean
}

/**
 * A change set applied to the current environment, every rule checked first so a refusal leaves
 * nothing changed: valid names and values, no platform name set or unset, no name both set and
 * unset, the result within the rendered cap. Unsetting an absent name is no change (so a retried
 * request gives the same answer).
 */
export const applyEnvChange = (current: Environment, change: EnvChange): Either.Either<AppliedEnvChange, DeploymentFieldInvalid> => {
  const set = change.set ?? {}
  const unset = change.unset ?? []
  // a Map, so a name such as `__proto__` is a variable like any other, not the object's prototype
  const next = new Map(Object.entries(current))
  let changed = false
  for (const [name, value] of Object.entries(set)) {
    const field = `set.${name}`
    const checkedName = envName(field, name)
    if (Either.isLeft(checkedName)) return Either.left(checkedName.left)
    const reserved = reservedReason(name, "set by the platform; it cannot be set")
    if (reserved !== undefined) return invalid(field, reserved)
    const checkedValue = envValue(field, value)
    if (Either.isLeft(checkedValue)) return Either.left(checkedValue.left)
    if (next.get(name) !== checkedValue.right) changed = true
    next.set(name, checkedValue.right)
  }
  for (const [index, name] of unset.entries()) {
    const checkedName = envName(`unset[${index}]`, name)
    if (Either.isLeft(checkedName)) return Either.left(checkedName.left)
    const field = `unset.${checkedName.right}`
    if (isPlatformEnvName(checkedName.right)) return invalid(field, "set by the platform; it cannot be removed")
    if (Object.hasOwn(set, checkedName.right)) return invalid(field, "both set and unset in one change")
    if (next.delete(checkedName.right)) changed = true
  }
  const env: Environment = Object.fromEntries(next)
  const size = renderedBytes(env)
  const room = ENV_RENDERED_MAX_BYTES - PLATFORM_ENV_RESERVE_BYTES
  if (size > room) return invalid("set", `the environment would render to ${size} bytes; at most ${room} (${ENV_RENDERED_MAX_BYTES} with the platform's own)`)
  return Either.right({ env, changed })
}
