/**
 * What a route of the fast lane (src/api/FastLane.ts) is made of: its work for one request and
 * the answer it writes, now or once a store has answered. Shared by the lane and the modules of
 * its routes (VaultLane.ts), so a route is written beside its concept while the lane keeps the
 * gate, the MAC check and the writing of answers.
 */
import { Either, type Schema } from "effect"
import type { ApiError } from "../../domain/Errors.js"
import { decoderOf } from "../../domain/FastDecode.js"
import type { Principal } from "../../domain/Principal.js"
import { type Refusal, refusalOf } from "../ErrorResponses.js"
import { jsonValue } from "../JsonBody.js"
import { internalBody } from "../node/DirectAnswers.js"

export interface Answer {
  readonly status: number
  /** JSON text; or bytes, whose `headers` then name their content type. */
  readonly body: string | Uint8Array
  /** Seconds, sent as `Retry-After`. */
  readonly retryAfter?: number | undefined
  /** The answer's own headers, its content type among them; JSON's when there are none. */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** An answer that comes later: `done` gets it once (a refusal is an answer too). */
export type Pending = (done: (answer: Answer) => void) => void

/**
 * The route's work for one request, its payload decoded and ready: the caller in (with the
 * client's address, which a route that charges the client's network needs), the answer out, or
 * its pending answer.
 */
export type Work = (caller: Principal, now: number, client: string | undefined) => Answer | Pending

/** A route of the lane, as written: its work for a body text, or undefined when the body does not decode. */
export type Route = (text: string) => Work | undefined

/**
 * A node-to-node route of the lane (policy `internal`): no client credential, the caller is the
 * one the front gateway admitted, carried in the payload the coordination MAC covers.
 */
export interface PeerRoute {
  /**
   * What the coordination MAC covers: the JSON body (`body`), or the envelope header with the
   * SHA-256 of a body of bytes (`envelope`, Coordination.ts `bytesSigned`).
   */
  readonly signs: "body" | "envelope"
  /**
   * The call's work, or undefined when it does not decode (the app then says why): `text` is the
   * body's UTF-8 text, or the envelope header's; `body` the body's bytes.
   */
  readonly prepare: (text: string, body: Uint8Array) => (() => Answer | Pending) | undefined
}

export const ok = (body: string): Answer => ({ status: 200, body })

/** A refusal as the app writes it: the one encoder (ErrorResponses.ts). */
export const refused = (error: ApiError): Refusal => refusalOf(error)

/** The app's answer to a defect. */
export const internalError: Answer = { status: 500, body: internalBody }

/** A schema's decoder that says undefined instead of why (the app says why). */
export const payloadDecoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = decoderOf(schema)
  return (value: unknown): A | undefined => {
    const decoded = decode(value)
    return Either.isRight(decoded) ? decoded.right : undefined
  }
}

/** The body as the app reads it (JsonBody.ts), then the schema. */
export const jsonPayload = (maxBodyBytes: number) => {
  return <A, I>(schema: Schema.Schema<A, I>) => {
    const decode = payloadDecoder(schema)
    return (text: string): A | undefined => {
      const value = jsonValue(text, maxBodyBytes)
      return Either.isRight(value) ? decode(value.right) : undefined
    }
  }
}
