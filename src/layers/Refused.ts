/**
 * A service's refusal in the catalogue's codes (src/domain/Errors.ts), so services stay free of
 * HTTP: the databases, storage and transfer services answer with it, typed with their family's
 * codes, and `fromRefusal` turns it into the API error of its code. `status` is the code's, read
 * from the catalogue.
 */
import { Data } from "effect"
import { type ErrorCode, statusOfCode } from "../domain/Errors.js"

export class Refused<C extends ErrorCode = ErrorCode> extends Data.TaggedError("Refused")<{
  readonly status: number
  readonly code: C
  readonly reason: string
  readonly hint?: string | undefined
  readonly retryAfterSeconds?: number | undefined
}> {}

export const refuse = <C extends ErrorCode>(code: C, reason: string, hint?: string, retryAfterSeconds?: number): Refused<C> =>
  new Refused({ status: statusOfCode[code], code, reason, hint, retryAfterSeconds })
