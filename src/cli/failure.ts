/**
 * Runs a command's Effect and turns its failure into one line for the terminal: a usage mistake,
 * a typed error's own reason, or a plain sentence for the failures an operator can fix.
 */
import { Cause, Effect, Exit, Schema } from "effect"
import { CliError } from "./Cli.js"

/** A mistake in the command line, reported with exit code 2. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/**
 * A root secret that cannot open what the registry holds sealed (AES-GCM refuses the tag): the
 * gateway was given another secret than the one the registry was created under.
 */
export const wrongSecretMessage =
  "the root secret does not open this registry's sealed data: PORTICO_SECRET must be the cluster's root secret " +
  "(the one the registry was created with; unset, the data dir's secret.key is used)"

const field = (value: unknown, name: string): string | undefined =>
  typeof value === "object" && value !== null && name in value ? String((value as Record<string, unknown>)[name]) : undefined

/** One line describing a command's failure (without the `portico:` prefix). */
export const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  const error: unknown = failure._tag === "Some" ? failure.value : Cause.squash(cause)
  const tag = field(error, "_tag")
  const detail = field(error, "detail")
  if (tag === "SealError" && detail !== undefined && /unable to authenticate|unknown seal version|too short/.test(detail)) {
    return wrongSecretMessage
  }
  if (tag === "SealError" && detail !== undefined) return `root secret: ${detail}`
  // Our typed errors carry the reason in `detail` (a store that cannot open, a Redis with no
  // eviction policy); an Error's own message otherwise.
  if (detail !== undefined) return `${tag ?? "error"}: ${detail}`
  const message = error instanceof Error ? error.message : field(error, "message")
  return (message ?? String(error)).split("\n")[0] ?? "failed"
}

/** Runs the program; a failure becomes a CliError (exit 2 for UsageError, else 1). */
export const runCommand = async <A, E>(program: Effect.Effect<A, E>): Promise<A> => {
  const exit = await Effect.runPromiseExit(program)
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "Some" && failure.value instanceof UsageError) throw new CliError(failure.value.message, 2)
  const squashed = Cause.squash(exit.cause)
  if (squashed instanceof CliError) throw squashed
  throw new CliError(describeFailure(exit.cause), 1)
}
