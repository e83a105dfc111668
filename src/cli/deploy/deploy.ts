/**
 * `portico deploy <dir> --name N`: check the command line, find the type, build on this machine
 * (Go, Next.js), pack the archive into a temporary file, upload it through the typed client with a
 * progress bar, and print where the app is served. Every failure is one line (the gateway's
 * error, code and hint for a refusal), exit 1; a mistake on the command line is exit 2 before
 * anything is built or sent.
 */
import { Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { withPortico } from "../../client.js"
import type { DeploymentType } from "../../domain/DeploymentRules.js"
import { CliError, type Parsed, usageError } from "../Cli.js"
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

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null && name in value ? (value as Record<string, unknown>)[name] : undefined

/** One line for a failed upload: the gateway's `{error, code, hint}` when it answered with one. */
export const describeUploadFailure = (error: unknown, base: URL): string => {
  const code = field(error, "code")
  const message = field(error, "error")
  if (typeof code === "string" && typeof message === "string") {
    const hint = field(error, "hint")
    return `the gateway refused the deploy: ${message} (${code})${typeof hint === "string" && hint !== "" ? `: ${hint}` : ""}`
  }
  const tag = field(error, "_tag")
  if (tag === "RequestError") {
    const cause = field(error, "cause")
    const reason = cause instanceof Error && cause.cause instanceof Error ? cause.cause.message : cause instanceof Error ? cause.message : String(cause)
    return `cannot reach the gateway at ${base.origin} (${reason}): is it running (npm start)? Set --url or PORTICO_URL`
  }
  if (tag === "ResponseError") {
    const status = field(field(error, "response"), "status")
    return `the gateway answered ${String(status)} with a body that is not a deployment (is ${base.origin} a Portico gateway?)`
  }
  if (tag === "ParseError") return `the gateway's answer did not match the deployment schema (is the CLI older than the gateway?)`
  const text = error instanceof Error ? error.message : String(message ?? error)
  return `the deploy failed: ${text.split("\n")[0] ?? "unknown error"}`
}

const uploadType = (request: DeployRequest, dir: string): DeploymentType => {
  const type = request.type ?? detectAppType(dir)
  checkTypeFlags(type, request)
  if (type === "nextjs" && !request.ssr && request.healthCheck !== undefined) {
    throw usageError("--health-check is for apps that run a process; a Next.js app without --ssr is exported as a static site")
  }
  return type
}

const upload = async (request: DeployRequest, type: DeploymentType, archive: string, size: number): Promise<Deployed> => {
  const progress = startProgress(request.update ? "updating " : "uploading", size)
  // Counted as the request body pulls the bytes, so the bar follows what the socket takes.
  const stream = Stream.fromAsyncIterable(fs.createReadStream(archive, { highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>, (e) => e).pipe(
    Stream.map((chunk) => new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)),
    Stream.tap((chunk) => Effect.sync(() => progress.advance(chunk.byteLength)))
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
  const call = withPortico({ baseUrl: request.url, token: request.token }, (client) => {
    const payload = { fields, archive: { stream, size } }
    return request.update ? client.deployments.update({ path: { type }, payload }) : client.deployments.upload({ path: { type }, payload })
  })
  const result = await Effect.runPromise(Effect.either(call)).finally(() => progress.done())
  if (result._tag === "Left") throw new CliError(describeUploadFailure(result.left, request.url))
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

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-deploy-"))
  try {
    const prepared = await prepareApp(request.dir, type, { ssr: request.ssr, workDir })
    const packed = await packArchive(prepared.sources, path.join(workDir, "app.tar.gz"))
    process.stderr.write(`packed ${packed.files} ${packed.files === 1 ? "file" : "files"} into ${formatBytes(packed.bytes)}\n`)
    const deployed = await upload(request, prepared.type, packed.file, packed.bytes)
    if (parsed.values["json"] === true) {
      process.stdout.write(JSON.stringify(deployed) + "\n")
      return
    }
    process.stdout.write(`${deployed.name} version ${deployed.version} (${deployed.type}, ${deployed.status}): ${appUrl(request.url, deployed.domain)}\n`)
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}
