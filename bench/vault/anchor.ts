/**
 * bench/vault's anchor: a bare script doing the vault's work with nothing else around it.
 *
 *   anchor.ts store <host> <port> <dir>    a 30-line share store: POST /put writes a share to
 *                                          SQLite (WAL, synchronous FULL, as the guardians do),
 *                                          POST /get reads it
 *   anchor.ts front <port> <store URL>...  push: node:crypto verify, the same split, a POST to
 *                                          every store at once; pull: verify, a POST to every
 *                                          store at once, the same combine, the digest checked
 *
 * It prints READY once listening.
 */
import Database from "better-sqlite3"
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto"
import * as http from "node:http"
import * as path from "node:path"
import { combine, split } from "../../src/domain/Shamir.js"

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
  })
const answer = (res: http.ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
}

const [mode, ...args] = process.argv.slice(2)

if (mode === "store") {
  const [host, port, dir] = args as [string, string, string]
  const db = new Database(path.join(dir, "shares.db"))
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec("CREATE TABLE IF NOT EXISTS shares (id TEXT PRIMARY KEY, version INTEGER, digest TEXT, share BLOB) WITHOUT ROWID")
  const put = db.prepare("INSERT OR REPLACE INTO shares (id, version, digest, share) VALUES (?, ?, ?, ?)")
  const get = db.prepare("SELECT version, digest, share FROM shares WHERE id = ?")
  http
    .createServer(async (req, res) => {
      const body = JSON.parse(await readBody(req)) as { id: string; version: number; digest: string; share: string }
      if (req.url === "/put") return answer(res, 200, { stored: put.run(body.id, body.version, body.digest, Buffer.from(body.share, "base64")).changes })
      const row = get.get(body.id) as { version: number; digest: string; share: Buffer } | undefined
      answer(res, 200, row === undefined ? {} : { version: row.version, digest: row.digest, share: row.share.toString("base64") })
    })
    .listen(Number(port), host, () => console.log("READY"))
} else {
  const [port, ...stores] = args as [string, ...Array<string>]
  const agent = new http.Agent({ keepAlive: true })
  const post = (url: string, body: unknown) =>
    new Promise<any>((resolve, reject) => {
      const text = JSON.stringify(body)
      const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } }, (res) => {
        void readBody(res).then((t) => resolve(JSON.parse(t)))
      })
      req.on("error", reject)
      req.end(text)
    })
  const keys = new Map<string, KeyObject>()
  const keyOf = (hex: string) => {
    let key = keys.get(hex)
    if (key === undefined) {
      key = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(hex, "hex")]), format: "der", type: "spki" })
      keys.set(hex, key)
    }
    return key
  }
  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
  const signed = (body: { identity: string; pubkey: string; signature: string }, message: string) =>
    sha(Buffer.from(body.pubkey, "hex")) === body.identity && verify(null, Buffer.from(message), keyOf(body.pubkey), Buffer.from(body.signature, "hex"))
  http
    .createServer(async (req, res) => {
      const body = JSON.parse(await readBody(req))
      if (req.url === "/push") {
        const envelope = new Uint8Array(Buffer.from(body.envelope, "base64"))
        const digest = sha(envelope)
        if (!signed(body, `vault-push-v2:${body.identity}:${body.version}:${digest}`)) return answer(res, 401, { error: "signature" })
        const shares = split(envelope, stores.length, 2)
        await Promise.all(stores.map((url, i) => post(`${url}/put`, { id: body.identity, version: body.version, digest, share: Buffer.from(shares[i]!).toString("base64") })))
        return answer(res, 200, { status: "ok", ack_count: stores.length })
      }
      if (!signed(body, `vault-pull-v1:${body.identity}:${body.timestamp}`) || Math.abs(Date.now() / 1000 - body.timestamp) > 120) return answer(res, 401, { error: "signature" })
      const held = (await Promise.all(stores.map((url) => post(`${url}/get`, { id: body.identity })))) as Array<{ version: number; digest: string; share: string }>
      const envelope = combine(held.slice(0, 2).map((h) => new Uint8Array(Buffer.from(h.share, "base64"))))
      if (sha(envelope) !== held[0]!.digest) return answer(res, 503, { error: "digest" })
      answer(res, 200, { identity: body.identity, version: held[0]!.version, envelope: Buffer.from(envelope).toString("base64") })
    })
    .listen(Number(port), "127.0.0.1", () => console.log("READY"))
}
