/**
 * What tenant SQL may do, decided over SQLite's own tokens (SqlTokens) so a guard never reads a
 * name, string or statement break differently from the database: one statement per call and its
 * kind (SqlStatement.ts), and the shapes refused on node-local databases and on the shared
 * cluster SQL store.
 *
 * Deny-lists compare loosely (ASCII case folding like SQLite's, surrounding whitespace trimmed) and
 * allow-lists exactly, so every mismatch between this module and SQLite errs towards refusing.
 */
import {
  asciiLower,
  bareWord,
  type Checked,
  type Head,
  head,
  isNameToken,
  isPunct,
  isWord,
  nameKey,
  notAllowed,
  significant,
  singleStatement
} from "./SqlStatement.js"
import type { Token } from "./SqlTokens.js"

export {
  type Checked,
  type Inspected,
  readsOnly,
  singleStatement,
  type SqlRefusal,
  type StatementKind,
  statementKind
} from "./SqlStatement.js"

/** Extension loading, raw database pages, the fts3 tokenizer pointer hook and the shell's file functions. */
const BLOCKED_NAMES: ReadonlySet<string> = new Set([
  "load_extension",
  "sqlite_dbpage",
  "fts3_tokenizer",
  "readfile",
  "writefile"
])

/**
 * Refusal for a blocked function or table anywhere in the statement. `edit` (a shell-only
 * function) is refused only when called, since it is also a common column name.
 */
const blockedName = (tokens: ReadonlyArray<Token>, i: number, key: string): string | undefined => {
  if (BLOCKED_NAMES.has(key)) return `${key} is not allowed`
  if (key === "edit" && tokens[i]?.kind === "identifier" && isPunct(tokens[i + 1], "(")) return "edit() is not allowed"
  return undefined
}

/** The first refusal `rule` gives for a name-bearing token (identifier or string), with its trimmed lower-case key. */
const firstNameRefusal = (
  tokens: ReadonlyArray<Token>,
  rule: (key: string, i: number) => string | undefined
): string | undefined => {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]
    if (!isNameToken(token)) continue
    const reason = rule(nameKey(token.value), i)
    if (reason !== undefined) return reason
  }
  return undefined
}

/** Pragmas a tenant may run on its own database file: introspection, integrity, and its own settings. */
export const LOCAL_PRAGMAS: ReadonlySet<string> = new Set([
  "table_info",
  "table_list",
  "index_list",
  "index_info",
  "foreign_key_list",
  "foreign_key_check",
  "foreign_keys",
  "defer_foreign_keys",
  "user_version",
  "application_id",
  "integrity_check",
  "quick_check",
  "page_count",
  "freelist_count",
  "optimize"
])

const PRAGMA_PREFIX = "pragma_"

/** Allowed pragmas that take no argument: as table-valued functions their first argument is the schema. */
const SCHEMA_FIRST_PRAGMAS: ReadonlySet<string> = new Set([
  "foreign_keys",
  "defer_foreign_keys",
  "user_version",
  "application_id",
  "page_count",
  "freelist_count"
])

/**
 * A table-valued pragma's hidden schema argument (`pragma_table_info('t', 'temp')`) must be the
 * literal main, like `PRAGMA main.x`: the temp schema and attached names stay out of reach.
 */
const pragmaSchemaRefusal = (tokens: ReadonlyArray<Token>, at: number, pragma: string): string | undefined => {
  if (!isPunct(tokens[at + 1], "(")) return undefined
  let current: Array<Token> = []
  const args: Array<Array<Token>> = [current]
  let depth = 0
  for (let i = at + 1; i < tokens.length; i++) {
    const token = tokens[i]
    if (token === undefined) break
    if (isPunct(token, "(")) depth++
    else if (isPunct(token, ")")) depth--
    if (depth === 0) break
    if (depth === 1 && isPunct(token, ",")) {
      current = []
      args.push(current)
    } else if (!(depth === 1 && isPunct(token, "("))) current.push(token)
  }
  const schemaAt = SCHEMA_FIRST_PRAGMAS.has(pragma) ? 0 : 1
  if (args.length > schemaAt + 1) return `${PRAGMA_PREFIX}${pragma} takes at most ${schemaAt + 1} argument${schemaAt === 0 ? "" : "s"}`
  const schema = args[schemaAt]
  if (schema === undefined || (schemaAt === 0 && schema.length === 0)) return undefined
  const only = schema.length === 1 ? schema[0] : undefined
  return isNameToken(only) && nameKey(only.value) === "main" ? undefined : `${PRAGMA_PREFIX}${pragma} on a schema other than main is not allowed`
}

/** `PRAGMA [main.]name [= value | (arg)]`, with name and schema compared exactly (allow-list). */
const localPragmaRefusal = (tokens: ReadonlyArray<Token>, at: number): string | undefined => {
  let name = tokens[at + 1]
  if (isPunct(tokens[at + 2], ".")) {
    const schema = name
    name = tokens[at + 3]
    if (!isNameToken(schema) || asciiLower(schema.value) !== "main") return "PRAGMA on a schema other than main is not allowed"
  }
  if (!isNameToken(name)) return "PRAGMA without a name is not allowed"
  const key = asciiLower(name.value)
  return LOCAL_PRAGMAS.has(key) ? undefined : `PRAGMA ${key} is not allowed`
}

/**
 * Transaction control, refused on every tenant route (403). A database's connection serves every
 * caller of the namespace, one statement per call, each in its own implicit transaction: a
 * `BEGIN` left open would make other callers' acknowledged writes provisional until someone's
 * `ROLLBACK`, and a `COMMIT` or `ROLLBACK` inside `/v1/rqlite/transaction` would break its
 * all-or-nothing answer. Atomic groups of statements go through `/v1/rqlite/transaction`.
 */
const TRANSACTION_VERBS: ReadonlySet<string> = new Set(["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"])

/**
 * The temp schema, refused on every tenant route (403): its objects live on the shared
 * connection, not in the file, so every caller would see them, they would vanish when a worker
 * restarts, and no backup or export would hold them. `CREATE TEMP|TEMPORARY …` and any name
 * qualified `temp.` (in any quoting) are refused; with nothing created there, reading it is moot.
 */
const tempSchema = (tokens: ReadonlyArray<Token>, opening: Head): Checked | undefined => {
  if (opening.verb === "CREATE") {
    const next = bareWord(tokens[opening.at + 1])
    if (next === "TEMP" || next === "TEMPORARY") return notAllowed("temporary objects are not allowed: create them in main")
  }
  for (let i = 0; i + 1 < tokens.length; i++) {
    const token = tokens[i]
    if (isNameToken(token) && isPunct(tokens[i + 1], ".")) {
      const key = nameKey(token.value)
      if (key === "temp" || key === "temporary") return notAllowed("the temp schema is not allowed: use main")
    }
  }
  return undefined
}

const transactionControl = (verbs: ReadonlyArray<string>): Checked | undefined => {
  const verb = verbs.find((v) => TRANSACTION_VERBS.has(v))
  return verb === undefined
    ? undefined
    : notAllowed(`${verb} is not allowed: every call runs in its own transaction; use /v1/rqlite/transaction for an atomic group`)
}

/**
 * Node-local databases (/v1/db/sqlite/query), the tenant's own file: reserved platform names are
 * fine here. Refused (403): ATTACH, DETACH, VACUUM INTO (plain VACUUM is fine), PRAGMA outside
 * LOCAL_PRAGMAS or on a schema other than main, table-valued `pragma_<name>` outside LOCAL_PRAGMAS,
 * and the blocked functions and tables (load_extension, sqlite_dbpage, fts3_tokenizer, readfile,
 * writefile, edit()). The verb is also looked for behind EXPLAIN, since SQLite applies some
 * pragmas while preparing a statement, before EXPLAIN's "do not run" could matter.
 */
const checkLocalSql = (sql: string): Checked => {
  const checked = singleStatement(sql)
  if (!checked.ok) return checked
  const tokens = significant(checked.statement.tokens)
  const opening = head(tokens)
  const verbs = [opening.first, opening.verb]
  const control = transactionControl(verbs) ?? tempSchema(tokens, opening)
  if (control !== undefined) return control
  for (const verb of ["ATTACH", "DETACH"]) {
    if (verbs.includes(verb)) return notAllowed(`${verb} is not allowed`)
  }
  if (verbs.includes("VACUUM") && tokens.some((token) => isWord(token, "INTO"))) return notAllowed("VACUUM INTO is not allowed")
  if (opening.verb === "PRAGMA") {
    const reason = localPragmaRefusal(tokens, opening.at)
    if (reason !== undefined) return notAllowed(reason)
  }
  const reason = firstNameRefusal(tokens, (key, i) => {
    // Strings too: SQLite accepts a string literal as a table name (`FROM 'pragma_x'`).
    if (key.startsWith(PRAGMA_PREFIX)) {
      const pragma = key.slice(PRAGMA_PREFIX.length)
      if (!LOCAL_PRAGMAS.has(pragma)) return `table-valued pragma ${key} is not allowed`
      const schema = pragmaSchemaRefusal(tokens, i, pragma)
      if (schema !== undefined) return schema
    }
    return blockedName(tokens, i, key)
  })
  return reason === undefined ? checked : notAllowed(reason)
}

/**
 * Platform tables in the shared cluster store, lower-case; any `portico_*` name is reserved too.
 * `sqlite_sequence` is deliberately absent: tenants' AUTOINCREMENT tables need it.
 */
export const RESERVED_TABLES: ReadonlySet<string> = new Set([
  "keys",
  "api_keys",
  "grants",
  "sessions",
  "nonces",
  "operators",
  "namespaces",
  "namespace_members",
  "members",
  "devices",
  "device_links",
  "mesh_peers",
  "peers",
  "function_secrets",
  "secrets",
  "deployments",
  "deployment_domains",
  "deployment_history",
  "domains",
  "functions",
  "function_versions",
  "function_logs",
  "function_schedule_runs",
  "function_topic_claims",
  "function_triggers",
  "triggers",
  "content_ownership",
  "pins",
  "pin_refs",
  "audit",
  "audit_log",
  "signing_keys",
  "rate_limits",
  "push_topics",
  "push_devices",
  "fetch_caps",
  "effect_sql_migrations",
  "registry",
  // every table of our own registry (src/layers/registry/migrations.ts), by name
  "auth_challenges",
  "refresh_tokens",
  "proof_nonces",
  "device_requests",
  "local_databases",
  "local_database_backups",
  "content_pins",
  "content_refs",
  "ownership_offers",
  "deployment_versions",
  "deployment_events",
  "deployment_teardowns",
  "deployment_replicas",
  "app_ports",
  "tls_store",
  "acme_challenges",
  "webrtc_settings",
  "webrtc_admissions",
  "operator_audit",
  "operator_invites",
  "namespace_creators",
  "operator_settings",
  // the cluster's membership (docs/cluster.md), and the generic name
  "cluster_nodes",
  "node_invites",
  "cluster_leases",
  "cluster_secrets",
  "nodes"
])

const RESERVED_PREFIX = "portico_"

/**
 * True when a name (e.g. a table given as data in ORM requests) is reserved: in RESERVED_TABLES or
 * starting with `portico_`, ignoring ASCII case and surrounding whitespace. Lookalike characters
 * (Cyrillic "е" in "kеys") are not folded: SQLite treats them as a different, unrelated name.
 */
export const isReservedName = (name: string): boolean => {
  const key = nameKey(name)
  return RESERVED_TABLES.has(key) || key.startsWith(RESERVED_PREFIX)
}

const CLUSTER_REFUSED_VERBS: ReadonlySet<string> = new Set(["ATTACH", "DETACH", "PRAGMA", "VACUUM"])

/** `CREATE [TEMP|TEMPORARY] TRIGGER` at the statement's verb. */
const createsTrigger = (tokens: ReadonlyArray<Token>, opening: Head): boolean => {
  if (opening.verb !== "CREATE") return false
  const next = bareWord(tokens[opening.at + 1])
  return next === "TRIGGER" || ((next === "TEMP" || next === "TEMPORARY") && isWord(tokens[opening.at + 2], "TRIGGER"))
}

/**
 * Cluster SQL store (/v1/rqlite/*), for every caller. Refused (403): ATTACH, DETACH, PRAGMA and
 * VACUUM as first word or main verb; CREATE [TEMP] TRIGGER; any identifier (bare or quoted in any
 * style) or string literal naming a reserved table (see isReservedName), which also catches
 * schema-qualified names, since `main . "keys"` is still a `keys` token, and literals such as
 * `pragma_table_info('keys')` or `sqlite_master WHERE name = 'keys'`; any `pragma_*` name
 * (table-valued pragmas); and the blocked functions and tables. Comments are never looked at.
 * A literal that merely equals a reserved name (`VALUES ('keys')`) is refused too: the guard
 * cannot tell data from a name, and refusing is the safe side.
 */
const checkClusterSql = (sql: string): Checked => {
  const checked = singleStatement(sql)
  if (!checked.ok) return checked
  const tokens = significant(checked.statement.tokens)
  const opening = head(tokens)
  const control = transactionControl([opening.first, opening.verb]) ?? tempSchema(tokens, opening)
  if (control !== undefined) return control
  for (const verb of [opening.first, opening.verb]) {
    if (CLUSTER_REFUSED_VERBS.has(verb)) return notAllowed(`${verb} is not allowed`)
  }
  if (createsTrigger(tokens, opening)) return notAllowed("CREATE TRIGGER is not allowed")
  const reason = firstNameRefusal(tokens, (key, i) => {
    if (RESERVED_TABLES.has(key) || key.startsWith(RESERVED_PREFIX)) return `${key} is a reserved name`
    if (key.startsWith(PRAGMA_PREFIX)) return `table-valued pragma ${key} is not allowed`
    return blockedName(tokens, i, key)
  })
  return reason === undefined ? checked : notAllowed(reason)
}

/**
 * A verdict is a pure function of the text, and apps send the same few statements over and over
 * with different arguments: verdicts of short texts are kept (a point read's guard is ~15 µs of
 * tokenizing otherwise). Bounded in entries and text length, so a client sending ever new texts
 * costs a clear now and then, not memory.
 */
const remembered = (check: (sql: string) => Checked): ((sql: string) => Checked) => {
  const verdicts = new Map<string, Checked>()
  return (sql) => {
    if (sql.length > MEMO_MAX_CHARS) return check(sql)
    const known = verdicts.get(sql)
    if (known !== undefined) return known
    const checked = check(sql)
    if (verdicts.size >= MEMO_MAX_ENTRIES) verdicts.clear()
    verdicts.set(sql, checked)
    return checked
  }
}
const MEMO_MAX_CHARS = 1024
const MEMO_MAX_ENTRIES = 256

export const guardLocalSql: (sql: string) => Checked = remembered(checkLocalSql)
export const guardClusterSql: (sql: string) => Checked = remembered(checkClusterSql)
