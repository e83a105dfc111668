/**
 * `portico deploy`'s command line turned into one checked request (spec §4.8), before anything is
 * built, packed or sent: a mistake here costs no build and no upload. The name, the subdomain and
 * the environment are checked by the same rules the gateway applies (DeploymentRules.ts,
 * DeploymentEnv.ts, EnvFile.ts), so a refusal the gateway would give comes first from here.
 */
import { Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { checkEnvironment, type Environment } from "../../domain/DeploymentEnv.js"
import { checkHost, type DeploymentFieldInvalid, deploymentName, type DeploymentType, DEPLOYMENT_TYPES, isDeploymentType, subdomainOverride } from "../../domain/DeploymentRules.js"
import { mergeDeployEnv } from "../../domain/EnvFile.js"
import { type Parsed, stringOption, usageError } from "../Cli.js"
import { gatewayTarget } from "../GatewayCall.js"

export interface DeployRequest {
  /** The app's directory, absolute. */
  readonly dir: string
  readonly name: string
  /** As given by --type; undefined means detect it from the directory (AppType.ts). */
  readonly type: DeploymentType | undefined
  readonly subdomain: string | undefined
  readonly update: boolean
  /** A first deploy's environment (file merged with flags, checked); undefined when none was given. */
  readonly env: Environment | undefined
  readonly healthCheck: string | undefined
  readonly ssr: boolean
  readonly skipInstall: boolean
  readonly url: URL
  readonly token: string
}

const fieldProblem = (flag: string, error: DeploymentFieldInvalid): string => {
  // The rules name fields as the gateway's form does (`name`, `env.A`, `env-file:3`); the user
  // typed flags, so the message names the flag and keeps the rule's own field when it says more.
  const field = error.field === flag.replace(/^--/, "") ? flag : `${flag} ${error.field}`
  return `${field}: ${error.reason}`
}

/** The repeatable `--env`: parseArgs gives an array with `multiple: true`. */
const envFlags = (parsed: Parsed): ReadonlyArray<string> => {
  const value = (parsed.values as Readonly<Record<string, unknown>>)["env"]
  if (value === undefined) return []
  return Array.isArray(value) ? value.map(String) : [String(value)]
}

const flag = (parsed: Parsed, name: string): boolean => parsed.values[name] === true

/**
 * Reads and checks the command line. `env` is the process environment (PORTICO_URL,
 * PORTICO_TOKEN); `readFile` reads the --env-file (a parameter so tests give it text).
 */
export const readDeployFlags = (
  parsed: Parsed,
  env: Readonly<Record<string, string | undefined>> = process.env,
  readFile: (file: string) => string = (file) => fs.readFileSync(file, "utf8")
): DeployRequest => {
  const dirArg = parsed.positionals[0]
  if (dirArg === undefined) throw usageError("deploy needs the app's directory: portico deploy <dir> --name NAME")
  const rawName = stringOption(parsed, "name")
  if (rawName === undefined) throw usageError("deploy needs --name NAME (the deployment's name in the namespace)")
  const name = deploymentName(rawName)
  if (Either.isLeft(name)) throw usageError(fieldProblem("--name", name.left))

  const rawType = stringOption(parsed, "type")
  if (rawType !== undefined && !isDeploymentType(rawType)) throw usageError(`--type must be one of ${DEPLOYMENT_TYPES.join(", ")}`)
  const type = rawType as DeploymentType | undefined

  const update = flag(parsed, "update")
  const flags = envFlags(parsed)
  const envFile = stringOption(parsed, "env-file")
  // §4.8: the environment is given once, at the first deploy; afterwards `env/set` changes it
  // (and restarts the app), so an update carrying one would be silently ignored or surprising.
  if (update && (flags.length > 0 || envFile !== undefined)) {
    throw usageError("--env and --env-file are for a first deploy only; change a deployed app's environment with the env/set route")
  }
  const rawSubdomain = stringOption(parsed, "subdomain")
  if (update && rawSubdomain !== undefined) throw usageError("--subdomain is chosen at the first deploy; an update keeps the host")
  let subdomain: string | undefined
  if (rawSubdomain !== undefined) {
    const checked = subdomainOverride(rawSubdomain)
    if (Either.isLeft(checked)) throw usageError(fieldProblem("--subdomain", checked.left))
    subdomain = checked.right
  }
  if (!update) {
    const host = checkHost(name.right, subdomain)
    if (Either.isLeft(host)) throw usageError(`--name ${name.right}: ${host.left.reason.replace("with a subdomain", "with --subdomain")}`)
  }

  let fileText: string | undefined
  if (envFile !== undefined) {
    try {
      fileText = readFile(envFile)
    } catch (error) {
      throw usageError(`--env-file ${envFile}: ${error instanceof Error ? error.message.replace(/^[A-Z]+: /, "") : String(error)}`)
    }
  }
  let environment: Environment | undefined
  if (fileText !== undefined || flags.length > 0) {
    const merged = mergeDeployEnv(fileText, flags)
    if (Either.isLeft(merged)) throw usageError(merged.left.message)
    const checked = checkEnvironment(merged.right)
    if (Either.isLeft(checked)) throw usageError(`environment: ${checked.left.message}`)
    environment = checked.right
  }

  const healthCheck = stringOption(parsed, "health-check")
  if (healthCheck !== undefined && !/^\/[\x21-\x7e]*$/.test(healthCheck)) {
    throw usageError("--health-check is a path on the app, starting with '/' (e.g. /health)")
  }
  const ssr = flag(parsed, "ssr")
  const skipInstall = flag(parsed, "skip-install")
  // Flags that cannot apply to an explicit type are refused here; with a detected type the same
  // check runs once the type is known (checkTypeFlags).
  if (type !== undefined) checkTypeFlags(type, { ssr, skipInstall, healthCheck })

  const { url, token } = gatewayTarget(parsed, env, "deploy")

  return {
    dir: path.resolve(dirArg),
    name: name.right,
    type,
    subdomain,
    update,
    env: environment,
    healthCheck,
    ssr,
    skipInstall,
    url,
    token
  }
}

/** The flags that only some types take: --ssr (nextjs), --skip-install (nodejs), --health-check (not static). */
export const checkTypeFlags = (
  type: DeploymentType,
  flags: { readonly ssr: boolean; readonly skipInstall: boolean; readonly healthCheck: string | undefined }
): void => {
  if (flags.ssr && type !== "nextjs") throw usageError(`--ssr is for Next.js apps; this one deploys as ${type}`)
  if (flags.skipInstall && type !== "nodejs") throw usageError(`--skip-install is for Node.js apps; this one deploys as ${type}`)
  if (flags.healthCheck !== undefined && type === "static") throw usageError("--health-check is for apps that run a process; a static site has none")
}
