/**
 * What the commands that talk to a running gateway share: where it is and which credential to
 * send (`--url`/PORTICO_URL, `--token`/PORTICO_TOKEN), a call through the typed client
 * (`withPortico`), and a failed call turned into one line: the gateway's own `{error, code,
 * hint}` for a refusal, a plain sentence for a gateway that cannot be reached or does not answer
 * as Portico does.
 */
import { Effect, Either } from "effect"
import { type Client, withPortico } from "../client.js"
import { CliError, type Parsed, stringOption, usageError } from "./Cli.js"
import { DEFAULT_URL } from "./login.js"


export interface GatewayTarget {
  readonly url: URL
  readonly token: string
}

/**
 * The gateway and credential of a command line; a usage error when either is missing or
 * malformed, naming `command` when it has no credential.
 */
export const gatewayTarget = (
  parsed: Parsed,
  env: Readonly<Record<string, string | undefined>> = process.env,
  command = "this command"
): GatewayTarget => {
  const rawUrl = stringOption(parsed, "url") ?? env["PORTICO_URL"] ?? DEFAULT_URL
  let url: URL
  try {
    url = new URL(rawUrl)
  } catch {
    throw usageError(`--url must be an http(s) URL such as ${DEFAULT_URL}, not ${JSON.stringify(rawUrl)}`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw usageError(`--url must be an http(s) URL such as ${DEFAULT_URL}`)
  const token = stringOption(parsed, "token") ?? env["PORTICO_TOKEN"]
  if (token === undefined || token === "") {
    throw usageError(`${command} needs a credential: --token T or PORTICO_TOKEN (an admin API key, or a developer's access token from \`portico login\`)`)
  }
  return { url, token }
}

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null && name in value ? (value as Record<string, unknown>)[name] : undefined

/** The gateway's refusal envelope, when the failure is one. */
export const refusalOf = (error: unknown): { readonly error: string; readonly code: string; readonly hint: string | undefined } | undefined => {
  const code = field(error, "code")
  const message = field(error, "error")
  if (typeof code !== "string" || typeof message !== "string") return undefined
  const hint = field(error, "hint")
  return { error: message, code, hint: typeof hint === "string" && hint !== "" ? hint : undefined }
}

/**
 * One line for a failed call: `the gateway refused <what>: <error> (<CODE>): <hint>`, or why no
 * answer came. `hintFor` may put the command to type in place of the gateway's hint for a code.
 */
export const describeFailure = (error: unknown, base: URL, what: string, hintFor: (code: string) => string | undefined = () => undefined): string => {
  const refusal = refusalOf(error)
  if (refusal !== undefined) {
    const hint = hintFor(refusal.code) ?? refusal.hint
    return `the gateway refused ${what}: ${refusal.error} (${refusal.code})${hint === undefined ? "" : `: ${hint}`}`
  }
  const tag = field(error, "_tag")
  if (tag === "RequestError") {
    const cause = field(error, "cause")
    const reason = cause instanceof Error && cause.cause instanceof Error ? cause.cause.message : cause instanceof Error ? cause.message : String(cause)
    return `cannot reach the gateway at ${base.origin} (${reason}): is it running (npm start)? Set --url or PORTICO_URL`
  }
  if (tag === "ResponseError") {
    const status = field(field(error, "response"), "status")
    return `the gateway answered ${String(status)} with a body this command does not know (is ${base.origin} a Portico gateway?)`
  }
  if (tag === "ParseError") return `the gateway's answer did not match its schema (is the CLI older than the gateway?)`
  const text = error instanceof Error ? error.message : String(field(error, "message") ?? error)
  return `${what} failed: ${text.split("\n")[0] ?? "unknown error"}`
}

/** Runs one call through the typed client; its failure is the answer as a value. */
export const tryGateway = <A, E>(target: GatewayTarget, use: (client: Client) => Effect.Effect<A, E>): Promise<Either.Either<A, E>> =>
  Effect.runPromise(Effect.either(withPortico({ baseUrl: target.url, token: target.token }, use)))

/** Runs one call through the typed client; a failure is a CliError (exit 1) of one line. */
export const callGateway = async <A, E>(
  target: GatewayTarget,
  what: string,
  use: (client: Client) => Effect.Effect<A, E>,
  hintFor?: (code: string) => string | undefined
): Promise<A> => {
  const result = await tryGateway(target, use)
  if (Either.isLeft(result)) throw new CliError(describeFailure(result.left, target.url, what, hintFor))
  return result.right
}
