/** The refusals the database services answer with, in the SQL family's codes, so they stay HTTP-free. */
import { Code, type SqlCode } from "../../domain/Errors.js"
import type { SqlRefusal } from "../../domain/SqlGuard.js"
import type { StoreError } from "../registry/RegistryStore.js"
import type { WorkerFailure } from "./SqliteProtocol.js"

import { refuse, type Refused } from "../Refused.js"

export { refuse }
export type SqlRefused = Refused<SqlCode>

/** What a statement stopped at the timeout answers, on every SQL engine (rqlite's too). */
export const timeoutMessage = (timeoutMs: number): string => `the statement ran over ${timeoutMs / 1000} s and was stopped`

const TIMEOUT_HINT = "add an index, narrow the query, or page it"

/** The guard's verdict on a statement. */
export const fromGuard = (r: SqlRefusal): SqlRefused =>
  refuse(r.code, r.reason, r.reason.includes("reserved") ? "pass text needed as data as a bound argument" : undefined)

/** The registry did not answer: retry. */
export const registryDown = (_: StoreError): SqlRefused =>
  refuse(Code.UNAVAILABLE, "the database registry is unavailable", "retry shortly", 1)

/**
 * A failure on a SQLite file. The database's own message goes back (it is about the tenant's
 * SQL); nothing else does: no path, no stack.
 */
/** What a worker reported: SqliteWorkers' failure, described here so this module imports none of it. */
export interface SqliteFailureLike {
  readonly kind: WorkerFailure["kind"] | "timeout" | "overloaded"
  readonly message: string
  readonly index?: number | undefined
}

export const fromSqlite = (f: SqliteFailureLike): SqlRefused => {
  const at = f.index === undefined ? "" : `op ${f.index}: `
  switch (f.kind) {
    case "statement":
      return f.index === undefined
        ? refuse(Code.SQL_ERROR, f.message)
        : refuse(Code.TRANSACTION_FAILED, `transaction failed at ${at}${f.message}`, "nothing was applied")
    case "missing":
      return refuse(Code.NOT_FOUND, "no such database")
    case "too_large":
      return refuse(Code.PAYLOAD_TOO_LARGE, f.message)
    case "timeout":
      return refuse(Code.STATEMENT_TIMEOUT, `${at}${f.message}`, TIMEOUT_HINT)
    case "busy":
      return refuse(Code.UNAVAILABLE, "the database is locked by another statement", "retry shortly", 1)
    case "overloaded":
      return refuse(Code.UNAVAILABLE, f.message, "retry shortly", 1)
    case "io":
      return refuse(Code.UNAVAILABLE, "the database could not be reached", "retry shortly", 1)
  }
}

/** A statement stopped at the statement timeout by rqlite: the workers' refusal, word for word. */
export const statementTimedOut = (timeoutMs: number): SqlRefused =>
  refuse(Code.STATEMENT_TIMEOUT, timeoutMessage(timeoutMs), TIMEOUT_HINT)
