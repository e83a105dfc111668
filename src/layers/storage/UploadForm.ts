/**
 * A multipart/form-data upload body, parsed as it arrives (multipasta, the parser under
 * `@effect/platform`'s Multipart) into events the storage service pulls one at a time, so a
 * file's bytes flow into the importer with backpressure and are never held whole.
 *
 * Not `HttpServerRequest.multipartStream`: a body that ends before its closing boundary leaves
 * that stream's file part waiting forever (the parser's EndNotReached error never reaches the
 * part's content), which would hang the request and hold the import lock. Here every way a body
 * can go wrong ends the iteration with a `FormRefused`.
 */
import * as MP from "multipasta"

export type FormEvent =
  | { readonly kind: "field"; readonly name: string; readonly value: string }
  | { readonly kind: "file"; readonly name: string; readonly filename: string }
  | { readonly kind: "chunk"; readonly bytes: Uint8Array }
  | { readonly kind: "end-file" }

/** The body is not a usable form; `reason` is for the client. */
export class FormRefused extends Error {
  constructor(readonly reason: string) {
    super(reason)
  }
}

export interface FormLimits {
  readonly maxParts: number
  readonly maxFieldSize: number
}

const describe = (e: MP.MultipartError): string => {
  switch (e._tag) {
    case "InvalidBoundary":
      return "the multipart boundary is missing or invalid"
    case "ReachedLimit":
      return e.limit === "MaxParts" ? "too many parts in the form" : "a form field is too large"
    case "EndNotReached":
      return "the multipart body ended before its closing boundary"
    default:
      return "the multipart body is malformed"
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * A text field's value. UTF-8 unless the part names another charset: bytes that are not UTF-8
 * are refused, never replaced with U+FFFD (docs/api.md), so two different fields never read alike.
 */
const fieldText = (info: MP.PartInfo, value: Uint8Array): string => {
  const charset = info.contentTypeParameters["charset"]?.toLowerCase()
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") return MP.decodeField(info, value)
  try {
    return strictUtf8.decode(value)
  } catch {
    throw new FormRefused(`${info.name}: is not valid UTF-8`)
  }
}

/** The form's events in order; throws `FormRefused` for a malformed, cut or over-limit body. */
export async function* formEvents(contentType: string, body: AsyncIterable<Uint8Array>, limits: FormLimits): AsyncGenerator<FormEvent> {
  let queue: Array<FormEvent> = []
  let failure: MP.MultipartError | undefined
  let done = false
  const parser = MP.make({
    headers: { "content-type": contentType },
    // The part named `file` is the content whatever its headers say: without a filename the
    // parser's default would read it as a text field and decode its bytes, changing them (and
    // the CID). Other parts keep the default: with a filename or as octet-stream, a file.
    isFile: (info) => info.name === "file" || MP.defaultIsFile(info),
    maxParts: limits.maxParts,
    maxFieldSize: limits.maxFieldSize,
    onField: (info, value) => queue.push({ kind: "field", name: info.name, value: fieldText(info, value) }),
    onFile: (info) => {
      queue.push({ kind: "file", name: info.name, filename: info.filename ?? "" })
      return (chunk) => queue.push(chunk === null ? { kind: "end-file" } : { kind: "chunk", bytes: chunk })
    },
    onError: (e) => {
      failure ??= e
    },
    onDone: () => {
      done = true
    }
  })
  // the events are handed on in a plain loop: a generator made per call (`yield* drain()`) has
  // a map of its own each time, and the optimized code of this function, shared by every upload,
  // was thrown away at the next upload's first event (docs/performance.md)
  try {
    for await (const chunk of body) {
      parser.write(chunk)
      if (failure !== undefined) throw new FormRefused(describe(failure))
      if (queue.length > 0) {
        const ready = queue
        queue = []
        for (const event of ready) yield event
      }
    }
  } catch (e) {
    throw e instanceof FormRefused ? e : new FormRefused("the upload was cut short")
  }
  parser.end()
  if (failure !== undefined) throw new FormRefused(describe(failure))
  for (const event of queue) yield event
  if (!done) throw new FormRefused("the multipart body ended before its closing boundary")
}
