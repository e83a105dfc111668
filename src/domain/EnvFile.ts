/**
 * `portico deploy --env-file F` and `--env K=V` (spec §4.8): the file format, the flag's split,
 * and how the two merge. The result is then checked like every other environment (DeploymentEnv.ts).
 * Pure and client-safe.
 */
import { Either } from "effect"
import { type DeploymentFieldInvalid, invalid } from "./DeploymentRules.js"
import { envName, type Environment } from "./DeploymentEnv.js"

/**
 * The env-file format, exactly as §4.8 has it: one `KEY=VALUE` a line, split on the first `=`;
 * blank lines and lines whose first non-blank character is `#` skipped; one layer of matching
 * quotes (`"…"` or `'…'`) around the whole value removed; nothing expanded (`$VAR`, `\n` and
 * `#` inside a value are kept as written). A line may end in CRLF. Spaces around the key are
 * dropped; the value is kept as written. A later line for the same key replaces an earlier one.
 * A line without `=` or with a bad key is refused naming its line number.
 */
export const parseEnvFile = (text: string, field = "env-file"): Either.Either<Environment, DeploymentFieldInvalid> => {
  const entries = new Map<string, string>()
  const lines = text.split("\n")
  for (const [index, raw] of lines.entries()) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
    const trimmed = line.trim()
    if (trimmed === "" || trimmed.startsWith("#")) continue
    const equals = line.indexOf("=")
    if (equals < 0) return invalid(`${field}:${index + 1}`, "a line is KEY=VALUE")
    const key = envName(`${field}:${index + 1}`, line.slice(0, equals).trim())
    if (Either.isLeft(key)) return Either.left(key.left)
    entries.set(key.right, unquote(line.slice(equals + 1)))
  }
  return Either.right(Object.fromEntries(entries))
}

/** One layer of matching quotes around the whole value, and only that. */
const unquote = (value: string): string => {
  if (value.length >= 2) {
    const first = value[0]
    if ((first === '"' || first === "'") && value.endsWith(first)) return value.slice(1, -1)
  }
  return value
}

/** One `--env KEY=VALUE`: split on the first `=` only; the value as the shell passed it (no unquoting). */
export const parseEnvFlag = (text: string): Either.Either<readonly [string, string], DeploymentFieldInvalid> => {
  const equals = text.indexOf("=")
  if (equals < 0) return invalid("--env", `'${text.slice(0, 64)}' is not KEY=VALUE`)
  const key = envName("--env", text.slice(0, equals))
  if (Either.isLeft(key)) return Either.left(key.left)
  return Either.right([key.right, text.slice(equals + 1)] as const)
}

/** The environment of a first deploy: the file's variables, each `--env` replacing the same name (a later flag wins). */
export const mergeDeployEnv = (fileText: string | undefined, flags: ReadonlyArray<string>): Either.Either<Environment, DeploymentFieldInvalid> => {
  const fromFile = fileText === undefined ? Either.right({}) : parseEnvFile(fileText)
  if (Either.isLeft(fromFile)) return Either.left(fromFile.left)
  const merged = new Map(Object.entries(fromFile.right))
  for (const flag of flags) {
    const parsed = parseEnvFlag(flag)
    if (Either.isLeft(parsed)) return Either.left(parsed.left)
    merged.set(parsed.right[0], parsed.right[1])
  }
  return Either.right(Object.fromEntries(merged))
}
