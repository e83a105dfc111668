/**
 * A deployed app's log: its stdout and stderr appended to `<instance dir>/logs/app.log` by the
 * sandbox (the open file is handed to the process), capped by copy-and-truncate since the app
 * holds the file open: past the cap the file is copied to `app.log.1` (replacing the older copy)
 * and truncated, and the app's appends continue at the new end (O_APPEND). Lines written between
 * the copy and the truncation are lost; the supervisor checks every 2 s, so the file may pass the
 * cap by what the app writes in that time. The gateway writes its own lines (start, exit,
 * restart) into the same file, prefixed `[portico]`, so the logs route tells the whole story.
 *
 * `tail` reads from the end in chunks, never a whole file it does not need.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

/** The cap of app.log before it is rotated (one older file kept, so at most twice this on disk). */
export const LOG_MAX_BYTES = 4 * 1024 * 1024
/** A longer line is answered cut to its first this many bytes (and `…`). */
export const LOG_LINE_MAX_BYTES = 16 * 1024

export const logFileOf = (instanceDir: string): string => path.join(instanceDir, "logs", "app.log")
const olderOf = (file: string): string => `${file}.1`

/** Rotates the log when it has passed `maxBytes`; a missing file is no work. */
export const capLog = (file: string, maxBytes: number = LOG_MAX_BYTES): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      if (fs.statSync(file).size <= maxBytes) return
      fs.copyFileSync(file, olderOf(file))
      fs.chmodSync(olderOf(file), 0o600)
      fs.truncateSync(file, 0)
    } catch {
      // a log that cannot be rotated now is tried again at the next check
    }
  })

/** Appends one gateway line (`[portico] <time> <text>`) to the app's log. */
export const noteInLog = (file: string, text: string): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      fs.appendFileSync(file, `[portico] ${new Date().toISOString()} ${text}\n`, { mode: 0o600 })
    } catch {
      // the log's directory is gone (the deployment was deleted): nothing to note in
    }
  })

const CHUNK = 64 * 1024

/**
 * The last `wanted` complete-or-final lines of one file, oldest first, reading backwards in
 * chunks until enough line ends are seen (a final line without its newline counts).
 */
const tailOf = (file: string, wanted: number): Array<string> => {
  let fd: number
  try {
    fd = fs.openSync(file, "r")
  } catch {
    return []
  }
  try {
    const size = fs.fstatSync(fd).size
    if (size === 0) return []
    const chunks: Array<Buffer> = []
    let position = size
    let newlines = 0
    // a trailing newline ends the last line rather than starting an empty one
    let first = true
    while (position > 0 && newlines <= wanted) {
      const length = Math.min(CHUNK, position)
      position -= length
      const buffer = Buffer.alloc(length)
      fs.readSync(fd, buffer, 0, length, position)
      for (let i = length - 1; i >= 0; i--) {
        if (buffer[i] !== 0x0a) continue
        if (first && position + i === size - 1) continue
        newlines++
      }
      first = false
      chunks.unshift(buffer)
    }
    const text = Buffer.concat(chunks)
    const lines: Array<string> = []
    let end = text.length > 0 && text[text.length - 1] === 0x0a ? text.length - 1 : text.length
    for (let i = end - 1; i >= -1 && lines.length < wanted; i--) {
      if (i >= 0 && text[i] !== 0x0a) continue
      // the first line of a partial read may be cut at the chunk's start: kept only when the read reached the file's start
      if (i < 0 && position > 0) break
      lines.unshift(lineText(text.subarray(i + 1, end)))
      end = i
    }
    return lines
  } finally {
    fs.closeSync(fd)
  }
}

const lineText = (bytes: Buffer): string =>
  bytes.length > LOG_LINE_MAX_BYTES ? bytes.subarray(0, LOG_LINE_MAX_BYTES).toString("utf8") + "…" : bytes.toString("utf8")

/** The last `lines` lines of the app's log, oldest first, reaching into the rotated file when needed. */
export const tail = (file: string, lines: number): Effect.Effect<ReadonlyArray<string>> =>
  Effect.sync(() => {
    const recent = tailOf(file, lines)
    if (recent.length >= lines) return recent
    return [...tailOf(olderOf(file), lines - recent.length), ...recent]
  })
