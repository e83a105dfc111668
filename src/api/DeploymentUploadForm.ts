/**
 * The multipart form of `POST /v1/deployments/{type}/upload` and `/update` (docs/deployments.md,
 * "Routes"), encoded as a stream: the fields first, then the archive part last, its bytes taken
 * from the caller's stream as the request is sent, so an archive of any size is never held in
 * memory. The length is computed up front (fields plus the archive's known size), so the request
 * can say it exactly and a progress bar knows its total.
 *
 * Part of the typed client (src/client.ts): imports only `effect`.
 */
import { Stream } from "effect"

export interface DeploymentUploadFields {
  readonly name: string
  /** First upload only. */
  readonly subdomain?: string | undefined
  readonly health_check?: string | undefined
  /** First upload only: the first environment, sent as a JSON object of strings. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** nodejs only: use the uploaded node_modules as it is. */
  readonly skip_install?: boolean | undefined
}

export interface DeploymentUploadForm {
  readonly fields: DeploymentUploadFields
  /** The tar.gz: its bytes as a stream and their exact count. */
  readonly archive: {
    readonly stream: Stream.Stream<Uint8Array, unknown>
    readonly size: number
    /** The part's file name (default `app.tar.gz`). */
    readonly filename?: string
  }
}

export interface EncodedForm {
  readonly contentType: string
  readonly contentLength: number
  readonly body: Stream.Stream<Uint8Array, unknown>
}

const encoder = new TextEncoder()

const randomBoundary = (): string => {
  const bytes = new Uint8Array(16)
  globalThis.crypto.getRandomValues(bytes)
  return `portico-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`
}

/** The fields in the order the routes read them; absent ones are not sent. */
const fieldEntries = (fields: DeploymentUploadFields): ReadonlyArray<readonly [string, string]> => {
  const entries: Array<readonly [string, string]> = [["name", fields.name]]
  if (fields.subdomain !== undefined) entries.push(["subdomain", fields.subdomain])
  if (fields.health_check !== undefined) entries.push(["health_check", fields.health_check])
  if (fields.env !== undefined) entries.push(["env", JSON.stringify(fields.env)])
  if (fields.skip_install !== undefined) entries.push(["skip_install", String(fields.skip_install)])
  return entries
}

/** Quotes a name for Content-Disposition as browsers' FormData does (`"` and CR/LF escaped). */
const quoted = (text: string): string => `"${text.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A")}"`

export const encodeDeploymentForm = (form: DeploymentUploadForm, boundary: string = randomBoundary()): EncodedForm => {
  const head =
    fieldEntries(form.fields)
      .map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name=${quoted(name)}\r\n\r\n${value}\r\n`)
      .join("") +
    `--${boundary}\r\nContent-Disposition: form-data; name="archive"; filename=${quoted(form.archive.filename ?? "app.tar.gz")}\r\n` +
    `Content-Type: application/gzip\r\n\r\n`
  const headBytes = encoder.encode(head)
  const tailBytes = encoder.encode(`\r\n--${boundary}--\r\n`)
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    contentLength: headBytes.byteLength + form.archive.size + tailBytes.byteLength,
    body: Stream.concat(Stream.make(headBytes), Stream.concat(form.archive.stream, Stream.make(tailBytes)))
  }
}
