/**
 * A namespace's cluster SQL store on its own rqlite cluster (`SqlEngine`), made of:
 *   - RqliteExchange.ts: the HTTP exchange with rqlited, each statement under rqlite's
 *     `db_timeout` (the statement timeout of the embedded engine), and the refusals;
 *   - RqliteAnswer.ts: rqlite's answers as read, and a result as the route answers it;
 *   - RqliteStoredCells.ts: reads rewritten so that every cell answers as stored;
 *   - RqliteBatching.ts: which statements go in batches (Batcher.ts);
 *   - RqliteReads.ts, RqliteWrites.ts: the statement paths;
 * and here, a caller's transaction (`batch`) and the whole-database export and import.
 */
import { Effect } from "effect"
import { createReadStream, createWriteStream } from "node:fs"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Code } from "../../domain/Errors.js"
import { readAnswer } from "../../domain/SqlAnswers.js"
import type { RqliteHttpConfig } from "../registry/RqliteHttp.js"
import { resultJson, type RqliteResult } from "./RqliteAnswer.js"
import { runTimes } from "./RqliteBatching.js"
import { rqliteExchange } from "./RqliteExchange.js"
import { rqliteReads } from "./RqliteReads.js"
import { allWrapped, cellsSql, COLUMN_COUNT_CHANGED, storedRows } from "./RqliteStoredCells.js"
import { rqliteWrites } from "./RqliteWrites.js"
import type { SqlEngine } from "./SqlEngine.js"
import type { StatementOp } from "./SqliteProtocol.js"
import { refuse } from "./SqlRefused.js"

/** Prepares everywhere, fails when run ("integer overflow"): ends a dry run, rolling it all back. */
const ROLLBACK_SENTINEL: StatementOp = { sql: "SELECT abs(-9223372036854775807 - 1)", params: [], kind: "read" }

export const RqliteSqlEngine = {
  /** `config.timeout` is the statement timeout (default 10 s); each HTTP attempt gets 5 s more. */
  make: (config: RqliteHttpConfig): SqlEngine => {
    const x = rqliteExchange(config)
    const { firstFailure, http, post, transfer } = x
    const { executeTx: EXECUTE_TX, requestTx: REQUEST_TX } = x.paths
    const times = runTimes(x.timeoutMs, x.stopsStatements)
    const { forget, read, readNow } = rqliteReads(x, times)
    const write = rqliteWrites(x, times)

    return {
      kind: "rqlite",
      statement: (op, shape) => (op.kind === "read" ? read(op, shape, 0) : write(op, shape)),
      statementNow: (op, shape, done) => op.kind === "read" && readNow(op, shape, done),
      batch: (ops, returnResults) => {
        /** `wrapped`: per op, the column names of a read sent as `cellsSql`. */
        const answer = (results: ReadonlyArray<RqliteResult>, wrapped?: ReadonlyArray<ReadonlyArray<string> | undefined>) => {
          const failed = firstFailure(results)
          if (failed !== undefined) return Effect.fail(failed)
          if (results.length !== ops.length) {
            return Effect.fail(refuse(Code.UNAVAILABLE, "the SQL store returned a partial answer", "retry shortly", 1))
          }
          const texts = results.map((r, i) => {
            const columns = wrapped?.[i]
            return columns === undefined ? resultJson(r, ops[i]?.kind ?? "write", "counted") : readAnswer("counted", columns, storedRows(r, allWrapped(columns.length)) ?? [])
          })
          return Effect.succeed(
            returnResults ? `{"results":[${texts.join(",")}],"count":${texts.length}}` : `{"status":"ok","count":${texts.length}}`
          )
        }
        // rqlite's /db/execute?transaction rolls back at the first failing statement, however it
        // fails. Its /db/request?transaction, the only way to get rows back, does not for a
        // statement that fails to prepare (a missing table or function): it skips it and commits
        // the rest. So rows are asked for only when the caller wants them and a read op is there,
        // and then after a dry run that ends in a statement failing at run time, which rolls the
        // whole dry run back: a prepare failure shows up there with nothing applied. (A table
        // dropped by another writer between the dry run and the run can still slip through.)
        if (!returnResults || ops.every((op) => op.kind === "write")) {
          return Effect.flatMap(post(EXECUTE_TX, ops, false), answer)
        }
        return Effect.flatMap(post(REQUEST_TX, [...ops, ROLLBACK_SENTINEL], true), (dry) => {
          const failed = firstFailure(dry.slice(0, ops.length))
          if (failed !== undefined) return Effect.fail(failed)
          if (dry.length !== ops.length + 1 || dry[ops.length]?.error === undefined) {
            return Effect.fail(refuse(Code.UNAVAILABLE, "the SQL store answered the dry run unexpectedly", "retry shortly", 1))
          }
          // the reads again, wrapped to answer as stored; the dry run gave their column names
          const wrapped = ops.map((op, i) => (op.kind === "read" ? cellsSql(op.sql, allWrapped(dry[i]?.columns?.length ?? 0)) : undefined))
          const run = ops.map((op, i) => {
            const sql = wrapped[i]
            return sql === undefined ? op : { ...op, sql }
          })
          return Effect.flatMap(post(REQUEST_TX, run, false), (results) =>
            results.some((r) => r.error !== undefined && COLUMN_COUNT_CHANGED.test(r.error))
              ? Effect.fail(refuse(Code.UNAVAILABLE, "the schema changed during the transaction; nothing was applied", "retry shortly", 1))
              : answer(
                  results,
                  wrapped.map((sql, i) => (sql === undefined ? undefined : (dry[i]?.columns ?? [])))
                )
          )
        })
      },
      exportTo: (dest) =>
        transfer("export", async (signal) => {
          const response = await fetch(`${http.base}/db/backup`, { headers: http.headers, signal })
          if (response.status !== 200 || response.body === null) throw new Error(`backup answered ${response.status}`)
          await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), createWriteStream(dest), { signal })
        }),
      importFrom: (source) =>
        transfer("import", async (signal) => {
          // a follower redirects to the leader; the file is sent again from the start
          let url = `${http.base}/db/load`
          for (let hop = 0; hop < 3; hop++) {
            const response = await fetch(url, {
              method: "POST",
              headers: { ...http.headers, "content-type": "application/octet-stream" },
              body: Readable.toWeb(createReadStream(source)) as unknown as ReadableStream<Uint8Array>,
              duplex: "half",
              redirect: "manual",
              signal
            } as RequestInit)
            const location = response.headers.get("location")
            if (response.status >= 300 && response.status < 400 && location !== null) {
              url = new URL(location, url).toString()
              continue
            }
            const text = await response.text()
            if (response.status !== 200) throw new Error(`load answered ${response.status}`)
            const parsed: unknown = JSON.parse(text)
            const results = typeof parsed === "object" && parsed !== null && "results" in parsed ? parsed.results : undefined
            const error = Array.isArray(results) ? results.find((r: unknown) => typeof r === "object" && r !== null && "error" in r) : undefined
            if (error !== undefined) throw new Error("the cluster refused the file")
            // a new schema, whose version may be one a remembered read was learnt under
            forget()
            return
          }
          throw new Error("too many redirects")
        })
    }
  }
}
