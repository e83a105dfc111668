/**
 * A file under `<dataDir>/tmp` for one transfer (an import spooled, an export or a backup
 * taken), removed when the scope that asked for it closes, whatever happened.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { mkdirSync, rmSync } from "node:fs"
import * as path from "node:path"

export const spoolFile = (dataDir: string, prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = path.join(dataDir, "tmp")
      mkdirSync(dir, { recursive: true })
      return path.join(dir, `${prefix}-${randomBytes(8).toString("hex")}.db`)
    }),
    // with the -wal/-shm/-journal files SQLite opened beside it (an imported WAL-mode file)
    (file) => Effect.sync(() => {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(file + suffix, { force: true })
    })
  )
