/**
 * `portico functions deploy|list|invoke|logs|delete` (docs/functions.md) through the typed client.
 * `deploy` takes a built module (`.wasm`) or a Go function's directory, which it builds here with
 * GOOS=wasip1 GOARCH=wasm; progress goes to stderr, the result to stdout; a refusal is the
 * gateway's `{error, code, hint}` in one line, exit 1; a mistake on the command line is exit 2
 * before anything is built or sent.
 */
import { Either, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Cursor, PAGE_LIMIT, TextKey } from "../api/Paging.js"
import { mergeDeployEnv } from "../domain/EnvFile.js"
import { envProblem, FUNCTION_NAME, FUNCTION_NAME_RULE, MEMORY_MB, TIMEOUT_SECONDS } from "../domain/FunctionRules.js"
import { CliError, type Parsed, stringOption, usageError, wholeNumberOption } from "./Cli.js"
import { goBuild } from "./deploy/ClientBuilds.js"
import { formatBytes } from "./deploy/Progress.js"
import { callGateway, gatewayTarget, type GatewayTarget } from "./GatewayCall.js"

const json = (parsed: Parsed): boolean => parsed.values["json"] === true

const print = (parsed: Parsed, answer: unknown, lines: () => ReadonlyArray<string>): void => {
  const text = json(parsed) ? [JSON.stringify(answer)] : lines()
  if (text.length > 0) process.stdout.write(text.join("\n") + "\n")
}

const nameOf = (raw: string | undefined, command: string): string => {
  if (raw === undefined) throw usageError(`functions ${command} needs the function's name: portico functions ${command} NAME`)
  if (!FUNCTION_NAME.test(raw)) throw usageError(`NAME: ${FUNCTION_NAME_RULE}`)
  return raw
}

const bounded = (parsed: Parsed, option: string, range: { readonly min: number; readonly max: number }): number | undefined => {
  const value = wholeNumberOption(parsed, option)
  if (value !== undefined && (value < range.min || value > range.max)) throw usageError(`--${option} must be from ${range.min} to ${range.max}`)
  return value
}

interface FunctionLine {
  readonly name: string
  readonly version: number
  readonly memory_limit_mb: number
  readonly timeout_seconds: number
  readonly is_public: boolean
}
const functionLine = (f: FunctionLine): string =>
  `${f.name} version ${f.version} (${f.memory_limit_mb} MB, ${f.timeout_seconds} s${f.is_public ? ", public" : ""})`

/** The module's bytes: the file as it is, or a Go function's directory built for wasip1 into a temporary file. */
const moduleOf = async (source: string): Promise<Uint8Array> => {
  let stat: fs.Stats
  try {
    stat = fs.statSync(source)
  } catch {
    throw usageError(`${source} does not exist`)
  }
  if (stat.isFile()) return fs.readFileSync(source)
  if (!fs.existsSync(path.join(source, "go.mod"))) {
    throw usageError(`${source} is a directory without go.mod: give a built .wasm file, or a Go function's directory`)
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "portico-function-"))
  try {
    const out = path.join(work, "function.wasm")
    await goBuild(source, out, { GOOS: "wasip1", GOARCH: "wasm", CGO_ENABLED: "0" }, "GOOS=wasip1 GOARCH=wasm", "install Go 1.24 or later, or put it on PATH")
    if (!fs.existsSync(out)) throw new CliError("go build wrote no module (is the root package `main`?)")
    return fs.readFileSync(out)
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
}

export const deploy = async (parsed: Parsed): Promise<void> => {
  const source = parsed.positionals[0]
  if (source === undefined) throw usageError("functions deploy needs a module or a Go function's directory: portico functions deploy FILE.wasm|DIR --name NAME")
  const name = nameOf(stringOption(parsed, "name"), "deploy --name")
  const memory = bounded(parsed, "memory", MEMORY_MB)
  const timeout = bounded(parsed, "timeout", TIMEOUT_SECONDS)
  const flags = (parsed.values as Readonly<Record<string, unknown>>)["env"]
  const envList = flags === undefined ? [] : Array.isArray(flags) ? flags.map(String) : [String(flags)]
  let envVars: Readonly<Record<string, string>> | undefined
  if (envList.length > 0) {
    const merged = mergeDeployEnv(undefined, envList)
    if (Either.isLeft(merged)) throw usageError(merged.left.message)
    const problem = envProblem(merged.right)
    if (problem !== undefined) throw usageError(`--env: ${problem}`)
    envVars = merged.right
  }
  const target = gatewayTarget(parsed)

  const wasm = await moduleOf(source)
  const form = new FormData()
  form.append("name", name)
  if (memory !== undefined) form.append("memory_limit_mb", String(memory))
  if (timeout !== undefined) form.append("timeout_seconds", String(timeout))
  if (parsed.values["public"] === true) form.append("is_public", "true")
  if (parsed.values["private"] === true) form.append("is_public", "false")
  if (envVars !== undefined) form.append("metadata", JSON.stringify({ env_vars: envVars }))
  form.append("wasm", new Blob([wasm]), "function.wasm")
  process.stderr.write(`uploading ${formatBytes(wasm.byteLength)}\n`)
  const deployed = await callGateway(target, "the deploy", (client) => client.functions.deploy({ payload: form }))
  print(parsed, deployed, () => [functionLine(deployed)])
}

const nameCursor = Schema.decodeUnknownSync(Cursor(TextKey))

export const list = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const all: Array<FunctionLine> = []
  let cursor: string | null = null
  do {
    const urlParams: { limit: number; cursor?: ReturnType<typeof nameCursor> } =
      cursor === null ? { limit: PAGE_LIMIT.max } : { limit: PAGE_LIMIT.max, cursor: nameCursor(cursor) }
    const page = await callGateway(target, "the list", (client) => client.functions.list({ urlParams }))
    all.push(...page.functions)
    cursor = page.next_cursor
  } while (cursor !== null)
  print(parsed, { functions: all }, () => all.map(functionLine))
}

export const invoke = async (parsed: Parsed): Promise<void> => {
  const target: GatewayTarget = gatewayTarget(parsed)
  const name = nameOf(parsed.positionals[0], "invoke")
  const data = stringOption(parsed, "data") ?? ""
  const answer = await callGateway(target, "the invocation", (client) => client.invoke.invoke({ path: { name }, payload: data }))
  process.stdout.write(JSON.stringify(answer) + "\n")
}

export const logs = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const name = nameOf(parsed.positionals[0], "logs")
  const limit = bounded(parsed, "lines", { min: 1, max: 1000 }) ?? 100
  const page = await callGateway(target, "the logs", (client) => client.functions.logs({ path: { name }, urlParams: { limit } }))
  print(parsed, page, () => [...page.logs].reverse().map((l) => `${new Date(l.at).toISOString()} ${l.level} ${l.request_id} ${l.message}`))
}

export const remove = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const name = nameOf(parsed.positionals[0], "delete")
  const answer = await callGateway(target, "the delete", (client) => client.functions.remove({ path: { name } }))
  print(parsed, answer, () => [`deleted ${name}`])
}
