/**
 * The nodes an operator connected on this node (`/v1/network/connect`; docs/cluster.md,
 * "Connect"), kept in its data directory (`connected-peers.json`, id → URL) so a restart keeps
 * them until they are disconnected. Written whole to a temporary file and renamed over the last, so
 * a crash leaves the old list or the new one, never half of one. A file that cannot be read (absent,
 * or damaged by hand) is an empty list: connections are an operator's overrides, made again with
 * one call, and must never keep a gateway from starting.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs"
import * as path from "node:path"

const FILE = "connected-peers.json"

export interface ConnectedPeers {
  readonly get: (id: string) => string | undefined
  readonly has: (id: string) => boolean
  readonly entries: () => ReadonlyArray<readonly [string, string]>
  /** Holds `id` at `url`, written through to the file. */
  readonly set: (id: string, url: string) => void
  /** Forgets `id`: whether it was held. */
  readonly delete: (id: string) => boolean
}

const read = (file: string): Map<string, string> => {
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, "utf8"))
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return new Map()
    return new Map(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"))
  } catch {
    return new Map()
  }
}

/** The connected peers of the node whose data directory is `dataDir`. */
export const connectedPeers = (dataDir: string): ConnectedPeers => {
  const file = path.join(dataDir, FILE)
  const held = read(file)
  const save = () => {
    const temporary = `${file}.${process.pid}.tmp`
    writeFileSync(temporary, JSON.stringify(Object.fromEntries(held), null, 2) + "\n", { mode: 0o600 })
    renameSync(temporary, file)
  }
  return {
    get: (id) => held.get(id),
    has: (id) => held.has(id),
    entries: () => [...held],
    set: (id, url) => {
      held.set(id, url)
      save()
    },
    delete: (id) => {
      const had = held.delete(id)
      if (had) save()
      return had
    }
  }
}
