/**
 * The coordination nonces this node has accepted (Coordination.ts), kept in its own data
 * directory (`<dataDir>/nonces.db`): a nonce is addressed to one node and only that node spends it,
 * so nothing of it belongs in the shared registry, where each spend was a consensus write on every
 * internal call's path. A local SQLite file answers in microseconds and survives a restart (WAL: a
 * crashed process loses no committed spend), so a call captured before a restart is still refused
 * after it. Spends live until their stamp is stale and are pruned as new ones come.
 */
import Database from "better-sqlite3"
import { mkdirSync } from "node:fs"
import * as path from "node:path"

/** Expired spends are pruned once every this many. */
const PRUNE_EVERY = 1000

export interface NonceLedger {
  /** Spends `key` until `expiresAt` (Unix ms): false when it was spent before. */
  readonly spend: (key: string, expiresAt: number) => boolean
  readonly close: () => void
}

/** The ledger of the node whose data directory is `dataDir`, opened at its first spend. */
export const nonceLedger = (dataDir: string): NonceLedger => {
  let db: Database.Database | undefined
  let insert: Database.Statement | undefined
  let prune: Database.Statement | undefined
  let spends = 0
  const open = () => {
    mkdirSync(dataDir, { recursive: true })
    const opened = new Database(path.join(dataDir, "nonces.db"))
    opened.pragma("journal_mode = WAL")
    opened.pragma("synchronous = NORMAL")
    opened.exec("CREATE TABLE IF NOT EXISTS spent (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID")
    insert = opened.prepare("INSERT INTO spent (key, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING")
    prune = opened.prepare("DELETE FROM spent WHERE expires_at < ?")
    db = opened
    return opened
  }
  return {
    spend: (key, expiresAt) => {
      if (db === undefined) open()
      if (++spends % PRUNE_EVERY === 0) prune!.run(Date.now())
      return insert!.run(key, expiresAt).changes === 1
    },
    close: () => {
      db?.close()
      db = undefined
    }
  }
}
