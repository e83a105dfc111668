/**
 * A service's refusal, in HTTP statuses so services stay HTTP-free beyond a number: the
 * databases and storage services answer with it, and handlers turn it into the API error of
 * its status (`wideRefusal`).
 */
import { Data } from "effect"
import type { RefusalStatus } from "../domain/Errors.js"

export class Refused extends Data.TaggedError("Refused")<{
  readonly status: RefusalStatus
  readonly code: string
  readonly reason: string
  readonly hint?: string | undefined
  readonly retryAfterSeconds?: number | undefined
}> {}

export const refuse = (status: RefusalStatus, code: string, reason: string, hint?: string, retryAfterSeconds?: number) =>
  new Refused({ status, code, reason, hint, retryAfterSeconds })
