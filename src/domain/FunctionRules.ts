/**
 * Functions' rules on names and settings (docs/functions.md). Client-safe.
 */
import { parseCron } from "./Cron.js"
import { isTopic, TOPIC_RULE } from "./PubSubRules.js"

/** A function's name: lowercase letters, digits and `-`, starting with a letter, 1-63 characters. */
export const FUNCTION_NAME = /^[a-z][a-z0-9-]{0,62}$/
export const FUNCTION_NAME_RULE = "1-63 lowercase letters, digits and -, starting with a letter"

/** `<name>` or `<name>@<version>` in an invoke path. */
export const parseTarget = (text: string): { readonly name: string; readonly version: number | undefined } | undefined => {
  const at = text.indexOf("@")
  const name = at < 0 ? text : text.slice(0, at)
  if (!FUNCTION_NAME.test(name)) return undefined
  if (at < 0) return { name, version: undefined }
  const digits = text.slice(at + 1)
  if (!/^[1-9]\d{0,8}$/.test(digits)) return undefined
  return { name, version: Number(digits) }
}

export const MEMORY_MB = { min: 1, max: 256, default: 64 } as const
export const TIMEOUT_SECONDS = { min: 1, max: 60, default: 30 } as const

/** Environment variables and secrets: names as a shell's, values text. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/
export const ENV_MAX_ENTRIES = 128
export const ENV_MAX_BYTES = 64 * 1024
export const SECRET_MAX_BYTES = 64 * 1024
export const SECRETS_MAX = 64

/** Schedules per function. */
export const SCHEDULES_MAX = 10

/** What is wrong with a list of schedules, or undefined (each a cron expression, src/domain/Cron.ts). */
export const schedulesProblem = (schedules: ReadonlyArray<unknown>): string | undefined => {
  if (schedules.length > SCHEDULES_MAX) return `at most ${SCHEDULES_MAX} schedules`
  for (const schedule of schedules) {
    if (typeof schedule !== "string") return "each schedule is a cron expression in a string"
    const parsed = parseCron(schedule)
    if (typeof parsed === "string") return `${JSON.stringify(schedule.slice(0, 80))}: ${parsed}`
  }
  return undefined
}

/** Topics per function. */
export const TOPICS_MAX = 10

/** What is wrong with a list of trigger topics, or undefined (exact topics; `_portico/` ones may be read). */
export const topicsProblem = (topics: ReadonlyArray<unknown>): string | undefined => {
  if (topics.length > TOPICS_MAX) return `at most ${TOPICS_MAX} topics`
  for (const topic of topics) {
    if (typeof topic !== "string" || !isTopic(topic)) return `${JSON.stringify(String(topic).slice(0, 80))}: a topic is ${TOPIC_RULE}`
  }
  return undefined
}

/** What is wrong with an environment, or undefined. */
export const envProblem = (env: Readonly<Record<string, unknown>>): string | undefined => {
  const entries = Object.entries(env)
  if (entries.length > ENV_MAX_ENTRIES) return `at most ${ENV_MAX_ENTRIES} variables`
  let bytes = 0
  for (const [name, value] of entries) {
    if (!ENV_NAME.test(name)) return `variable ${JSON.stringify(name.slice(0, 64))}: names are letters, digits and _, not starting with a digit, at most 128`
    if (typeof value !== "string") return `variable ${name}: values are strings`
    bytes += name.length + new TextEncoder().encode(value).length
  }
  if (bytes > ENV_MAX_BYTES) return `at most ${ENV_MAX_BYTES} bytes of names and values`
  return undefined
}
