/**
 * What a gateway on a registry that reads only over the network (rqlite) keeps of the rows that
 * decide a credential, so that a burst of requests with one credential costs one registry read
 * and is answered on the spot (the fast lane) after it: API keys' rows (ApiKeys.ts) and session
 * standings (Sessions.ts). docs/auth.md, "Credentials in a cluster".
 *
 * - A value is kept for KEPT_MS after it was read, so a change made through another gateway takes
 *   effect here within that time.
 * - A change made through this gateway takes effect at once: every write that can take standing
 *   away (a key revoked, a session ended, a device revoked, a member changed or removed, an
 *   ownership transfer, a sign-in policy, a namespace deleted) calls `forget` once its batch has
 *   committed, which empties every table.
 * - Each table holds at most KEPT_MAX values; past that it is emptied and read again.
 *
 * On the embedded registry nothing is kept: its reads are answered on the spot as they are.
 */
import { Context, Layer } from "effect"

export const KEPT_MS = 1_000
const KEPT_MAX = 10_000

/** Values read a moment ago, by key, each for KEPT_MS. */
export class KeptTable<A> {
  private readonly held = new Map<string, { readonly at: number; readonly value: A }>()

  /** The value kept for `key`, or undefined when none was read in the last KEPT_MS. */
  get(key: string): A | undefined {
    const found = this.held.get(key)
    if (found === undefined) return undefined
    if (Date.now() - found.at < KEPT_MS) return found.value
    this.held.delete(key)
    return undefined
  }

  set(key: string, value: A): void {
    if (this.held.size >= KEPT_MAX) this.held.clear()
    this.held.set(key, { at: Date.now(), value })
  }

  clear(): void {
    this.held.clear()
  }
}

export interface KeptReadsService {
  /** A table emptied by every `forget`. */
  readonly table: <A>() => KeptTable<A>
  /** Empties every table: called once a write that can take standing away has committed. */
  readonly forget: () => void
}

export class KeptReads extends Context.Tag("portico/KeptReads")<KeptReads, KeptReadsService>() {
  static readonly Live = Layer.sync(KeptReads, () => {
    const tables: Array<KeptTable<unknown>> = []
    return {
      table: <A>() => {
        const table = new KeptTable<A>()
        tables.push(table as KeptTable<unknown>)
        return table
      },
      forget: () => {
        for (const table of tables) table.clear()
      }
    }
  })

  /** Nothing outside the process: the same as Live. */
  static readonly Test = KeptReads.Live
}
