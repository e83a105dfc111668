/**
 * `portico deploy <dir> --name N`: check the command line, find the type, ask the gateway about
 * the name, build on this machine (Go, Next.js), pack the archive into a temporary file, upload it
 * through the typed client with a progress bar, say what the gateway does while the answer is
 * pending (its events), and print where the app is served. Every failure is one line (the gateway's
 * error, code and hint for a refusal), exit 1; a mistake on the command line is exit 2 before
 * anything is built or sent.
 */
import { Effect, Either, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { DeploymentType } from "../../domain/DeploymentRules.js"
import { CliError, type Parsed, usageError } from "../Cli.js"
import { callGateway, describeFailure, type GatewayTarget, refusalOf, tryGateway } from "../GatewayCall.js"
import { detectAppType } from "./AppType.js"
import { prepareApp } from "./ClientBuilds.js"
import { checkTypeFlags, type DeployRequest, readDeployFlags } from "./DeployFlags.js"
import { packArchive } from "./Pack.js"
import { formatBytes, startProgress } from "./Progress.js"

/** The fields of the answer the command prints (the route's `Deployment`). */
interface Deployed {
  readonly name: string
  readonly type: string
  readonly status: string
  readonly version: number
  readonly domain: string
}

/**
 * The app's address as a browser reaches it through this gateway: its host, with the scheme and
 * port of --url (a gateway on a port serves apps on that port; on 80/443 the URL has none).
 */
export const appUrl = (gateway: URL, domain: string): string => `${gateway.protocol}//${domain}${gateway.port === "" ? "" : `:${gateway.port}`}`

/** The line `deploy` (and `deployments get|list|rollback`) prints for a deployment. */
export const deployedLine = (gateway: URL, d: Deployed): string => `${d.name} version ${d.version} (${d.type}, ${d.status}): ${appUrl(gateway, d.domain)}`

/** One line for a failed upload: the gateway's `{error, code, hint}` when it answered with one. */
export const describeUploadFailure = (error: unknown, base: URL, hintFor?: (code: string) => string | undefined): string =>
  describeFailure(error, base, "the deploy", hintFor)

const uploadType = (request: DeployRequest, dir: string): DeploymentType => {
  const type = request.type ?? detectAppType(dir)
  checkTypeFlags(type, request)
  if (type === "nextjs" && !request.ssr && request.healthCheck !== undefined) {
    throw usageError("--health-check is for apps that run a process; a Next.js app without --ssr is exported as a static site")
  }
  return type
}

/** What the deployment is before the upload: answered before anything is built or sent. */
interface Before {
  /** The newest event's seq: the upload's own events are the ones after it. */
  readonly lastSeq: number
  readonly healthPath: string | undefined
}

/**
 * Asks the gateway about the name before building or uploading (issue 34): a first deploy of a
 * taken name, or an update of a missing one or of another type, is refused here, with the
 * gateway's answer, instead of after a build and an upload. The upload's own checks still decide.
 */
const checkName = async (request: DeployRequest, target: GatewayTarget, type: DeploymentType): Promise<Before> => {
  const found = await tryGateway(target, (client) => client.deployments.get({ urlParams: { name: request.name } }))
  if (Either.isLeft(found) && refusalOf(found.left)?.code !== "NOT_FOUND") throw new CliError(describeUploadFailure(found.left, target.url))
  const record = Either.isRight(found) ? found.right : undefined
  if (!request.update) {
    if (record !== undefined) {
      throw new CliError(`the gateway refused the deploy: deployment ${request.name} exists in this namespace (DEPLOYMENT_EXISTS): add --update to deploy a new version of it, or choose another --name`)
    }
    return { lastSeq: 0, healthPath: undefined }
  }
  if (record === undefined) throw new CliError(`the gateway refused the deploy: no deployment ${request.name} in this namespace (NOT_FOUND): deploy it first, without --update`)
  if (record.type !== type) throw new CliError(`deployment ${request.name} is ${record.type}; this directory deploys as ${type} (--type sets it)`)
  const events = await callGateway(target, "the deploy", (client) => client.deployments.events({ urlParams: { name: request.name, limit: 1 } }))
  return { lastSeq: events.events[0]?.seq ?? 0, healthPath: record.health_check ?? undefined }
}

/** What an event the gateway writes while an upload's answer is pending says (DeploymentEvents). */
export const waitingLine = (type: string, detail: Readonly<Record<string, string | number>>): string | undefined => {
  const version = detail["version"] === undefined ? "" : ` of version ${detail["version"]}`
  const within = detail["timeout_seconds"] === undefined ? "" : ` (up to ${detail["timeout_seconds"]} s)`
  if (type === "installing") return `the gateway is installing the dependencies${version} (npm, registry packages only)${within}`
  if (type === "starting") return `the gateway started version ${detail["version"] ?? "?"}: waiting for it to answer 200 on ${detail["health_path"] ?? "/health"}${within}`
  if (type === "health_check_failed" && typeof detail["reason"] === "string") return `health check: ${detail["reason"]}`
  return undefined
}

/** While the answer is pending, prints what the gateway's events say it is doing; stops when `done` settles. */
const followEvents = (target: GatewayTarget, name: string, after: number, done: Promise<unknown>): Promise<void> => {
  let seen = after
  let over = false
  void done.finally(() => (over = true))
  const poll = async (): Promise<void> => {
    while (!over) {
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 1000))])
      if (over) return
      const page = await tryGateway(target, (client) => client.deployments.events({ urlParams: { name, limit: 20 } }))
      // before the record exists (404) or on a passing failure: the next poll tries again
      if (Either.isLeft(page) || over) continue
      for (const event of [...page.right.events].reverse()) {
        if (event.seq <= seen) continue
        seen = event.seq
        const line = waitingLine(event.type, event.detail)
        if (line !== undefined) process.stderr.write(line + "\n")
      }
    }
  }
  return poll()
}

const upload = async (request: DeployRequest, type: DeploymentType, archive: string, size: number, before: Before): Promise<Deployed> => {
  const target: GatewayTarget = { url: request.url, token: request.token }
  const progress = startProgress(request.update ? "updating " : "uploading", size)
  let sent: () => void = () => undefined
  const allSent = new Promise<void>((resolve) => (sent = resolve))
  // Counted as the request body pulls the bytes, so the bar follows what the socket takes; once
  // the last byte went, the gateway unpacks, prepares and starts while the answer is pending.
  const stream = Stream.fromAsyncIterable(fs.createReadStream(archive, { highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>, (e) => e).pipe(
    Stream.map((chunk) => new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)),
    Stream.tap((chunk) => Effect.sync(() => progress.advance(chunk.byteLength))),
    Stream.onEnd(Effect.sync(() => sent()))
  )
  const fields = request.update
    ? { name: request.name, health_check: request.healthCheck, skip_install: request.skipInstall ? true : undefined }
    : {
        name: request.name,
        subdomain: request.subdomain,
        health_check: request.healthCheck,
        env: request.env,
        skip_install: request.skipInstall ? true : undefined
      }
  const call = tryGateway(target, (client) => {
    const payload = { fields, archive: { stream, size } }
    return request.update ? client.deployments.update({ path: { type }, payload }) : client.deployments.upload({ path: { type }, payload })
  }).finally(() => progress.done())
  // what the gateway does between the last byte and its answer (nothing to wait for on a static site)
  void allSent.then(() => {
    progress.done()
    if (type === "static") return
    process.stderr.write("uploaded; the gateway is unpacking and preparing the app\n")
    return followEvents(target, request.name, before.lastSeq, call)
  })
  const result = await call
  if (Either.isLeft(result)) {
    const healthPath = request.healthCheck ?? before.healthPath ?? "/health"
    const hintFor = (code: string) =>
      code === "APP_START_FAILED"
        ? `its output: \`portico deployments logs ${request.name}\`; an app that answers 200 on another path than ${healthPath}: \`portico deploy ${request.dir} --name ${request.name} --update --health-check PATH\``
        : undefined
    throw new CliError(describeUploadFailure(result.left, request.url, hintFor))
  }
  return result.right
}

export const deploy = async (parsed: Parsed): Promise<void> => {
  const request = readDeployFlags(parsed)
  let stat: fs.Stats
  try {
    stat = fs.statSync(request.dir)
  } catch {
    throw usageError(`${request.dir} does not exist`)
  }
  if (!stat.isDirectory()) throw usageError(`${request.dir} is not a directory (deploy takes the app's directory)`)
  const type = uploadType(request, request.dir)
  if (request.type === undefined) process.stderr.write(`type: ${type} (detected; --type sets it)\n`)

  // a Next.js app without --ssr is exported and uploaded as a static site
  const before = await checkName(request, { url: request.url, token: request.token }, type === "nextjs" && !request.ssr ? "static" : type)

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-deploy-"))
  try {
    const prepared = await prepareApp(request.dir, type, { ssr: request.ssr, workDir })
    const packed = await packArchive(prepared.sources, path.join(workDir, "app.tar.gz"))
    process.stderr.write(`packed ${packed.files} ${packed.files === 1 ? "file" : "files"} into ${formatBytes(packed.bytes)}\n`)
    const deployed = await upload(request, prepared.type, packed.file, packed.bytes, before)
    if (parsed.values["json"] === true) {
      process.stdout.write(JSON.stringify(deployed) + "\n")
      return
    }
    process.stdout.write(deployedLine(request.url, deployed) + "\n")
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}
