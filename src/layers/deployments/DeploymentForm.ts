/**
 * The upload and update form of a deployment (docs/deployments.md, "Routes"): text fields first,
 * then the file part `archive` last. The fields are read and checked before a byte of the archive
 * is, so a bad name, subdomain or environment is refused with nothing stored; the archive is then
 * handed on as a stream (never buffered) and any part after it is refused.
 */
import { Either } from "effect"
import { checkEnvironment, type Environment } from "../../domain/DeploymentEnv.js"
import { checkHost, DeploymentFieldInvalid, deploymentName, type DeploymentType, subdomainOverride } from "../../domain/DeploymentRules.js"
import { strictJson } from "../../domain/StrictJson.js"
import { type FormEvent, formEvents, FormRefused } from "../storage/UploadForm.js"

/** What the form said, checked. */
export interface DeploymentFields {
  readonly name: string
  readonly subdomain: string | undefined
  readonly healthCheck: string | undefined
  readonly env: Environment | undefined
  readonly skipInstall: boolean
}

/** The checked fields and the archive's bytes, to be read once. */
export interface DeploymentForm {
  readonly fields: DeploymentFields
  readonly archive: AsyncIterable<Uint8Array>
  /** Set once the archive's stream ended because the form was bad (cut short, a part after it). */
  readonly formFailure: () => FormRefused | undefined
}

/** Fields each form takes: env and subdomain only on the first upload (spec §4.8). */
const uploadFields = new Set(["name", "subdomain", "health_check", "env", "skip_install"])
const updateFields = new Set(["name", "health_check", "skip_install"])

/** Parts and the size of one text field: an environment of 224 KiB rendered, as escaped JSON. */
const FORM_LIMITS = { maxParts: 16, maxFieldSize: 1024 * 1024 }

/** The environment is one flat object; anything nested is refused as not a string anyway. */
const ENV_MAX_DEPTH = 8

/** A health path: absolute, printable ASCII without spaces, at most 256 characters. */
const healthPattern = /^\/[\x21-\x7e]{0,255}$/

const fieldError = (field: string, reason: string) => new DeploymentFieldInvalid({ field, reason })

/** Checks the text fields of a form for `type`; `first` is the upload (else an update). */
export const checkFields = (
  type: DeploymentType,
  first: boolean,
  raw: ReadonlyMap<string, string>
): Either.Either<DeploymentFields, DeploymentFieldInvalid> =>
  Either.gen(function* () {
    const allowed = first ? uploadFields : updateFields
    for (const key of raw.keys()) {
      if (!allowed.has(key)) {
        return yield* Either.left(
          fieldError(key, first ? "not a field of the upload form" : "not a field of the update form (env and subdomain are set on the first deploy)")
        )
      }
    }
    const name = yield* deploymentName(raw.get("name"))
    const subdomainText = raw.get("subdomain")
    const subdomain = subdomainText === undefined ? undefined : yield* subdomainOverride(subdomainText)
    if (first) yield* checkHost(name, subdomain)
    const healthCheck = raw.get("health_check")
    if (healthCheck !== undefined) {
      if (type === "static") return yield* Either.left(fieldError("health_check", "a static site has no health check"))
      if (!healthPattern.test(healthCheck)) return yield* Either.left(fieldError("health_check", "a path starting with /, printable characters without spaces, at most 256"))
    }
    const skip = raw.get("skip_install")
    if (skip !== undefined && skip !== "true" && skip !== "false") return yield* Either.left(fieldError("skip_install", "true or false"))
    if (skip === "true" && type !== "nodejs") return yield* Either.left(fieldError("skip_install", "only a nodejs app has an install to skip"))
    const envText = raw.get("env")
    let env: Environment | undefined
    if (envText !== undefined) {
      // read as strictly as env/set's JSON body: a name given twice is refused, never last-wins
      const read = strictJson(envText, { maxChars: FORM_LIMITS.maxFieldSize, maxDepth: ENV_MAX_DEPTH })
      if (Either.isLeft(read)) {
        const twice = /^duplicate key "(.*)"$/s.exec(read.left.reason)
        return yield* Either.left(twice === null ? fieldError("env", "a JSON object of strings") : fieldError(`env.${(twice[1] as string).slice(0, 128)}`, "given twice"))
      }
      const parsed = read.right
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* Either.left(fieldError("env", "a JSON object of strings"))
      const entries = Object.entries(parsed)
      const bad = entries.find(([, v]) => typeof v !== "string")
      if (bad !== undefined) return yield* Either.left(fieldError(`env.${bad[0]}`, "a value is a string"))
      env = yield* checkEnvironment(Object.fromEntries(entries) as Environment)
    }
    return { name, subdomain, healthCheck, env, skipInstall: skip === "true" }
  })

/** Why a form is refused before its archive: the route answers 400 (`field` when a field is to blame). */
export type FormProblem = FormRefused | DeploymentFieldInvalid

/**
 * Reads the form's text fields up to its `archive` part and checks them; the archive stays
 * unread. A form that ends without an archive, repeats a field or has a file part other than
 * the archive is refused.
 */
export const readDeploymentForm = async (
  type: DeploymentType,
  first: boolean,
  contentType: string,
  body: AsyncIterable<Uint8Array>
): Promise<Either.Either<DeploymentForm, FormProblem>> => {
  const events = formEvents(contentType, body, FORM_LIMITS)[Symbol.asyncIterator]()
  const raw = new Map<string, string>()
  const refused = (reason: string) => Either.left(new FormRefused(reason))
  for (;;) {
    let step: IteratorResult<FormEvent>
    try {
      step = await events.next()
    } catch (e) {
      return Either.left(e instanceof FormRefused ? e : new FormRefused("the upload was cut short"))
    }
    if (step.done === true) return refused("the form has no archive part (send the tar.gz as the file part `archive`, last)")
    const event = step.value
    if (event.kind === "field") {
      if (event.name === "archive") return refused("the archive must be sent as a file part (give it a filename)")
      if (raw.has(event.name)) return Either.left(fieldError(event.name, "given twice"))
      raw.set(event.name, event.value)
      continue
    }
    if (event.kind !== "file" || event.name !== "archive") return refused(`unexpected file part ${event.kind === "file" ? event.name : ""}: the form's one file is archive`)
    const fields = checkFields(type, first, raw)
    if (Either.isLeft(fields)) {
      // the rest of the body is not read: the answer goes out and the connection is closed
      void events.return?.(undefined)
      return Either.left(fields.left)
    }
    let failure: FormRefused | undefined
    const archive = async function* () {
      try {
        for (;;) {
          const next = await events.next()
          if (next.done === true) throw new FormRefused("the multipart body ended inside the archive")
          if (next.value.kind === "chunk") yield next.value.bytes
          else if (next.value.kind === "end-file") break
          else throw new FormRefused("the archive must be the form's last part")
        }
        const after = await events.next()
        if (after.done !== true) throw new FormRefused("the archive must be the form's last part")
      } catch (e) {
        failure = e instanceof FormRefused ? e : new FormRefused("the upload was cut short")
        throw failure
      }
    }
    return Either.right({ fields: fields.right, archive: archive(), formFailure: () => failure })
  }
}
