/**
 * The generation of a SQLite database in WAL mode: a value that changes with every transaction
 * any process commits to it, read in one `pread` (~1 µs) instead of a read transaction (~5-10 µs:
 * the file locks SQLite takes and releases around every statement are system calls).
 *
 * It is the wal-index header at the start of the `-shm` file, which every connection to the
 * database maps and which the committing connection rewrites as the commit's last step: only
 * then do readers see the new frames. Its `iChange` counts transactions, and `mxFrame` and the
 * salts move with every commit and checkpoint too. SQLite keeps two copies and rewrites them one
 * after the other, so two copies that differ mean a commit is landing right now.
 *
 * The header is SQLite's own, not part of its documented file format; it has been this shape
 * (version 3007000) since WAL mode arrived in 3.7.0. Anything unexpected (another version, an
 * uninitialised or unreadable header, copies that differ) reads as "unknown", and callers then do
 * what they would do without it: read the database.
 */
import * as fs from "node:fs"
import * as os from "node:os"

/** WALINDEX_MAX_VERSION in sqlite3.c: the only wal-index layout there has been. */
const WAL_INDEX_VERSION = 3007000
const HEADER_BYTES = 48

export interface WalGeneration {
  /** The current generation, or undefined when it cannot be told right now. */
  readonly read: () => string | undefined
  /**
   * Runs `f` with one read of the generation standing for every `read` made inside it. Sound only
   * for work whose every input had been received before the call: a commit acknowledged before
   * such an input was sent happened before this read (see `turn` in src/api/FastLane.ts).
   */
  readonly hold: <A>(f: () => A) => A
  readonly close: () => void
}

/** Opens the database's `-shm` file for reading; undefined when there is none to read. */
export const openWalGeneration = (databaseFile: string): WalGeneration | undefined => {
  let fd: number
  try {
    fd = fs.openSync(databaseFile + "-shm", "r")
  } catch {
    return undefined
  }
  const header = Buffer.alloc(2 * HEADER_BYTES)
  // the header is in the machine's own byte order
  const version = os.endianness() === "LE" ? () => header.readUInt32LE(0) : () => header.readUInt32BE(0)
  const readHeader = (): string | undefined => {
    try {
      if (fs.readSync(fd, header, 0, header.length, 0) !== header.length) return undefined
    } catch {
      return undefined
    }
    // isInit (byte 12) is 1 once a connection has built the index
    if (version() !== WAL_INDEX_VERSION || header[12] !== 1) return undefined
    if (header.compare(header, HEADER_BYTES, 2 * HEADER_BYTES, 0, HEADER_BYTES) !== 0) return undefined
    return header.toString("latin1", 0, HEADER_BYTES)
  }
  // the generation read by the `hold` under way; null when none is
  let held: string | undefined | null = null
  return {
    read: () => (held === null ? readHeader() : held),
    hold: (f) => {
      if (held !== null) return f()
      held = readHeader()
      try {
        return f()
      } finally {
        held = null
      }
    },
    close: () => fs.closeSync(fd)
  }
}
