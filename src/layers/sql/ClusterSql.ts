/**
 * The cluster SQL store's rules (spec §4.3): the SQL guard on every statement for everyone, the
 * ORM builders, statement kinds per route, the schema view without reserved tables, and whole
 * database export and import through the gateway's one transfer slot.
 */
import { Context, Effect, Either, Exit, Layer, Runtime, type Scope, Stream } from "effect"
import { createReadStream, statSync } from "node:fs"
import { open } from "node:fs/promises"
import { Code } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { bindingProblem, buildFind, buildSelect, quoteIdentifier, type OrmFind, type OrmSelect, type OrmValue } from "../../domain/OrmQuery.js"
import { guardClusterSql, isReservedName } from "../../domain/SqlGuard.js"
import { type Token, tokenize } from "../../domain/SqlTokens.js"
import { Audit } from "../audit/Audit.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { spoolFile } from "../transfer/SpoolFile.js"
import { TransferSlot } from "../transfer/TransferSlot.js"
import { ClusterSqlStore } from "./ClusterSqlStore.js"
import type { BindValue, StatementOp } from "./SqliteProtocol.js"
import { SqliteWorkers } from "./SqliteWorkers.js"
import { fromGuard, fromSqlite, refuse, type SqlRefused } from "./SqlRefused.js"


/**
 * The objects SQLite creates by itself, as it writes them: AUTOINCREMENT's counter, ANALYZE's
 * tables (stat2 and stat3 from older versions), constraint indexes (no SQL). A table under one of
 * these names with any other definition was planted.
 */
const SQLITE_TABLES: ReadonlyMap<string, string> = new Map([
  ["sqlite_sequence", "CREATE TABLE sqlite_sequence(name,seq)"],
  ["sqlite_stat1", "CREATE TABLE sqlite_stat1(tbl,idx,stat)"],
  ["sqlite_stat2", "CREATE TABLE sqlite_stat2(tbl,idx,sampleno,sample)"],
  ["sqlite_stat3", "CREATE TABLE sqlite_stat3(tbl,idx,neq,nlt,ndlt,sample)"],
  ["sqlite_stat4", "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)"]
])
const isSqliteInternal = (object: { readonly type: string; readonly name: string; readonly sql: string | null }): boolean =>
  object.type === "table"
    ? SQLITE_TABLES.get(object.name) === object.sql
    : object.type === "index" && object.sql === null && object.name.startsWith("sqlite_autoindex_")

export interface TransactionOp {
  readonly kind: "exec" | "query"
  readonly sql: string
  readonly args: ReadonlyArray<OrmValue>
}

/** Ops in one transaction: one Raft entry on rqlite, one SQLite transaction embedded. */
export const MAX_TRANSACTION_OPS = 1000

export interface ExportedDatabase {
  /** A snapshot file, removed when the request's scope closes. */
  readonly file: string
  readonly size: number
  /**
   * The file's bytes for the answer. The transfer slot is given back as its last byte is read,
   * before that byte is handed to the client, so a client holding the whole export finds the
   * slot free (an import right after it is not a 429).
   */
  readonly body: Stream.Stream<Uint8Array, unknown>
}

export interface ClusterSqlService {
  /** One read; its answer `{columns, rows, count}`, or in `shape` (functions' `db_query` takes `objects`). */
  readonly query: (caller: Principal, sql: string, args: ReadonlyArray<OrmValue>, shape?: "counted" | "objects") => Effect.Effect<string, SqlRefused>
  readonly exec: (caller: Principal, sql: string, args: ReadonlyArray<OrmValue>) => Effect.Effect<string, SqlRefused>
  /**
   * `query` (`expect` "read") or `exec` ("write") for a caller outside a fiber (the fast lane):
   * `done` gets the outcome once. The statement runs without a fiber where its engine can
   * (`SqlEngine.statementNow`), else as the effect. There is no calling it off.
   */
  readonly statementNow: (
    caller: Principal,
    sql: string,
    args: ReadonlyArray<OrmValue>,
    expect: "read" | "write",
    done: (exit: Exit.Exit<string, SqlRefused>) => void
  ) => void
  readonly find: (caller: Principal, request: OrmFind, one: boolean) => Effect.Effect<string, SqlRefused>
  readonly select: (caller: Principal, request: OrmSelect, one: boolean) => Effect.Effect<string, SqlRefused>
  readonly transaction: (
    caller: Principal,
    ops: ReadonlyArray<TransactionOp>,
    returnResults: boolean
  ) => Effect.Effect<string, SqlRefused>
  /** Tables and views with their CREATE statements, reserved names left out. */
  readonly schema: (
    caller: Principal
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly type: string; readonly sql: string | null }>, SqlRefused>
  readonly createTable: (caller: Principal, schema: string) => Effect.Effect<string, SqlRefused>
  readonly dropTable: (caller: Principal, table: string) => Effect.Effect<string, SqlRefused>
  /** Holds the transfer slot for the scope (the streamed answer). */
  readonly exportDb: (caller: Principal) => Effect.Effect<ExportedDatabase, SqlRefused, Scope.Scope>
  readonly importDb: (
    caller: Principal,
    body: Stream.Stream<Uint8Array, unknown>
  ) => Effect.Effect<{ readonly bytes: number; readonly tables: number }, SqlRefused>
  /**
   * Import's offline check of a database file on disk (a namespace restore's cluster SQL store):
   * the number of tables, or the refusal import would give.
   */
  readonly checkFile: (file: string) => Effect.Effect<number, SqlRefused>
}

const bind = (args: ReadonlyArray<OrmValue>): ReadonlyArray<BindValue> =>
  args.map((a) => (typeof a === "boolean" ? (a ? 1 : 0) : a))

/** The first two keywords, upper-cased: `CREATE TABLE`, `CREATE VIRTUAL`, ... */
const leadingWords = (sql: string): string =>
  tokenize(sql)
    .filter((t) => t.kind === "identifier" && t.quoted !== true)
    .slice(0, 3)
    .map((t) => t.value.toUpperCase())
    .join(" ")

/**
 * The statement without its first trailing `;` and all after it. rqlite's SQLite driver runs the
 * rest of a text as further statements, and a rest of only `;`s and comments (`SELECT 1; -- x`,
 * `SELECT 1;;`) makes it spin a read until the statement timeout and a write answer no counts.
 * Comments before the `;` stay: they can be part of an unaliased column's name
 * (`SELECT 1 -- x` names its column `1 -- x`), on both engines.
 */
const withoutTail = (sql: string, tokens: ReadonlyArray<Token>): string => {
  let cut: number | undefined
  for (let i = tokens.length - 1; i >= 0; i--) {
    const token = tokens[i]
    if (token === undefined || token.kind === "whitespace") continue
    if (token.text !== ";") break
    cut = token.start
  }
  return cut === undefined ? sql : sql.slice(0, cut)
}

/** The SQLite header every database file starts with. */
const SQLITE_HEADER = Buffer.from("SQLite format 3\0", "latin1")

export class ClusterSql extends Context.Tag("portico/ClusterSql")<ClusterSql, ClusterSqlService>() {
  static readonly Live = Layer.effect(
    ClusterSql,
    Effect.gen(function* () {
      const stores = yield* ClusterSqlStore
      const workers = yield* SqliteWorkers
      const slot = yield* TransferSlot
      const audit = yield* Audit
      const config = yield* PorticoConfig

      const runCallback = Runtime.runCallback(yield* Effect.runtime<never>())

      /**
       * Guards one statement and checks it against what the route runs. A read route runs only
       * statements that read (`Inspected.readOnly`, an allow-list), not all that the verb rule
       * calls reads: ANALYZE or REINDEX there would write through it. Those go to the write
       * route, which runs what the verb rule calls a write and anything else that is not
       * read-only, answering counts. A read op also carries `readOnly`, so that the embedded
       * engine has SQLite confirm it (sqlite3_stmt_readonly) before running it.
       */
      const guardedNow = (sql: string, args: ReadonlyArray<OrmValue>, expect: "read" | "write"): Either.Either<StatementOp, SqlRefused> => {
        const checked = guardClusterSql(sql)
        if (!checked.ok) return Either.left(fromGuard(checked.refusal))
        const { kind, readOnly, verb } = checked.statement
        const fits = expect === "read" ? kind === "read" && readOnly : kind === "write" || !readOnly
        if (!fits) {
          return Either.left(
            refuse(
              Code.VALIDATION_FAILED,
              expect === "read"
                ? kind === "read" && verb !== ""
                  ? `this route runs reads only, and ${verb} can change the database`
                  : "this route runs reads only"
                : "this route runs writes only",
              expect === "read" ? "send writes and DDL to /v1/rqlite/exec" : "send reads to /v1/rqlite/query"
            )
          )
        }
        const op = { sql: withoutTail(sql, checked.statement.tokens), params: bind(args) }
        return Either.right(expect === "read" ? { ...op, kind: "read", readOnly: true } : { ...op, kind: "write" })
      }
      const guarded = (sql: string, args: ReadonlyArray<OrmValue>, expect: "read" | "write"): Effect.Effect<StatementOp, SqlRefused> =>
        Effect.suspend(() => guardedNow(sql, args, expect))

      const tempFile = (prefix: string) => spoolFile(config.dataDir, prefix)

      /** Writes the body to disk as it arrives; the adapter has already capped its length. */
      const spoolTo = (file: string, body: Stream.Stream<Uint8Array, unknown>) =>
        Effect.acquireUseRelease(
          Effect.promise(() => open(file, "wx", 0o600)),
          (handle) => {
            let bytes = 0
            const cut = Stream.mapError(body, () => refuse(Code.BAD_REQUEST, "the upload was cut short"))
            return Stream.runForEach(cut, (chunk) => {
              bytes += chunk.byteLength
              return bytes > config.sql.importMaxBytes
                ? Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the import is over ${config.sql.importMaxBytes} bytes`))
                : Effect.asVoid(Effect.promise(() => handle.write(chunk)))
            }).pipe(Effect.map(() => bytes))
          },
          (handle) => Effect.promise(() => handle.close())
        )

      /**
       * The offline check of an uploaded database: a real SQLite file, intact, holding no
       * triggers and nothing that names a reserved platform table, so loading it cannot plant
       * what the guard keeps tenants from creating.
       */
      const checkImport = (file: string) =>
        Effect.gen(function* () {
          const header = Buffer.alloc(SQLITE_HEADER.length)
          const fd = yield* Effect.promise(() => open(file, "r"))
          yield* Effect.promise(() => fd.read(header, 0, header.length, 0).finally(() => fd.close()))
          if (!header.equals(SQLITE_HEADER)) {
            return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, "the body is not a SQLite database file"))
          }
          const inspected = yield* workers.run({ op: "inspect", file }, config.sql.transferBudgetMs).pipe(
            Effect.mapError((f) =>
              f.kind === "statement" || f.kind === "missing"
                ? refuse(Code.VALIDATION_FAILED, `the database file is damaged: ${f.message}`)
                : fromSqlite(f)
            )
          )
          if (inspected.type !== "inspected") return yield* Effect.fail(refuse(Code.UNAVAILABLE, "inspection failed", "retry", 1))
          if (inspected.integrity.length !== 1 || inspected.integrity[0] !== "ok") {
            return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, "the database file is damaged (quick_check failed)"))
          }
          let tables = 0
          for (const object of inspected.objects) {
            if (object.type === "trigger") {
              return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, `the file holds a trigger (${object.name}); triggers cannot be imported`))
            }
            // SQLite's own bookkeeping is not the tenant's and is not checked further; any other
            // object under SQLite's reserved prefix was planted with writable_schema: refused
            if (isSqliteInternal(object)) continue
            if (object.name.toLowerCase().startsWith("sqlite_")) {
              return yield* Effect.fail(
                refuse(Code.VALIDATION_FAILED, `the file's ${object.type} "${object.name}" uses a name SQLite reserves for itself`)
              )
            }
            if (isReservedName(object.name) || isReservedName(object.tbl_name)) {
              return yield* Effect.fail(
                refuse(Code.VALIDATION_FAILED, `the file's ${object.type} "${object.name}" names a reserved platform table`)
              )
            }
            const checked = object.sql === null ? undefined : guardClusterSql(object.sql)
            if (checked !== undefined && !checked.ok) {
              return yield* Effect.fail(
                refuse(Code.VALIDATION_FAILED, `the file's ${object.type} "${object.name}" is refused: ${checked.refusal.reason}`)
              )
            }
            if (object.type === "table") tables++
          }
          return tables
        })

      const service: ClusterSqlService = {
        query: (caller, sql, args, shape = "counted") =>
          Effect.flatMap(guarded(sql, args, "read"), (op) => stores.engineFor(caller.namespace).statement(op, shape)),
        exec: (caller, sql, args) =>
          Effect.flatMap(guarded(sql, args, "write"), (op) => stores.engineFor(caller.namespace).statement(op, "counted")),
        statementNow: (caller, sql, args, expect, done) => {
          const op = guardedNow(sql, args, expect)
          if (Either.isLeft(op)) return done(Exit.fail(op.left))
          const engine = stores.engineFor(caller.namespace)
          if (engine.statementNow?.(op.right, "counted", done) !== true) runCallback(engine.statement(op.right, "counted"), { onExit: done })
        },
        find: (caller, request, one) =>
          Effect.suspend(() => {
            if (isReservedName(request.table)) return Effect.fail(reservedTable(request.table))
            const problem = bindingProblem(request)
            if (problem !== undefined) return Effect.fail(refuse(Code.VALIDATION_FAILED, problem))
            const built = buildFind(request, one)
            return Effect.flatMap(guarded(built.sql, built.params, "read"), (op) =>
              stores.engineFor(caller.namespace).statement(op, one ? "one" : "items")
            )
          }),
        select: (caller, request, one) =>
          Effect.suspend(() => {
            if (isReservedName(request.table)) return Effect.fail(reservedTable(request.table))
            const problem = bindingProblem(request)
            if (problem !== undefined) return Effect.fail(refuse(Code.VALIDATION_FAILED, problem))
            const built = buildSelect(request, one)
            return Effect.flatMap(guarded(built.sql, built.params, "read"), (op) =>
              stores.engineFor(caller.namespace).statement(op, one ? "one" : "items")
            )
          }),
        transaction: (caller, ops, returnResults) =>
          Effect.gen(function* () {
            if (ops.length === 0) return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, "ops is empty"))
            if (ops.length > MAX_TRANSACTION_OPS) {
              return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `at most ${MAX_TRANSACTION_OPS} ops per transaction`))
            }
            const statements: Array<StatementOp> = []
            for (const [i, op] of ops.entries()) {
              const checked = yield* Effect.mapError(guarded(op.sql, op.args, op.kind === "query" ? "read" : "write"), (r) =>
                refuse(r.code, `op ${i}: ${r.reason}`, r.hint)
              )
              statements.push(checked)
            }
            return yield* stores.engineFor(caller.namespace).batch(statements, returnResults)
          }),
        schema: (caller) =>
          Effect.gen(function* () {
            const text = yield* stores.engineFor(caller.namespace).statement(
              {
                sql: "SELECT name, type, sql FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                params: [],
                kind: "read"
              },
              "items"
            )
            const parsed = JSON.parse(text) as { readonly items: ReadonlyArray<{ name: string; type: string; sql: string | null }> }
            return parsed.items.filter((t) => !isReservedName(t.name))
          }),
        createTable: (caller, schema) =>
          Effect.gen(function* () {
            // the guard first: what it refuses (a temporary table, a reserved name) is 403 as on every route
            const op = yield* guarded(schema, [], "write")
            const words = leadingWords(schema)
            if (!(words.startsWith("CREATE TABLE") || words.startsWith("CREATE VIRTUAL TABLE"))) {
              return yield* Effect.fail(refuse(Code.VALIDATION_FAILED, "schema must be one CREATE TABLE statement"))
            }
            const answer = yield* stores.engineFor(caller.namespace).statement(op, "counted")
            yield* audit.record(caller.namespace, "sql.create_table", caller.subject, "", {})
            return answer
          }),
        dropTable: (caller, table) =>
          Effect.gen(function* () {
            if (isReservedName(table)) return yield* Effect.fail(reservedTable(table))
            const op = yield* guarded(`DROP TABLE IF EXISTS ${quoteIdentifier(table)}`, [], "write")
            const answer = yield* stores.engineFor(caller.namespace).statement(op, "counted")
            yield* audit.record(caller.namespace, "sql.drop_table", caller.subject, table, {})
            return answer
          }),
        exportDb: (caller) =>
          Effect.gen(function* () {
            // held until the answer's last byte is read (or the request's scope closes), within
            // the budget
            const release = yield* slot.hold("export")
            const file = yield* tempFile("export")
            yield* stores.engineFor(caller.namespace).exportTo(file)
            yield* audit.record(caller.namespace, "sql.export", caller.subject, "", {})
            const size = statSync(file).size
            return { file, size, body: releasingAtEnd(file, size, release) }
          }),
        importDb: (caller, body) =>
          Effect.scoped(
            slot.run(
              "import",
              Effect.gen(function* () {
                const file = yield* tempFile("import")
                const bytes = yield* spoolTo(file, body)
                const tables = yield* checkImport(file)
                yield* stores.engineFor(caller.namespace).importFrom(file)
                yield* audit.record(caller.namespace, "sql.import", caller.subject, "", { bytes, tables })
                return { bytes, tables }
              })
            )
          ),
        checkFile: (file) => checkImport(file)
      }
      return service
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    ClusterSql.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          ClusterSqlStore.Test,
          SqliteWorkers.Test,
          TransferSlot.Test,
          Audit.Test,
          PorticoConfig.Test
        )
      )
    )
  )
}

/**
 * The file's bytes; `release` runs once `size` bytes have been read, before the chunk holding
 * the last of them is passed on (and so before the client can have it), or at the end of the
 * file if it came out shorter.
 */
const releasingAtEnd = (file: string, size: number, release: Effect.Effect<void>): Stream.Stream<Uint8Array, unknown> => {
  let read = 0
  const chunks = Stream.mapEffect(
    Stream.fromAsyncIterable(createReadStream(file) as AsyncIterable<Uint8Array>, (e) => e),
    (chunk) => {
      read += chunk.byteLength
      return read >= size ? Effect.as(release, chunk) : Effect.succeed(chunk)
    }
  )
  return Stream.concat(chunks, Stream.execute(release))
}

const reservedTable = (table: string) =>
  refuse(Code.SQL_NOT_ALLOWED, `"${table}" is a reserved platform table name`, "choose another table name")
