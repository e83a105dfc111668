/**
 * Answers match their schemas (issue 20, item 9). The cache, cluster SQL and node-local database
 * handlers (and the fast lane, src/api/FastLane.ts) write their answers as JSON text, never
 * through the endpoint's success schema, so nothing else checks that the declared schema says
 * what the server sends. Here every success path of those routes is sent to a real gateway, and
 * each raw answer is decoded with the success schema the API definition itself declares for the
 * endpoint (found through HttpApi.reflect), with excess members an error, so an undeclared
 * member fails as surely as a missing or mistyped one.
 *
 * Each row names its endpoint; the method and path come from the endpoint, not the row. Twice:
 * with the fast lane (which answers cache put/get/delete/mget, rqlite query/exec and the database
 * query itself for an API key) and without it (the HttpApi handlers answer everything). The
 * embedded engines only: the shapes are the same on rqlited (test/e2e/databases.test.ts).
 */
import { HttpApi } from "@effect/platform"
import Database from "better-sqlite3"
import { Either, ParseResult, Schema } from "effect"
import { mkdtempSync, readFileSync } from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"

const GROUPS = ["cache", "sql", "databases"] as const

interface Declared {
  readonly method: string
  readonly path: string
  readonly success: Schema.Schema<unknown, unknown, never>
  readonly statuses: ReadonlyArray<number>
}

/** Every endpoint of the three groups, by "group.endpoint", as the API definition declares it. */
const declared = new Map<string, Declared>()
HttpApi.reflect(PorticoApi, {
  predicate: ({ group }) => (GROUPS as ReadonlyArray<string>).includes(group.identifier),
  onGroup: () => {},
  onEndpoint: ({ endpoint, group, successes }) => {
    declared.set(`${group.identifier}.${endpoint.name}`, {
      method: endpoint.method,
      path: endpoint.path,
      success: endpoint.successSchema as Schema.Schema<unknown, unknown, never>,
      statuses: [...successes.keys()]
    })
  }
})

/** Binary answers: their success schema is not JSON, so there is no JSON text to decode. */
const NOT_JSON = new Set(["sql.export"])

type Token = "cache" | "owner" | "importer"

interface Row {
  readonly endpoint: string
  /** What the row shows (the answer's shape). */
  readonly shape: string
  /** The request body as sent, JSON text (so 64-bit integers reach the server whole), or file bytes. */
  readonly body?: string | (() => Uint8Array)
  readonly query?: string
  readonly token?: Token
  /** The answer's exact text, where the shape is the point of the row. */
  readonly text?: string
}

/** A small SQLite file for import, built offline. */
const importFile = (): Uint8Array => {
  const file = path.join(mkdtempSync(path.join(testTmp(), "portico-answers-")), "import.db")
  const db = new Database(file)
  db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hello')")
  db.exec("CREATE TABLE tags (name TEXT)")
  db.close()
  return readFileSync(file)
}

const WIDE = "9223372036854775806"

const rows: ReadonlyArray<Row> = [
  // --- cache (spec §2.1) ---
  { endpoint: "cache.health", shape: "health" },
  { endpoint: "cache.put", shape: "text value", body: '{"dmap":"m","key":"text","value":"hello é"}' },
  { endpoint: "cache.put", shape: "integer value past 2^53, with ttl", body: '{"dmap":"m","key":"int","value":12345678901234567890123,"ttl":"1h"}' },
  { endpoint: "cache.put", shape: "real value", body: '{"dmap":"m","key":"real","value":-0.5e-7}' },
  { endpoint: "cache.put", shape: "boolean value", body: '{"dmap":"m","key":"bool","value":false}' },
  { endpoint: "cache.put", shape: "object value", body: '{"dmap":"m","key":"obj","value":{"a":[1,null,{"b":true}]}}' },
  { endpoint: "cache.put", shape: "array value", body: '{"dmap":"m","key":"arr","value":[]}' },
  { endpoint: "cache.get", shape: "text value", body: '{"dmap":"m","key":"text"}', text: '{"key":"text","value":"hello é","dmap":"m"}' },
  { endpoint: "cache.get", shape: "integer value", body: '{"dmap":"m","key":"int"}', text: '{"key":"int","value":12345678901234567890123,"dmap":"m"}' },
  { endpoint: "cache.get", shape: "real value", body: '{"dmap":"m","key":"real"}' },
  { endpoint: "cache.get", shape: "boolean value", body: '{"dmap":"m","key":"bool"}' },
  { endpoint: "cache.get", shape: "object value", body: '{"dmap":"m","key":"obj"}' },
  { endpoint: "cache.get", shape: "array value", body: '{"dmap":"m","key":"arr"}' },
  {
    endpoint: "cache.mget",
    shape: "hits and a null miss",
    body: '{"dmap":"m","keys":["int","absent","obj"]}',
    text: '{"dmap":"m","results":[{"key":"int","value":12345678901234567890123},{"key":"absent","value":null},{"key":"obj","value":{"a":[1,null,{"b":true}]}}]}'
  },
  { endpoint: "cache.mget", shape: "no keys", body: '{"dmap":"m","keys":[]}', text: '{"dmap":"m","results":[]}' },
  { endpoint: "cache.scan", shape: "every key", body: '{"dmap":"m"}' },
  { endpoint: "cache.scan", shape: "a pattern", body: '{"dmap":"m","match":"^(int|real)$"}' },
  { endpoint: "cache.scan", shape: "nothing matches", body: '{"dmap":"empty"}', text: '{"keys":[],"count":0,"dmap":"empty"}' },
  { endpoint: "cache.delete", shape: "deleted", body: '{"dmap":"m","key":"bool"}', text: '{"status":"ok","key":"bool","dmap":"m"}' },

  // --- cluster SQL store (spec §2.3) ---
  { endpoint: "sql.createTable", shape: "DDL counts", body: '{"schema":"CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, n INTEGER, r REAL, b BLOB)"}' },
  {
    endpoint: "sql.exec",
    shape: "insert of text, integer, real, null and blob",
    body: '{"sql":"INSERT INTO t (s, n, r, b) VALUES (?, ?, ?, x\'00ff\'), (NULL, NULL, NULL, NULL)","args":["a",42,1.5]}',
    text: '{"rows_affected":2,"last_insert_id":2}'
  },
  {
    endpoint: "sql.exec",
    shape: "a 64-bit row id",
    body: `{"sql":"INSERT INTO t (id, s, n) VALUES (${WIDE}, 'wide', -9223372036854775808)"}`,
    text: `{"rows_affected":1,"last_insert_id":${WIDE}}`
  },
  { endpoint: "sql.exec", shape: "no row changed", body: '{"sql":"UPDATE t SET s = \'z\' WHERE id = 999"}' },
  { endpoint: "sql.exec", shape: "a write with RETURNING", body: '{"sql":"INSERT INTO t (id, s) VALUES (7, \'r\') RETURNING id, s"}' },
  { endpoint: "sql.query", shape: "text, integer, real, null and blob cells", body: '{"sql":"SELECT id, s, n, r, b FROM t ORDER BY id"}' },
  {
    endpoint: "sql.query",
    shape: "literals with args",
    body: '{"sql":"SELECT ?, ?, ?, ?, 1e999, typeof(?)","args":["x",9007199254740993,2.25,null,true]}'
  },
  { endpoint: "sql.query", shape: "no rows", body: '{"sql":"SELECT id, s FROM t WHERE id < 0"}', text: '{"columns":["id","s"],"rows":[],"count":0}' },
  { endpoint: "sql.find", shape: "items of every kind", body: '{"table":"t","criteria":{},"options":{"order_by":["id"]}}' },
  { endpoint: "sql.find", shape: "a null criterion", body: '{"table":"t","criteria":{"s":null}}' },
  { endpoint: "sql.find", shape: "no items", body: '{"table":"t","criteria":{"s":"absent"}}', text: '{"items":[],"count":0}' },
  { endpoint: "sql.findOne", shape: "a row", body: '{"table":"t","criteria":{"s":"a"}}' },
  { endpoint: "sql.findOne", shape: "the wide row", body: `{"table":"t","criteria":{"id":${WIDE}}}` },
  { endpoint: "sql.findOne", shape: "null", body: '{"table":"t","criteria":{"s":"absent"}}', text: "null" },
  {
    endpoint: "sql.select",
    shape: "items with expressions, where args and paging",
    body: '{"table":"t","select":["id","s","r * 2 AS r2","b"],"where":[{"expr":"id > ?","args":[0]}],"order_by":["id"],"limit":10,"offset":0}'
  },
  { endpoint: "sql.select", shape: "no items", body: '{"table":"t","where":[{"expr":"0"}]}', text: '{"items":[],"count":0}' },
  { endpoint: "sql.select", shape: "one: a row", body: '{"table":"t","where":[{"expr":"s = ?","args":["a"]}],"one":true}' },
  { endpoint: "sql.select", shape: "one: null", body: '{"table":"t","where":[{"expr":"0"}],"one":true}', text: "null" },
  {
    endpoint: "sql.transaction",
    shape: "return_results: exec and query results",
    body: '{"ops":[{"kind":"exec","sql":"INSERT INTO t (s, r) VALUES (?, ?)","args":["tx",0.5]},{"kind":"query","sql":"SELECT s, r, b FROM t WHERE s IN (\'tx\', \'a\') ORDER BY id"},{"kind":"query","sql":"SELECT s FROM t WHERE 0"}],"return_results":true}'
  },
  {
    endpoint: "sql.transaction",
    shape: "return_results: a negative 64-bit row id",
    body: '{"ops":[{"kind":"exec","sql":"INSERT INTO t (id) VALUES (-9223372036854775807)"}],"return_results":true}',
    text: '{"results":[{"rows_affected":1,"last_insert_id":-9223372036854775807}],"count":1}'
  },
  {
    endpoint: "sql.transaction",
    shape: "without results",
    body: '{"ops":[{"kind":"exec","sql":"DELETE FROM t WHERE s = \'tx\'"}]}',
    text: '{"status":"ok","count":1}'
  },
  { endpoint: "sql.createTable", shape: "a second table", body: '{"schema":"CREATE TABLE u (id INTEGER PRIMARY KEY)"}' },
  { endpoint: "sql.exec", shape: "a view", body: '{"sql":"CREATE VIEW tv AS SELECT s FROM t"}' },
  { endpoint: "sql.schema", shape: "tables and a view" },
  { endpoint: "sql.dropTable", shape: "an existing table", body: '{"table":"u"}' },
  { endpoint: "sql.dropTable", shape: "an absent table", body: '{"table":"never_was"}' },
  { endpoint: "sql.schema", shape: "no tables", token: "importer", text: '{"tables":[],"count":0}' },
  { endpoint: "sql.import", shape: "imported", token: "importer", body: importFile },

  // --- node-local databases (spec §2.2) ---
  { endpoint: "databases.list", shape: "no databases", text: '{"databases":[],"count":0,"next_cursor":null}' },
  { endpoint: "databases.create", shape: "created", body: '{"database_name":"kinds"}' },
  { endpoint: "databases.create", shape: "a second one", body: '{"database_name":"spare"}' },
  {
    endpoint: "databases.query",
    shape: "DDL counts",
    body: '{"database_name":"kinds","query":"CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, n INTEGER, r REAL, b BLOB)"}',
    text: '{"rows_affected":0,"last_insert_id":0}'
  },
  {
    endpoint: "databases.query",
    shape: "insert of text, integer, real, null, boolean and blob",
    body: '{"database_name":"kinds","query":"INSERT INTO t (s, n, r, b) VALUES (?, ?, ?, x\'00ff\'), (?, ?, NULL, NULL)","params":["a",42,1.5,null,true]}'
  },
  {
    endpoint: "databases.query",
    shape: "a 64-bit row id",
    body: `{"database_name":"kinds","query":"INSERT INTO t (id, n) VALUES (${WIDE}, ?)","params":[-9223372036854775808]}`,
    text: `{"rows_affected":1,"last_insert_id":${WIDE}}`
  },
  { endpoint: "databases.query", shape: "no row changed", body: '{"database_name":"kinds","query":"UPDATE t SET s = \'z\' WHERE id = 999"}' },
  { endpoint: "databases.query", shape: "a write with RETURNING", body: '{"database_name":"kinds","query":"INSERT INTO t (id, s) VALUES (7, \'r\') RETURNING id"}' },
  { endpoint: "databases.query", shape: "text, integer, real, null and blob cells", body: '{"database_name":"kinds","query":"SELECT id, s, n, r, b FROM t ORDER BY id"}' },
  { endpoint: "databases.query", shape: "literals", body: '{"database_name":"kinds","query":"SELECT 1e999, 0.1, -0, 9007199254740993, \'é\'"}' },
  { endpoint: "databases.query", shape: "no rows", body: '{"database_name":"kinds","query":"SELECT id FROM t WHERE id < 0"}', text: '{"columns":["id"],"rows":[]}' },
  { endpoint: "databases.list", shape: "a full page" },
  { endpoint: "databases.list", shape: "a page with a next cursor", query: "?limit=1" },
  { endpoint: "databases.backups", shape: "no backups", query: "?database_name=kinds" },
  { endpoint: "databases.backup", shape: "a backup", body: '{"database_name":"kinds"}' },
  { endpoint: "databases.backups", shape: "one backup", query: "?database_name=kinds" },
  { endpoint: "databases.list", shape: "with a backup cid" },
  { endpoint: "databases.delete", shape: "deleted", body: '{"database_name":"spare"}', text: '{"name":"spare","deleted":true}' }
]

/** The decode failure in words, or undefined when the answer matches. */
const mismatch = (schema: Schema.Schema<unknown, unknown, never>, body: unknown): string | undefined =>
  Either.match(Schema.decodeUnknownEither(schema)(body, { onExcessProperty: "error" }), {
    onLeft: (error) => ParseResult.TreeFormatter.formatErrorSync(error),
    onRight: () => undefined
  })

it("the table covers every endpoint with a JSON answer in the three groups, and only those", () => {
  const covered = new Set(rows.map((r) => r.endpoint))
  expect([...covered].filter((e) => !declared.has(e))).toEqual([])
  expect([...declared.keys()].filter((e) => !NOT_JSON.has(e) && !covered.has(e))).toEqual([])
})

it("the decoder refuses an undeclared member, a missing one and a mistyped one", () => {
  const changed = declared.get("cache.put")!.success
  expect(mismatch(changed, { status: "ok", key: "k", dmap: "m" })).toBeUndefined()
  expect(mismatch(changed, { status: "ok", key: "k", dmap: "m", extra: 1 })).toMatch(/extra/)
  expect(mismatch(changed, { status: "ok", key: "k" })).toMatch(/dmap/)
  expect(mismatch(declared.get("sql.exec")!.success, { rows_affected: 1.5, last_insert_id: 1 })).toBeDefined()
})

describe.each([
  ["with the fast lane", "true"],
  ["without the fast lane", "false"]
] as const)("every cache, cluster SQL and database answer decodes with its endpoint's success schema, %s", (_, lane) => {
  let gw: Gateway
  const tokens: Partial<Record<Token, string>> = {}

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_FAST_LANE: lane } })
    tokens.owner = (await gw.cli(["namespace", "create", "answers"])).api_key
    tokens.cache = (await gw.request("POST", "/v1/namespace/keys", { token: tokens.owner, json: { scopes: ["cache"] } })).body.api_key
    tokens.importer = (await gw.cli(["namespace", "create", "importer"])).api_key
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  const send = async (row: Row, endpoint: Declared): Promise<Reply> => {
    const token = tokens[row.token ?? (row.endpoint.startsWith("cache.") ? "cache" : "owner")]
    const target = endpoint.path + (row.query ?? "")
    if (typeof row.body === "function") {
      const res = await fetch(gw.url + target, {
        method: endpoint.method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
        body: row.body()
      })
      const text = await res.text()
      return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
    }
    return gw.request(endpoint.method, target, {
      token,
      ...(row.body === undefined ? {} : { body: row.body, headers: { "content-type": "application/json" } })
    })
  }

  it.each(rows.map((row) => [row.endpoint, row.shape, row] as const))("%s: %s", async (_endpoint, _shape, row) => {
    const endpoint = declared.get(row.endpoint)
    expect(endpoint, `${row.endpoint} is not an endpoint of the API`).toBeDefined()
    const reply = await send(row, endpoint!)
    expect(endpoint!.statuses, reply.text).toContain(reply.status)
    expect(reply.headers.get("content-type")).toMatch(/^application\/json/)
    if (row.text !== undefined) expect(reply.text).toBe(row.text)
    // JSON.parse, as a client would (and as HttpApiClient does)
    expect(mismatch(endpoint!.success, JSON.parse(reply.text)), reply.text).toBeUndefined()
  })
})
