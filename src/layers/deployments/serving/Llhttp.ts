/**
 * node's own HTTP/1 parser (llhttp, the one behind `node:http`'s server and client), reached through
 * `node:_http_common`, for the app connections (AppConnections.ts) that move bytes without
 * node's request and response objects. The same strict parser as the API's listener: no lenient
 * flags, so what node's server refuses (Content-Length beside Transfer-Encoding, a bad chunk size,
 * CR or LF inside a header, an oversize head) is refused here too. Never a parser of our own:
 * request smuggling lives in the differences between two parsers of one stream.
 */
import { createRequire } from "node:module"

/** What `onHeadersComplete` returns: go on, skip the body (a HEAD's answer), or stop here. */
export const PARSE_ON = 0
export const SKIP_BODY = 1
/** llhttp pauses after the head as if upgraded: `execute` answers the bytes read up to it. */
export const STOP_AFTER_HEAD = 2

export interface ParserCallbacks {
  readonly onMessageBegin?: () => void
  /** More than 32 header pairs arrive in pieces before `onHeadersComplete` (whose own are then undefined). */
  readonly onHeaders?: (headers: Array<string>, url: string) => void
  readonly onHeadersComplete: (
    versionMajor: number,
    versionMinor: number,
    headers: Array<string> | undefined,
    method: number | undefined,
    url: string | undefined,
    statusCode: number | undefined,
    statusMessage: string | undefined,
    upgrade: boolean,
    shouldKeepAlive: boolean
  ) => number | void
  readonly onBody?: (chunk: Buffer) => void
  readonly onMessageComplete: () => void
}

export interface Parser {
  /** Bytes read, or the parser's error (with `code`, e.g. HPE_HEADER_OVERFLOW). */
  readonly execute: (data: Buffer) => number | (Error & { code?: string; bytesParsed?: number })
  /** The stream ended: completes a message delimited by the connection's end, or answers the error of a cut one. */
  readonly finish: () => undefined | (Error & { code?: string })
  readonly close: () => void
}

interface Binding {
  new (): {
    initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void
    execute(data: Buffer): number | Error
    finish(): undefined | Error
    close(): void
    [key: number]: unknown
  }
  readonly REQUEST: number
  readonly RESPONSE: number
  readonly kOnMessageBegin: number
  readonly kOnHeaders: number
  readonly kOnHeadersComplete: number
  readonly kOnBody: number
  readonly kOnMessageComplete: number
}

const common = createRequire(import.meta.url)("node:_http_common") as { HTTPParser: Binding; methods: ReadonlyArray<string> }
const HTTPParser = common.HTTPParser

/** Method numbers as llhttp reports them, to names. */
export const methods: ReadonlyArray<string> = common.methods

/** A request parser (`request`) or a response parser; 0 as header size is node's default (16 KiB). */
export const makeParser = (kind: "request" | "response", callbacks: ParserCallbacks): Parser => {
  const parser = new HTTPParser()
  parser.initialize(kind === "request" ? HTTPParser.REQUEST : HTTPParser.RESPONSE, {}, 0, 0)
  // a callback left unset is never called into JS: unused ones cost nothing per message. Without
  // `onBody` the binding does not copy the body into a Buffer either (about 1 µs an answer).
  if (callbacks.onMessageBegin !== undefined) parser[HTTPParser.kOnMessageBegin] = callbacks.onMessageBegin
  if (callbacks.onHeaders !== undefined) parser[HTTPParser.kOnHeaders] = callbacks.onHeaders
  if (callbacks.onBody !== undefined) parser[HTTPParser.kOnBody] = callbacks.onBody
  parser[HTTPParser.kOnHeadersComplete] = callbacks.onHeadersComplete
  parser[HTTPParser.kOnMessageComplete] = callbacks.onMessageComplete
  return {
    execute: (data) => parser.execute(data) as ReturnType<Parser["execute"]>,
    finish: () => parser.finish() as ReturnType<Parser["finish"]>,
    close: () => parser.close()
  }
}
