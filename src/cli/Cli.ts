/**
 * The `portico` command's frame: a command is words, options for `node:util` parseArgs, usage
 * text and a lazily imported body. This module imports no Effect and no service, so `--help`
 * and argument errors answer without loading the gateway.
 */
import { parseArgs, type ParseArgsConfig } from "node:util"

/** A failure to report in one line; exit code 2 for a usage mistake, 1 otherwise. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1
  ) {
    super(message)
  }
}

export const usageError = (message: string): CliError => new CliError(message, 2)

export type Options = NonNullable<ParseArgsConfig["options"]>

export interface Parsed {
  readonly values: Readonly<Record<string, string | boolean | undefined>>
  readonly positionals: ReadonlyArray<string>
}

export interface Command {
  /** The words that select it, e.g. ["keys", "create"]. */
  readonly words: ReadonlyArray<string>
  /** One line for the command list. */
  readonly summary: string
  /** The synopsis after `portico <words>`, e.g. "NAME [--owner WALLET]". */
  readonly synopsis: string
  /** Options and arguments shown by `--help`: [what to type, what it means]. */
  readonly details: ReadonlyArray<readonly [string, string]>
  /** Lines after the option list. */
  readonly notes?: ReadonlyArray<string>
  readonly options: Options
  /** How many positionals it takes at most. */
  readonly maxPositionals: number
  readonly run: (parsed: Parsed) => Promise<void>
}

export const commandName = (command: Command): string => `portico ${command.words.join(" ")}`

export const commandHelp = (command: Command): string => {
  const rows: ReadonlyArray<readonly [string, string]> = [...command.details, ["-h, --help", "show this help"]]
  const width = Math.max(...rows.map(([flag]) => flag.length))
  return (
    [
      `usage: ${commandName(command)} ${command.synopsis}`.trimEnd(),
      "",
      command.summary,
      "",
      ...rows.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`),
      ...(command.notes === undefined ? [] : ["", ...command.notes])
    ].join("\n") + "\n"
  )
}

/** Option value strings for the user: `--owner`, `-h`. */
const optionLabel = (text: string): string => {
  const match = /'(-[-\w]*)/.exec(text)
  return match?.[1] ?? "an option"
}

/**
 * Parses a command's arguments strictly; parseArgs's own messages are long and mention internals,
 * so each kind of mistake gets one plain sentence.
 */
export const parseCommand = (command: Command, args: ReadonlyArray<string>): Parsed | "help" => {
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args: [...args],
      options: { ...command.options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true
    })
  } catch (error) {
    const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
    const text = error instanceof Error ? error.message : String(error)
    const see = `(see ${commandName(command)} --help)`
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw usageError(`unknown option ${optionLabel(text)} ${see}`)
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      // "argument missing" (last word) and "argument is ambiguous" (followed by another option)
      // both mean the value was left out.
      const option = /--[\w-]+/.exec(text)?.[0] ?? "an option"
      throw usageError(/argument (missing|is ambiguous)/.test(text) ? `${option} needs a value ${see}` : `${option} takes no value ${see}`)
    }
    throw usageError(`${text} ${see}`)
  }
  if (parsed.values["help"] === true) return "help"
  if (parsed.positionals.length > command.maxPositionals) {
    throw usageError(`unexpected argument ${parsed.positionals[command.maxPositionals]} (see ${commandName(command)} --help)`)
  }
  return { values: parsed.values as Parsed["values"], positionals: parsed.positionals }
}

/** A string option's value, or undefined. */
export const stringOption = (parsed: Parsed, name: string): string | undefined => {
  const value = parsed.values[name]
  return typeof value === "string" ? value : undefined
}

/** A whole number option (>= 0), or undefined when absent. */
export const wholeNumberOption = (parsed: Parsed, name: string): number | undefined => {
  const raw = stringOption(parsed, name)
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw)) throw usageError(`--${name} must be a whole number, not ${JSON.stringify(raw)}`)
  return Number(raw)
}

/** Refuses a `--print` naming no field of the answer, before the command does anything. */
export const checkPrint = (parsed: Parsed, fields: ReadonlyArray<string>): void => {
  const field = stringOption(parsed, "print")
  if (field !== undefined && !fields.includes(field.replace(/-/g, "_"))) {
    throw usageError(`--print takes one of ${fields.join(", ")}`)
  }
}

/** Writes one JSON line, or only the field `--print` names (so `sh` can capture it without jq). */
export const printResult = (parsed: Parsed, result: Readonly<Record<string, unknown>>): void => {
  const field = stringOption(parsed, "print")
  if (field === undefined) {
    process.stdout.write(JSON.stringify(result) + "\n")
    return
  }
  const key = field.replace(/-/g, "_")
  if (!(key in result)) throw usageError(`--print takes one of ${Object.keys(result).join(", ")}`)
  const value = result[key]
  process.stdout.write((typeof value === "string" ? value : JSON.stringify(value)) + "\n")
}

export const printOption: Options = { print: { type: "string" } }
export const printDetail = (fields: string): readonly [string, string] => [
  "--print FIELD",
  `print only one field of the answer (${fields}), e.g. to capture it in sh`
]
