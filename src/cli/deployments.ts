/**
 * `portico deployments list|get|logs|env|versions|rollback|delete|domains`: a deployment's
 * management routes (docs/deployments.md, "Routes") through the typed client, for what `portico
 * deploy` leaves to do afterwards. Each prints lines for a person, or with `--json` the route's
 * answer as one JSON line; a refusal is the gateway's `{error, code, hint}` in one line, exit 1.
 */
import { Either, Schema } from "effect"
import * as fs from "node:fs"
import type { DeploymentList } from "../api/groups/DeploymentsGroup.js"
import { Cursor, PAGE_LIMIT, TextKey } from "../api/Paging.js"
import { checkEnvironment } from "../domain/DeploymentEnv.js"
import { deploymentName } from "../domain/DeploymentRules.js"
import { mergeDeployEnv } from "../domain/EnvFile.js"
import { type Parsed, stringOption, usageError, wholeNumberOption } from "./Cli.js"
import { deployedLine } from "./deploy/deploy.js"
import { callGateway, gatewayTarget, type GatewayTarget } from "./GatewayCall.js"

const json = (parsed: Parsed): boolean => parsed.values["json"] === true

const print = (lines: ReadonlyArray<string>): void => {
  if (lines.length > 0) process.stdout.write(lines.join("\n") + "\n")
}

/** The deployment named by the first argument, checked by the gateway's own rule. */
const nameOf = (parsed: Parsed, command: string): string => {
  const raw = parsed.positionals[0]
  if (raw === undefined) throw usageError(`deployments ${command} needs the deployment's name: portico deployments ${command} NAME`)
  const name = deploymentName(raw)
  if (Either.isLeft(name)) throw usageError(`NAME: ${name.left.reason}`)
  return name.right
}

/** The repeatable options parseArgs gives as an array (`multiple: true`). */
const many = (parsed: Parsed, option: string): ReadonlyArray<string> => {
  const value = (parsed.values as Readonly<Record<string, unknown>>)[option]
  return value === undefined ? [] : Array.isArray(value) ? value.map(String) : [String(value)]
}

const emit = (parsed: Parsed, answer: unknown, lines: () => ReadonlyArray<string>): void => {
  if (json(parsed)) process.stdout.write(JSON.stringify(answer) + "\n")
  else print(lines())
}

const isoSeconds = (seconds: number): string => new Date(seconds * 1000).toISOString().replace(/\.000Z$/, "Z")

const nameCursor = Schema.decodeUnknownSync(Cursor(TextKey))

/** One page of the list, from its start or after `cursor` (a previous page's next_cursor). */
const listPage = (target: GatewayTarget, cursor: string | null): Promise<typeof DeploymentList.Type> =>
  callGateway(target, "the list", (client) =>
    client.deployments.list({ urlParams: cursor === null ? { limit: PAGE_LIMIT.max } : { limit: PAGE_LIMIT.max, cursor: nameCursor(cursor) } })
  )

export const list = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  // every page, in name order (a namespace holds at most PORTICO_DEPLOYMENTS_PER_NAMESPACE, 100 by default)
  let page = await listPage(target, null)
  const all = [...page.deployments]
  while (page.next_cursor !== null) {
    page = await listPage(target, page.next_cursor)
    all.push(...page.deployments)
  }
  emit(parsed, { deployments: all }, () => all.map((d) => deployedLine(target.url, d)))
}

export const get = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const name = nameOf(parsed, "get")
  const d = await callGateway(target, "the request", (client) => client.deployments.get({ urlParams: { name } }))
  emit(parsed, d, () => [
    deployedLine(target.url, d),
    ...(d.health_check === null ? [] : [`health check: ${d.health_check}`]),
    `updated: ${isoSeconds(d.updated_at)}`
  ])
}

export const logs = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const name = nameOf(parsed, "logs")
  const lines = wholeNumberOption(parsed, "lines")
  if (lines !== undefined && (lines < 1 || lines > 1000)) throw usageError("--lines is 1 to 1000")
  const answer = await callGateway(target, "the request", (client) =>
    client.deploymentRuntime.logs({ urlParams: lines === undefined ? { name } : { name, lines } })
  )
  emit(parsed, answer, () => answer.lines)
}

/** `--set K=V`, `--env-file F` and `--unset K` as env/set's change; undefined when none was given. */
const envChange = (parsed: Parsed): { readonly set: Record<string, string> | undefined; readonly unset: ReadonlyArray<string> | undefined } | undefined => {
  const sets = many(parsed, "set")
  const file = stringOption(parsed, "env-file")
  const unset = many(parsed, "unset")
  if (sets.length === 0 && file === undefined && unset.length === 0) return undefined
  let text: string | undefined
  if (file !== undefined) {
    try {
      text = fs.readFileSync(file, "utf8")
    } catch (error) {
      throw usageError(`--env-file ${file}: ${error instanceof Error ? error.message.replace(/^[A-Z]+: /, "") : String(error)}`)
    }
  }
  let set: Record<string, string> | undefined
  if (text !== undefined || sets.length > 0) {
    // the same lines and flags `deploy --env-file/--env` take, checked by the same rules
    const merged = mergeDeployEnv(text, sets)
    if (Either.isLeft(merged)) throw usageError(merged.left.message.replace(/--env(?![-\w])/g, "--set"))
    const checked = checkEnvironment(merged.right)
    if (Either.isLeft(checked)) throw usageError(`environment: ${checked.left.message}`)
    set = { ...checked.right }
  }
  const both = unset.filter((name) => set !== undefined && name in set)
  if (both.length > 0) throw usageError(`${both[0]} is both set and unset`)
  return { set, unset: unset.length === 0 ? undefined : unset }
}

export const env = async (parsed: Parsed): Promise<void> => {
  const name = nameOf(parsed, "env")
  const change = envChange(parsed)
  const target = gatewayTarget(parsed)
  if (change === undefined) {
    const answer = await callGateway(target, "the request", (client) => client.deployments.env({ urlParams: { name } }))
    emit(parsed, answer, () => answer.names)
    return
  }
  const payload = { name, ...(change.set === undefined ? {} : { set: change.set }), ...(change.unset === undefined ? {} : { unset: change.unset }) }
  const answer = await callGateway(target, "the environment change", (client) => client.deployments.envSet({ payload }))
  if (!json(parsed)) {
    process.stderr.write(answer.restarted ? `${name} restarted with the new environment\n` : `${name}: environment recorded (nothing runs to restart)\n`)
  }
  emit(parsed, answer, () => answer.names)
}

export const versions = async (parsed: Parsed): Promise<void> => {
  const target = gatewayTarget(parsed)
  const name = nameOf(parsed, "versions")
  const answer = await callGateway(target, "the request", (client) => client.deployments.versions({ urlParams: { name } }))
  emit(parsed, answer, () =>
    answer.versions.map((v) => {
      const what = v.source === "rollback" && v.rollback_from !== null ? `rollback to ${v.rollback_from}` : v.source
      return `${v.version === answer.current ? "*" : " "} ${String(v.version).padStart(3)}  ${isoSeconds(v.created_at)}  ${what}`
    })
  )
}

export const rollback = async (parsed: Parsed): Promise<void> => {
  const name = nameOf(parsed, "rollback")
  const to = wholeNumberOption(parsed, "to")
  if (to === undefined || to < 1) throw usageError("deployments rollback needs --to N, the version to serve again (see `portico deployments versions NAME`)")
  const target = gatewayTarget(parsed)
  const d = await callGateway(target, "the rollback", (client) => client.deployments.rollback({ payload: { name, version: to } }))
  emit(parsed, d, () => [deployedLine(target.url, d)])
}

export const remove = async (parsed: Parsed): Promise<void> => {
  const name = nameOf(parsed, "delete")
  const target = gatewayTarget(parsed)
  const answer = await callGateway(target, "the delete", (client) => client.deployments.delete({ payload: { name } }))
  emit(parsed, answer, () => [`deleted ${answer.name}`])
}

const domainAction = (parsed: Parsed): { readonly kind: "add" | "verify" | "remove"; readonly domain: string } | undefined => {
  const given = (["add", "verify", "remove"] as const).flatMap((kind) => {
    const domain = stringOption(parsed, kind)
    return domain === undefined ? [] : [{ kind, domain }]
  })
  if (given.length > 1) throw usageError("give one of --add, --verify and --remove")
  return given[0]
}

const listDomains = async (parsed: Parsed, target: GatewayTarget, name: string): Promise<void> => {
  const answer = await callGateway(target, "the request", (client) => client.deploymentDomains.list({ urlParams: { name } }))
  emit(parsed, answer, () =>
    answer.domains.map((d) =>
      d.verified ? `${d.domain}  verified ${isoSeconds(d.verified_at ?? 0)}` : `${d.domain}  not verified: TXT ${d.txt.name} "${d.txt.value}"`
    )
  )
}

export const domains = async (parsed: Parsed): Promise<void> => {
  const name = nameOf(parsed, "domains")
  const action = domainAction(parsed)
  const target = gatewayTarget(parsed)
  if (action === undefined) return listDomains(parsed, target, name)
  const payload = { name, domain: action.domain }
  if (action.kind === "add") {
    const added = await callGateway(target, "the domain", (client) => client.deploymentDomains.add({ payload }))
    return emit(parsed, added, () => [
      `${added.domain}: publish the TXT record ${added.txt.name} "${added.txt.value}", then: portico deployments domains ${name} --verify ${added.domain}`
    ])
  }
  if (action.kind === "verify") {
    const verified = await callGateway(target, "the verification", (client) => client.deploymentDomains.verify({ payload }))
    return emit(parsed, verified, () => [`${verified.domain} serves ${verified.name}`])
  }
  const removed = await callGateway(target, "the removal", (client) => client.deploymentDomains.remove({ payload }))
  emit(parsed, removed, () => [`removed ${removed.domain}`])
}
