/**
 * The `portico` command: finds the command named by the first words, parses its options with
 * `node:util` parseArgs and runs it. `portico --help` lists the commands (src/cli/commands.ts);
 * `portico <command> --help` shows one. Failures print one line, `portico: <what is wrong>`, and
 * exit 2 for a usage mistake, 1 otherwise.
 *
 * Only the command table is imported up front; a command's body (and Effect, the services, the
 * HTTP stack) loads when it runs, so help and argument errors answer at once.
 */
import { CliError, type Command, commandHelp, parseCommand, usageError } from "./cli/Cli.js"
import { commands } from "./cli/commands.js"

const helpWords = new Set(["--help", "-h", "help"])

const listing = (list: ReadonlyArray<Command>): Array<string> => {
  const width = Math.max(...list.map((c) => c.words.join(" ").length))
  return list.map((c) => `  portico ${c.words.join(" ").padEnd(width)}  ${c.summary}`)
}

const overview = (): string =>
  ["usage: portico <command> [options]", "", "commands:", ...listing(commands), "", "`portico <command> --help` shows a command's options."].join("\n") + "\n"

const groupHelp = (group: string, list: ReadonlyArray<Command>): string =>
  [`usage: portico ${group} <${list.map((c) => c.words[1]).join("|")}> [options]`, "", ...listing(list), "", `\`portico ${group} <command> --help\` shows a command's options.`].join("\n") + "\n"

const find = (words: ReadonlyArray<string>): Command | undefined => commands.find((c) => c.words.every((w, i) => words[i] === w))

const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  const first = argv[0]
  if (first === undefined) {
    process.stderr.write(overview())
    return 2
  }
  if (helpWords.has(first)) {
    // `portico help`, `portico help keys create`, `portico --help keys`
    const rest = argv.slice(1)
    const target = find(rest)
    const group = commands.filter((c) => c.words.length > 1 && c.words[0] === rest[0])
    process.stdout.write(target !== undefined ? commandHelp(target) : group.length > 0 ? groupHelp(rest[0] ?? "", group) : overview())
    return 0
  }
  const command = find(argv)
  if (command === undefined) {
    const group = commands.filter((c) => c.words.length > 1 && c.words[0] === first)
    if (group.length === 0) throw usageError(`unknown command ${JSON.stringify(first)} (see portico --help)`)
    const sub = argv[1]
    if (sub !== undefined && helpWords.has(sub)) {
      process.stdout.write(groupHelp(first, group))
      return 0
    }
    if (sub === undefined || sub.startsWith("-")) throw usageError(`${first} needs a command: ${group.map((c) => c.words[1]).join(", ")} (see portico ${first} --help)`)
    throw usageError(`unknown command ${JSON.stringify(`${first} ${sub}`)} (see portico ${first} --help)`)
  }
  const parsed = parseCommand(command, argv.slice(command.words.length))
  if (parsed === "help") {
    process.stdout.write(commandHelp(command))
    return 0
  }
  await command.run(parsed)
  return 0
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof CliError) {
      process.stderr.write(`portico: ${error.message}\n`)
      return process.exit(error.exitCode)
    }
    process.stderr.write(`portico: failed: ${error instanceof Error ? error.message : String(error)}\n`)
    return process.exit(1)
  }
)
