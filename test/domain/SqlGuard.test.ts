import { describe, expect, it } from "vitest"
import {
  type Checked,
  guardClusterSql,
  guardLocalSql,
  isReservedName,
  LOCAL_PRAGMAS,
  RESERVED_TABLES,
  readsOnly,
  singleStatement,
  statementKind
} from "../../src/domain/SqlGuard.js"
import { tokenize } from "../../src/domain/SqlTokens.js"

const kindOf = (sql: string) => statementKind(tokenize(sql))

const refusal = (checked: Checked) => (checked.ok ? undefined : checked.refusal)

const expectRefused = (checked: Checked, status: 400 | 403) => {
  const refused = refusal(checked)
  expect(refused?.status).toBe(status)
  expect(refused?.code).toBe(status === 403 ? "SQL_NOT_ALLOWED" : "VALIDATION_FAILED")
}


/** Transaction control and the temp schema: refused on every tenant route, node-local and cluster alike. */
const transactionControl = [
  "CREATE TEMP TABLE z(a)",
  "create temporary view v as select 1",
  "CREATE TABLE temp.z2(a)",
  'CREATE TABLE "temp" . z3(a)',
  "CREATE INDEX temp.i ON t(a)",
  "SELECT * FROM temp.sqlite_master",
  "SELECT * FROM [TEMPORARY].sqlite_schema",
    "BEGIN",
    "begin immediate transaction",
    "BEGIN EXCLUSIVE;",
    "COMMIT",
    "commit transaction",
    "END",
    "END TRANSACTION",
    "ROLLBACK",
    "ROLLBACK TO SAVEPOINT s",
    "SAVEPOINT s",
    "RELEASE s",
    "release savepoint s",
    "/* c */ ; BEGIN",
    "EXPLAIN BEGIN"
]

describe("statementKind", () => {
  it("classifies the write verbs, in any case", () => {
    for (const sql of [
      "INSERT INTO t VALUES (1)",
      "update t set a = 1",
      "DELETE FROM t",
      "CREATE TABLE t (a)",
      "DROP TABLE t",
      "ALTER TABLE t ADD COLUMN b",
      "REPLACE INTO t VALUES (1)",
      "TRUNCATE t",
      "insert or replace into t values (1)"
    ]) {
      expect(kindOf(sql).kind, sql).toBe("write")
    }
    expect(kindOf("  -- lead\n/* x */ insert into t values (1)")).toEqual({ kind: "write", verb: "INSERT" })
  })

  it("classifies everything else as a read", () => {
    expect(kindOf("SELECT 1")).toEqual({ kind: "read", verb: "SELECT" })
    expect(kindOf("select 1")).toEqual({ kind: "read", verb: "SELECT" })
    expect(kindOf("VALUES (1), (2)")).toEqual({ kind: "read", verb: "VALUES" })
    expect(kindOf("PRAGMA table_info(t)")).toEqual({ kind: "read", verb: "PRAGMA" })
    expect(kindOf("EXPLAIN SELECT 1")).toEqual({ kind: "read", verb: "EXPLAIN" })
    expect(kindOf("EXPLAIN QUERY PLAN DELETE FROM t")).toEqual({ kind: "read", verb: "EXPLAIN" })
    expect(kindOf("explain insert into t values (1)").kind).toBe("read")
  })

  it("looks past a WITH clause for the main verb", () => {
    expect(kindOf("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x")).toEqual({ kind: "write", verb: "INSERT" })
    expect(kindOf("with x as (select 1) delete from t where a in x").kind).toBe("write")
    expect(kindOf("WITH x AS (SELECT 1) UPDATE t SET a = 1").kind).toBe("write")
    expect(kindOf("WITH x AS (SELECT 1) REPLACE INTO t SELECT * FROM x").kind).toBe("write")
    expect(kindOf("WITH x AS (SELECT '(' ) SELECT * FROM x")).toEqual({ kind: "read", verb: "SELECT" })
    expect(kindOf('WITH x AS (SELECT ")" AS ")") SELECT * FROM x').kind).toBe("read")
    expect(
      kindOf(
        "WITH RECURSIVE a(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM a WHERE n < 3), " +
          "b AS NOT MATERIALIZED (SELECT (1)), 'c' AS MATERIALIZED (SELECT 2) INSERT INTO t SELECT n FROM a"
      )
    ).toEqual({ kind: "write", verb: "INSERT" })
  })

  it("treats a WITH clause it cannot follow as a write, the stricter kind", () => {
    expect(kindOf("WITH x AS (SELECT 1 INSERT INTO t VALUES (1)")).toEqual({ kind: "write", verb: "WITH" })
  })
})

describe("readsOnly", () => {
  const readOnly = (sql: string) => readsOnly(tokenize(sql))

  it("admits SELECT, VALUES, their WITH forms, reporting pragmas and EXPLAIN of those", () => {
    for (const sql of [
      "SELECT 1",
      " /* c */ select * from t;",
      "VALUES (1), (2)",
      "WITH x AS (SELECT 1) SELECT * FROM x",
      "WITH RECURSIVE a(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM a WHERE n < 3) SELECT n FROM a",
      "EXPLAIN SELECT 1",
      "EXPLAIN QUERY PLAN SELECT * FROM t",
      "PRAGMA user_version",
      "PRAGMA main.user_version;",
      "PRAGMA table_info(t)",
      "PRAGMA integrity_check",
      "PRAGMA foreign_keys"
    ]) {
      expect(readOnly(sql), sql).toBe(true)
    }
  })

  it("refuses everything that can change the file or the connection, whatever its verb-rule kind", () => {
    // all reads by the spec's verb rule, and all writers: the read route must not run them
    for (const sql of [
      "ANALYZE",
      "analyze t",
      "REINDEX",
      "REINDEX t_idx",
      "VACUUM",
      "PRAGMA user_version = 5",
      "PRAGMA user_version(5)",
      "PRAGMA main.application_id = 1",
      "PRAGMA foreign_keys = OFF",
      "PRAGMA optimize",
      "PRAGMA wal_checkpoint",
      "PRAGMA incremental_vacuum",
      "EXPLAIN INSERT INTO t VALUES (1)",
      "EXPLAIN QUERY PLAN DELETE FROM t",
      "EXPLAIN PRAGMA user_version = 5",
      "ATTACH 'x' AS y",
      "DETACH y",
      "BEGIN",
      "SAVEPOINT s",
      "CREATE TABLE t (a)",
      "INSERT INTO t VALUES (1) RETURNING a",
      "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x RETURNING *",
      "WITH x AS (SELECT 1 INSERT INTO t VALUES (1)",
      "SELECTED",
      ""
    ]) {
      expect(readOnly(sql), sql).toBe(false)
    }
  })

  it("is part of the verdict", () => {
    const analyze = singleStatement("ANALYZE")
    expect(analyze.ok && analyze.statement).toMatchObject({ kind: "read", readOnly: false })
    const select = guardClusterSql("SELECT 1")
    expect(select.ok && select.statement).toMatchObject({ kind: "read", readOnly: true })
  })
})

describe("singleStatement", () => {
  it("accepts one statement with trailing semicolons and comments", () => {
    for (const sql of [
      "SELECT 1",
      "SELECT 1;",
      "SELECT 1;;  ;",
      "SELECT 1; -- c",
      "SELECT 1; /* c */",
      "SELECT ';'",
      "SELECT 1 /* ; */",
      'SELECT "a;b" FROM t',
      "SELECT [a;b] FROM t",
      "SELECT 1 -- ; SELECT 2",
      "SELECT 1 /* unterminated",
      "; SELECT 1"
    ]) {
      const checked = singleStatement(sql)
      expect(checked.ok, sql).toBe(true)
    }
  })

  it("returns the kind, verb and tokens", () => {
    const checked = singleStatement("INSERT INTO t VALUES (1);")
    expect(checked.ok && checked.statement.kind).toBe("write")
    expect(checked.ok && checked.statement.verb).toBe("INSERT")
    expect(checked.ok && checked.statement.tokens.map((token) => token.text).join("")).toBe("INSERT INTO t VALUES (1);")
  })

  it("refuses a second statement", () => {
    for (const sql of ["SELECT 1; SELECT 2", "SELECT 1;SELECT 2;", "SELECT 1; -- c\nDROP TABLE t", "SELECT 1 /* x */; x"]) {
      expectRefused(singleStatement(sql), 400)
      expect(refusal(singleStatement(sql))?.reason, sql).toBe("one statement per call")
    }
  })

  it("refuses blank text", () => {
    for (const sql of ["", "  ;  ", ";", "-- only a comment", "/* c */ ; -- d"]) {
      expectRefused(singleStatement(sql), 400)
      expect(refusal(singleStatement(sql))?.reason, JSON.stringify(sql)).toBe("empty statement")
    }
  })

  it("refuses tokens SQLite would reject", () => {
    expect(refusal(singleStatement("SELECT 'unterminated"))).toEqual({
      status: 400,
      code: "VALIDATION_FAILED",
      reason: "unterminated string literal"
    })
    expect(refusal(singleStatement('SELECT "a'))?.reason).toBe("unterminated quoted identifier")
    expect(refusal(singleStatement("SELECT a ! b"))?.reason).toBe('unrecognized token: "!"')
    expect(refusal(singleStatement("SELECT 1\u0000; DROP TABLE t"))?.reason).toBe("SQL text contains a NUL character")
    for (const sql of ["SELECT #", "SELECT 1abc", "SELECT x'abc'", "SELECT {1}"]) expectRefused(singleStatement(sql), 400)
  })

  it("keeps a CREATE TRIGGER body, semicolons included, as one statement", () => {
    const trigger = "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM u; UPDATE v SET a = CASE WHEN 1 THEN 2 END; END"
    expect(singleStatement(trigger).ok).toBe(true)
    expect(singleStatement(`${trigger};`).ok).toBe(true)
    expect(singleStatement("create temporary trigger tr after insert on t begin select 1; end;").ok).toBe(true)
    expect(singleStatement("EXPLAIN CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END").ok).toBe(true)
    expect(refusal(singleStatement(`${trigger}; SELECT 1`))?.reason).toBe("one statement per call")
    // Outside a trigger, END is just a word and `;` ends the statement.
    expect(refusal(singleStatement("SELECT 1; END"))?.reason).toBe("one statement per call")
  })
})

describe("guardClusterSql", () => {
  // Every entry must be refused 403 SQL_NOT_ALLOWED.
  const bypassAttempts: ReadonlyArray<string> = [
    "SELECT * FROM keys",
    "select * from KEYS",
    "SELECT * FROM Keys",
    'SELECT * FROM "keys"',
    "SELECT * FROM [keys]",
    "SELECT * FROM `keys`",
    "SELECT * FROM 'keys'",
    "SELECT * FROM main.keys",
    "SELECT * FROM main . keys",
    'SELECT * FROM main/**/./**/"keys"',
    'SELECT * FROM "main"."keys"',
    "SELECT * FROM temp.keys",
    "SELECT * FROM/*c*/keys",
    "SELECT * FROM\nkeys--c",
    "SELECT * FROM\tkeys;",
    "SELECT * FROM \"keys \"",
    "SELECT * FROM [ KEYS ]",
    "SELECT name FROM sqlite_master WHERE name = 'keys'",
    "SELECT sql FROM sqlite_schema WHERE tbl_name = 'KEYS'",
    "SELECT * FROM pragma_table_info('keys')",
    "SELECT * FROM pragma_table_info('t')",
    "SELECT * FROM PRAGMA_TABLE_LIST",
    'SELECT * FROM "pragma_table_info"(\'t\')',
    'SELECT * FROM "keys" AS k',
    "SELECT k.* FROM keys k",
    "WITH x AS (SELECT * FROM sessions) SELECT * FROM x",
    "INSERT INTO t SELECT * FROM grants",
    "SELECT * FROM t WHERE id IN (SELECT id FROM namespaces)",
    "SELECT * FROM t JOIN deployments d ON 1",
    "CREATE TABLE functions (id)",
    'DROP TABLE "functions"',
    "ALTER TABLE t RENAME TO keys",
    "ALTER TABLE keys RENAME TO t",
    "CREATE VIEW v AS SELECT * FROM keys",
    "CREATE TEMP TABLE sessions (id)",
    "CREATE INDEX i ON api_keys (id)",
    "CREATE VIRTUAL TABLE f USING fts4(content=\"keys\", body)",
    "CREATE VIRTUAL TABLE f USING fts5(body, content='keys')",
    "UPDATE secrets SET value = 1",
    "DELETE FROM audit_log",
    "REPLACE INTO signing_keys VALUES (1)",
    "SELECT * FROM effect_sql_migrations",
    "SELECT * FROM local_databases",
    "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; END",
    "create temp trigger tr after insert on t begin select 1; end",
    "CREATE TEMPORARY TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;",
    "CREATE TRIGGER IF NOT EXISTS tr AFTER INSERT ON t BEGIN SELECT 1; END",
    "ATTACH 'x.db' AS x",
    "attach database ':memory:' as m",
    "DETACH x",
    "detach database x",
    "PRAGMA table_info(t)",
    "pragma foreign_keys=off",
    "PRAGMA main.user_version = 1",
    "EXPLAIN PRAGMA writable_schema = 1",
    "EXPLAIN QUERY PLAN ATTACH 'x' AS y",
    "VACUUM",
    "vacuum main",
    "VACUUM INTO '/tmp/x'",
    "SELECT load_extension('x')",
    "SELECT LOAD_EXTENSION('x', 'y')",
    'SELECT "load_extension"(\'x\')',
    "SELECT * FROM sqlite_dbpage",
    "SELECT fts3_tokenizer('simple')",
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('/tmp/x', 'y')",
    "SELECT edit('x')",
    "SELECT * FROM portico_anything",
    "SELECT * FROM PORTICO_Settings",
    'CREATE TABLE "portico_x" (a)'
  ]

  it.each([...bypassAttempts, ...transactionControl])("refuses %s", (sql) => {
    expectRefused(guardClusterSql(sql), 403)
  })

  // Every entry must pass.
  const allowed: ReadonlyArray<string> = [
    "SELECT * FROM users WHERE name = ?",
    "SELECT 'hello'",
    "INSERT INTO users (name) VALUES (?)",
    "INSERT INTO users (name) VALUES (:name), (@other), ($third), (?2)",
    "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT)",
    "SELECT * FROM sqlite_sequence",
    "SELECT * FROM users -- keys are great",
    "SELECT * FROM users /* sessions */",
    "SELECT * FROM users /* unterminated sessions",
    "SELECT * FROM monkeys",
    "SELECT keys_count FROM stats",
    "SELECT * FROM my_keys",
    "SELECT * FROM \"ke\"\"ys\"",
    // Cyrillic "е": a different (and here nonexistent) table to SQLite, so nothing reserved is named.
    "SELECT * FROM kеys",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 5) SELECT x FROM c",
    "UPDATE users SET name = 'x' WHERE id = 1",
    "DELETE FROM users WHERE id = 1",
    "CREATE TABLE triggers_log (a)",
    "SELECT edit FROM docs",
    "SELECT x'6b657973'",
    "EXPLAIN QUERY PLAN SELECT * FROM users",
    // a column or value called temp is not the temp schema
    "SELECT temp FROM readings WHERE temp > 'temp'",
    "SELECT r.temp FROM readings AS r"
  ]

  it.each(allowed)("allows %s", (sql) => {
    const checked = guardClusterSql(sql)
    expect(refusal(checked)).toBeUndefined()
  })

  it("passes the statement through", () => {
    const checked = guardClusterSql("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x")
    expect(checked.ok && checked.statement.kind).toBe("write")
    expect(checked.ok && checked.statement.verb).toBe("INSERT")
  })

  it("refuses malformed and multiple statements with 400 before any name rule", () => {
    expectRefused(guardClusterSql("SELECT 1; SELECT * FROM keys"), 400)
    expectRefused(guardClusterSql("SELECT 'keys"), 400)
    expectRefused(guardClusterSql(""), 400)
  })

  it("explains the refusal", () => {
    expect(refusal(guardClusterSql("SELECT * FROM main.KEYS"))?.reason).toBe("keys is a reserved name")
    expect(refusal(guardClusterSql("ATTACH 'x' AS y"))?.reason).toBe("ATTACH is not allowed")
    expect(refusal(guardClusterSql("CREATE TRIGGER t AFTER INSERT ON u BEGIN SELECT 1; END"))?.reason).toBe(
      "CREATE TRIGGER is not allowed"
    )
  })
})

describe("isReservedName", () => {
  it("matches reserved names and the portico_ prefix, ignoring ASCII case and padding", () => {
    expect(isReservedName("keys")).toBe(true)
    expect(isReservedName("KEYS")).toBe(true)
    expect(isReservedName(" keys ")).toBe(true)
    expect(isReservedName("Namespace_Members")).toBe(true)
    expect(isReservedName("portico_x")).toBe(true)
    expect(isReservedName("PORTICO_")).toBe(true)
    expect(isReservedName("users")).toBe(false)
    expect(isReservedName("monkeys")).toBe(false)
    expect(isReservedName("kеys")).toBe(false)
    expect(isReservedName("sqlite_sequence")).toBe(false)
    // The Kelvin sign is not an ASCII K: SQLite would name a different table.
    expect(isReservedName("\u212Aeys")).toBe(false)
  })
  it("keeps the list lower-case and sqlite_sequence out of it", () => {
    for (const name of RESERVED_TABLES) expect(name).toBe(name.toLowerCase())
    expect(RESERVED_TABLES.has("sqlite_sequence")).toBe(false)
  })
})

describe("guardLocalSql", () => {
  it.each([
    "PRAGMA table_info(t)",
    "PRAGMA main.table_info(t)",
    "PRAGMA MAIN.TABLE_INFO('t')",
    "PRAGMA table_list",
    "PRAGMA index_list(t)",
    "PRAGMA index_info(i)",
    "PRAGMA foreign_key_list(t)",
    "PRAGMA foreign_key_check",
    "PRAGMA foreign_keys = ON",
    "PRAGMA defer_foreign_keys=1",
    "PRAGMA user_version = 7",
    "PRAGMA user_version",
    "PRAGMA application_id=1",
    "PRAGMA integrity_check",
    "PRAGMA quick_check(10)",
    "PRAGMA page_count",
    "PRAGMA freelist_count",
    "PRAGMA optimize",
    'PRAGMA "table_info"(t)',
    "SELECT * FROM pragma_table_info('t')",
    "SELECT * FROM pragma_table_info('t', 'main')",
    "SELECT * FROM pragma_table_info('t', \"MAIN\")",
    "SELECT * FROM pragma_index_info((SELECT 'i'), main)",
    "SELECT * FROM pragma_user_version('main')",
    "SELECT * FROM pragma_user_version()",
    "SELECT name FROM pragma_table_list WHERE schema = 'main'",
    "VACUUM",
    "SELECT * FROM keys",
    "SELECT * FROM sessions JOIN portico_x USING (id)",
    "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM u; END",
    "SELECT edit FROM docs",
    "EXPLAIN QUERY PLAN SELECT * FROM t",
    "SELECT temp FROM readings"
  ])("allows %s", (sql) => {
    expect(refusal(guardLocalSql(sql))).toBeUndefined()
  })

  it.each([
    "PRAGMA journal_mode=DELETE",
    "PRAGMA writable_schema=1",
    "pragma Writable_Schema = ON",
    "PRAGMA other.table_info(t)",
    "PRAGMA temp.table_info(t)",
    "PRAGMA \"main \".table_info(t)",
    "PRAGMA",
    "EXPLAIN PRAGMA writable_schema = 1",
    "SELECT * FROM pragma_journal_mode()",
    "SELECT * FROM pragma_table_info('sqlite_master', 'temp')",
    "SELECT * FROM pragma_table_info('t', ?)",
    "SELECT * FROM pragma_table_info('t', 'ma' || 'in')",
    "SELECT * FROM pragma_table_info('t', 'main', 'x')",
    "SELECT * FROM pragma_user_version('temp')",
    "SELECT * FROM \"pragma_index_list\"('t', temp)",
    "SELECT * FROM PRAGMA_JOURNAL_MODE",
    "SELECT * FROM 'pragma_journal_mode'",
    "ATTACH 'x.db' AS x",
    "attach database ':memory:' as m",
    "DETACH x",
    "VACUUM INTO 'x'",
    "vacuum main into '/tmp/x'",
    "SELECT load_extension('/x')",
    "SELECT * FROM sqlite_dbpage('main')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('/tmp/x', 'y')",
    "SELECT edit('x')",
    "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT load_extension('x'); END",
    ...transactionControl
  ])("refuses %s", (sql) => {
    expectRefused(guardLocalSql(sql), 403)
  })

  it("refuses malformed and multiple statements with 400", () => {
    expectRefused(guardLocalSql("SELECT 1; ATTACH 'x' AS y"), 400)
    expectRefused(guardLocalSql("PRAGMA 'user_version"), 400)
  })

  it("allows exactly the listed pragmas", () => {
    for (const pragma of LOCAL_PRAGMAS) expect(guardLocalSql(`PRAGMA ${pragma}`).ok, pragma).toBe(true)
    expect(refusal(guardLocalSql("PRAGMA journal_mode"))?.reason).toBe("PRAGMA journal_mode is not allowed")
  })
})

describe("remembered verdicts", () => {
  it("give the same answer on every repeat, for allowed and refused texts alike", () => {
    for (let round = 0; round < 3; round++) {
      expect(guardClusterSql("SELECT * FROM t WHERE id = ?").ok).toBe(true)
      expectRefused(guardClusterSql("SELECT * FROM portico_keys"), 403)
      expectRefused(guardLocalSql("ATTACH 'x' AS y"), 403)
      // the same text is judged by each family's own rules, not by the other's verdict
      expect(guardLocalSql("SELECT * FROM portico_keys").ok).toBe(true)
    }
  })

  it("keep judging after many distinct texts and for texts past the remembered length", () => {
    for (let i = 0; i < 600; i++) expect(guardClusterSql(`SELECT ${i} FROM t`).ok).toBe(true)
    expectRefused(guardClusterSql("SELECT * FROM portico_keys"), 403)
    const long = `SELECT * FROM t WHERE name = '${"x".repeat(2000)}'`
    expect(guardClusterSql(long).ok).toBe(true)
    expectRefused(guardClusterSql(`${long} UNION SELECT * FROM portico_keys`), 403)
    expectRefused(guardClusterSql(`${long} UNION SELECT * FROM portico_keys`), 403)
  })
})
