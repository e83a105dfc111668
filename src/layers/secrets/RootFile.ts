/**
 * `<dataDir>/secret.keys`: the root generations after 0 this node adopted (docs/cluster.md,
 * "Root-secret rotation"), as JSON `{"roots": [{"generation": 1, "root": "<base64>"}, ...]}`,
 * mode 0600, replaced whole by a rename so a crash leaves the old file or the new one.
 * Generation 0 stays where it always was (PORTICO_SECRET or `secret.key`).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

const FILE = "secret.keys"

/** The roots of generations 1, 2, ... in order; none when the file is absent. Throws when damaged. */
export const readLaterRootsSync = (dataDir: string): ReadonlyArray<Uint8Array> => {
  let text: string
  try {
    text = fs.readFileSync(path.join(dataDir, FILE), "utf8")
  } catch (e) {
    if (e instanceof Error && "code" in e && e.code === "ENOENT") return []
    throw e
  }
  const parsed = JSON.parse(text) as { roots?: ReadonlyArray<{ generation?: unknown; root?: unknown }> }
  return (parsed.roots ?? []).map((entry, i) => {
    const bytes = typeof entry.root === "string" ? Buffer.from(entry.root, "base64") : Buffer.alloc(0)
    if (entry.generation !== i + 1 || bytes.length !== 32) throw new Error(`${FILE} is damaged at generation ${i + 1}`)
    return new Uint8Array(bytes)
  })
}

/** Replaces the file with `roots` (generations 1, 2, ...): written to a temporary file, synced, renamed. */
export const writeLaterRoots = (dataDir: string, roots: ReadonlyArray<Uint8Array>): void => {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const target = path.join(dataDir, FILE)
  const temporary = `${target}.${crypto.randomBytes(6).toString("hex")}.tmp`
  const body = JSON.stringify({ roots: roots.map((root, i) => ({ generation: i + 1, root: Buffer.from(root).toString("base64") })) }) + "\n"
  const fd = fs.openSync(temporary, "wx", 0o600)
  try {
    fs.writeSync(fd, body)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  try {
    fs.renameSync(temporary, target)
  } catch (e) {
    fs.rmSync(temporary, { force: true })
    throw e
  }
  const dir = fs.openSync(dataDir, "r")
  try {
    fs.fsyncSync(dir)
  } finally {
    fs.closeSync(dir)
  }
}
