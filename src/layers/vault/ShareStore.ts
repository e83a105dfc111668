/**
 * This node's vault shares (docs/vault.md, "Where shares live"): a SQLite file of its own in its
 * data directory (`<dataDir>/vault.db`), never the shared registry, where one database holding
 * every node's share would undo the sharing. Share writes are synchronous (`synchronous = FULL`):
 * a guardian that acknowledged a share still holds it after a crash of the machine. A burst's
 * writes share one transaction and its one flush (`writeMany`), none acknowledged before it.
 *
 * It also keeps the pull signatures it has honoured until they are stale, so a captured pull is
 * answered once. Those go through a second connection at `synchronous = NORMAL` (WAL: a spend
 * survives a crash of the process, and only a crash of the machine within the signature's two
 * minutes could forget one), so a pull costs no flush to disk on every guardian.
 */
import Database from "better-sqlite3"
import { mkdirSync } from "node:fs"
import * as path from "node:path"

export interface StoredShare {
  readonly version: number
  readonly threshold: number
  /** SHA-256 (hex) of the whole envelope the share is of. */
  readonly digest: string
  /** The share's y bytes followed by its x coordinate (src/domain/Shamir.ts). */
  readonly share: Uint8Array
}

export type WriteOutcome = { readonly outcome: "stored" } | { readonly outcome: "conflict"; readonly version: number }

/** One write of a batch (`writeMany`). */
export interface ShareWrite {
  readonly namespace: string
  readonly identity: string
  readonly share: StoredShare
}

/** A write of a batch that failed on its own (the batch's others stand): why. */
export interface WriteFailed {
  readonly outcome: "failed"
  readonly error: unknown
}

export interface ShareStore {
  readonly read: (namespace: string, identity: string) => StoredShare | undefined
  /**
   * Stores `share` unless the identity holds a newer version, or the same version of another
   * envelope (a conflict, with the version held). The same version of the same envelope is a
   * push retried: its new split replaces the old one.
   */
  readonly write: (namespace: string, identity: string, share: StoredShare, at: number) => WriteOutcome
  /**
   * `write` for each of `writes`, in order, in one transaction: one flush to disk for all of
   * them. Each is decided as it would be alone, after the ones before it; one that fails is
   * undone alone. Throws when the transaction does not commit (nothing of it was written).
   */
  readonly writeMany: (writes: ReadonlyArray<ShareWrite>, at: number) => ReadonlyArray<WriteOutcome | WriteFailed>
  /** Spends `key` until `expiresAt` (Unix ms): false when it was spent before. */
  readonly spend: (key: string, expiresAt: number) => boolean
  /** The namespace's identities held here. */
  readonly count: (namespace: string) => number
  /** Removes the namespace's shares: how many there were. */
  readonly drop: (namespace: string) => number
  /** The namespaces this node holds shares of. */
  readonly namespaces: () => ReadonlyArray<string>
  readonly close: () => void
}

/** Stale spends are pruned once every this many. */
const PRUNE_EVERY = 500

interface Statements {
  readonly db: Database.Database
  readonly spends: Database.Database
  readonly read: Database.Statement
  readonly upsert: Database.Statement
  readonly spend: Database.Statement
  readonly prune: Database.Statement
  readonly count: Database.Statement
  readonly drop: Database.Statement
  readonly namespaces: Database.Statement
  readonly write: (namespace: string, identity: string, share: StoredShare, at: number) => WriteOutcome
  readonly writeMany: (writes: ReadonlyArray<ShareWrite>, at: number) => ReadonlyArray<WriteOutcome | WriteFailed>
}

/** The store of the node whose data directory is `dataDir`, opened at its first use. */
export const shareStore = (dataDir: string): ShareStore => {
  let opened: Statements | undefined
  let spends = 0
  const open = (): Statements => {
    if (opened !== undefined) return opened
    mkdirSync(dataDir, { recursive: true })
    const db = new Database(path.join(dataDir, "vault.db"))
    db.pragma("journal_mode = WAL")
    db.pragma("synchronous = FULL")
    db.exec(`CREATE TABLE IF NOT EXISTS shares (
      namespace TEXT NOT NULL, identity TEXT NOT NULL, version INTEGER NOT NULL, threshold INTEGER NOT NULL,
      digest TEXT NOT NULL, share BLOB NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, identity)) WITHOUT ROWID`)
    db.exec("CREATE TABLE IF NOT EXISTS spent (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID")
    const read = db.prepare("SELECT version, threshold, digest, share FROM shares WHERE namespace = ? AND identity = ?")
    const upsert = db.prepare(
      `INSERT INTO shares (namespace, identity, version, threshold, digest, share, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (namespace, identity) DO UPDATE SET version = excluded.version, threshold = excluded.threshold,
       digest = excluded.digest, share = excluded.share, updated_at = excluded.updated_at`
    )
    const write = db.transaction((namespace: string, identity: string, share: StoredShare, at: number): WriteOutcome => {
      const held = read.get(namespace, identity) as { version: number; digest: string } | undefined
      if (held !== undefined && (held.version > share.version || (held.version === share.version && held.digest !== share.digest))) {
        return { outcome: "conflict", version: held.version }
      }
      upsert.run(namespace, identity, share.version, share.threshold, share.digest, Buffer.from(share.share.buffer, share.share.byteOffset, share.share.byteLength), at)
      return { outcome: "stored" }
    })
    // each write a savepoint of its own inside the batch's transaction: a failure undoes it alone
    const writeMany = db.transaction((writes: ReadonlyArray<ShareWrite>, at: number) =>
      writes.map((w): WriteOutcome | WriteFailed => {
        try {
          return write(w.namespace, w.identity, w.share, at)
        } catch (error) {
          return { outcome: "failed", error }
        }
      })
    )
    const spends = new Database(path.join(dataDir, "vault.db"))
    spends.pragma("synchronous = NORMAL")
    opened = {
      db,
      spends,
      read,
      upsert,
      spend: spends.prepare("INSERT INTO spent (key, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING"),
      prune: spends.prepare("DELETE FROM spent WHERE expires_at < ?"),
      count: db.prepare("SELECT COUNT(*) AS n FROM shares WHERE namespace = ?"),
      drop: db.prepare("DELETE FROM shares WHERE namespace = ?"),
      namespaces: db.prepare("SELECT DISTINCT namespace FROM shares"),
      write,
      writeMany
    }
    return opened
  }
  return {
    read: (namespace, identity) => {
      const row = open().read.get(namespace, identity) as { version: number; threshold: number; digest: string; share: Buffer } | undefined
      return row === undefined ? undefined : { ...row, share: new Uint8Array(row.share.buffer, row.share.byteOffset, row.share.byteLength) }
    },
    write: (namespace, identity, share, at) => open().write(namespace, identity, share, at),
    writeMany: (writes, at) => open().writeMany(writes, at),
    spend: (key, expiresAt) => {
      const s = open()
      if (++spends % PRUNE_EVERY === 0) s.prune.run(Date.now())
      return s.spend.run(key, expiresAt).changes === 1
    },
    count: (namespace) => (open().count.get(namespace) as { n: number }).n,
    drop: (namespace) => open().drop.run(namespace).changes,
    namespaces: () => (open().namespaces.all() as Array<{ namespace: string }>).map((r) => r.namespace),
    close: () => {
      opened?.spends.close()
      opened?.db.close()
      opened = undefined
    }
  }
}
