/** Messages between the gateway and its SQLite worker processes (see SqliteWorkers.ts). */
import type { AnswerShape } from "../../domain/SqlAnswers.js"

/** A value bound to a `?` parameter. */
export type BindValue = string | number | bigint | null

export interface StatementOp {
  readonly sql: string
  readonly params: ReadonlyArray<BindValue>
  /** Decides the answer: a read answers rows, a write answers rows_affected/last_insert_id. */
  readonly kind: "read" | "write"
  /**
   * The route reads only: the embedded worker refuses the statement when SQLite says it would
   * change the database (sqlite3_stmt_readonly), before running it. rqlite's `/db/query` makes
   * the same check itself; in a transaction the SQL guard's allow-list is what keeps writes out.
   */
  readonly readOnly?: boolean
}

export type WorkerRequest =
  | ({ readonly op: "statement"; readonly file: string; readonly shape: AnswerShape } & StatementOp)
  /** All ops in one transaction; the first failing op rolls everything back. */
  | { readonly op: "batch"; readonly file: string; readonly ops: ReadonlyArray<StatementOp>; readonly returnResults: boolean }
  /**
   * Creates the file (WAL on). By default a leftover file the registry no longer knows is
   * replaced; with `ifMissing` an existing file is kept.
   */
  | { readonly op: "create"; readonly file: string; readonly ifMissing?: boolean }
  /** Closes and removes the file with its WAL and shared-memory files. */
  | { readonly op: "drop"; readonly file: string }
  /** Closes the file and puts `from` (a checked database file) in its place. */
  | { readonly op: "replace"; readonly file: string; readonly from: string }
  /** SQLite's online backup of `file` into `dest` (a new file). */
  | { readonly op: "backup"; readonly file: string; readonly dest: string }
  /** Opens `file` read-only and reports its integrity and schema objects (import checks). */
  | { readonly op: "inspect"; readonly file: string }

export interface SchemaObject {
  readonly type: string
  readonly name: string
  readonly tbl_name: string
  readonly sql: string | null
}

export type WorkerValue =
  /** A JSON text ready to be the response body. */
  | { readonly type: "json"; readonly json: string }
  | { readonly type: "done" }
  | { readonly type: "inspected"; readonly integrity: ReadonlyArray<string>; readonly objects: ReadonlyArray<SchemaObject> }

export type WorkerFailure = {
  /**
   * statement: the database refused the SQL (400 with its message); missing: no such file;
   * too_large: the answer passed the result cap;
   * busy: locked by another writer past the busy timeout; io: anything else.
   */
  readonly kind: "statement" | "missing" | "too_large" | "busy" | "io"
  readonly message: string
  /** For a batch: the index of the op that failed. */
  readonly index?: number
}

export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly value: WorkerValue }
  | { readonly id: number; readonly ok: false; readonly failure: WorkerFailure }

export interface WorkerOptions {
  /** Largest answer a worker builds before refusing (a SELECT over a huge table). */
  readonly maxResultBytes: number
  /** How long a statement waits for another connection's lock. */
  readonly busyTimeoutMs: number
  /** Connections a worker keeps open. */
  readonly maxOpen: number
}
