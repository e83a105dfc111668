/**
 * Multipart uploads with progress: the typed client's routes (`POST /v1/storage/upload`,
 * `POST /v1/deployments/{type}/upload` and `/update`) sent with XMLHttpRequest, the one browser
 * API that reports how much of a request body has gone. The answer is decoded with the endpoint's
 * own success schema, a refusal read as the API's `{error, code, hint}`.
 */
import { Schema } from "effect"
import { type Refusal, RefusedError } from "./api.js"

const envelopeOf = (status: number, text: string): Refusal => {
  try {
    const body = JSON.parse(text) as { readonly error?: unknown; readonly code?: unknown; readonly hint?: unknown }
    if (typeof body.error === "string" && typeof body.code === "string") {
      return { error: body.error, code: body.code, hint: typeof body.hint === "string" ? body.hint : undefined }
    }
  } catch {
    // not the envelope: said below
  }
  return { error: `the upload was answered ${status}`, code: "UNEXPECTED_ANSWER" }
}

/** Posts `form` to `route` with `token`, calling `progress` with the fraction sent; the answer decoded with `answer`. */
export const uploadForm = <A, I>(
  route: string,
  token: string,
  form: FormData,
  answer: Schema.Schema<A, I>,
  progress: (fraction: number) => void
): Promise<A> =>
  new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open("POST", route)
    xhr.setRequestHeader("authorization", `Bearer ${token}`)
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) progress(event.loaded / event.total)
    }
    xhr.onerror = () => reject(new RefusedError({ error: "the gateway could not be reached", code: "NETWORK" }))
    xhr.onload = () => {
      if (xhr.status < 200 || xhr.status >= 300) return reject(new RefusedError(envelopeOf(xhr.status, xhr.responseText)))
      try {
        resolve(Schema.decodeUnknownSync(answer)(JSON.parse(xhr.responseText)))
      } catch (failure) {
        reject(new RefusedError({ error: `the answer could not be read: ${String(failure)}`, code: "UNEXPECTED_ANSWER" }))
      }
    }
    xhr.send(form)
  })

/** A progress bar for a fraction sent, with its percentage in words. */
export const percent = (fraction: number) => `${Math.round(fraction * 100)}%`
