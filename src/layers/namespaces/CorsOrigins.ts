/**
 * The browser origins each namespace admits (docs/api.md, "Browsers and CORS"): exact origins
 * (scheme, host, port), none by default, stored on the namespace's registry row.
 *
 * Every request from a browser asks for them, so they are kept per gateway for a few seconds:
 * `get` reads through that cache, `now` answers from it on the spot (the listener's fast lane),
 * and a change made here is seen here at once and by other gateways within `CORS_CACHE_MS`.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Audit } from "../audit/Audit.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { MAX_CORS_ORIGINS } from "../../domain/Limits.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** How long a namespace's origins are used before they are read again. */
export const CORS_CACHE_MS = 5_000
/** At most this many namespaces are remembered: a host names any namespace it likes, existing or not. */
const MAX_REMEMBERED = 10_000
/** At most this many origins per namespace. */
export { MAX_CORS_ORIGINS }

export interface CorsOriginsService {
  /** The namespace's origins; none for a namespace that does not exist. */
  readonly get: (namespace: string) => Effect.Effect<ReadonlyArray<string>, StoreError>
  /** The origins known on the spot (read within `CORS_CACHE_MS`), or undefined when they must be read. */
  readonly now: (namespace: string, at: number) => ReadonlyArray<string> | undefined
  /** Replaces the namespace's origins, with its audit row, and forgets the kept ones. */
  readonly set: (namespace: string, origins: ReadonlyArray<string>, actor: string) => Effect.Effect<ReadonlyArray<string>, StoreError>
}

interface Kept {
  readonly origins: ReadonlyArray<string>
  readonly readAt: number
}

const parseOrigins = (text: unknown): ReadonlyArray<string> => {
  if (typeof text !== "string") return []
  try {
    const value: unknown = JSON.parse(text)
    return Array.isArray(value) ? value.filter((o): o is string => typeof o === "string") : []
  } catch {
    return []
  }
}

export class CorsOrigins extends Context.Tag("portico/CorsOrigins")<CorsOrigins, CorsOriginsService>() {
  static readonly Live = Layer.effect(
    CorsOrigins,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* Audit
      const kept = new Map<string, Kept>()

      const remember = (namespace: string, origins: ReadonlyArray<string>, readAt: number): void => {
        kept.delete(namespace)
        if (kept.size >= MAX_REMEMBERED) {
          const oldest = kept.keys().next()
          if (oldest.done !== true) kept.delete(oldest.value)
        }
        kept.set(namespace, { origins, readAt })
      }

      const now: CorsOriginsService["now"] = (namespace, at) => {
        const entry = kept.get(namespace)
        return entry !== undefined && at - entry.readAt < CORS_CACHE_MS ? entry.origins : undefined
      }

      const get: CorsOriginsService["get"] = (namespace) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => {
          const known = now(namespace, at)
          if (known !== undefined) return Effect.succeed(known)
          return Effect.map(
            store.query({ sql: "SELECT cors_origins FROM namespaces WHERE name = ?", params: [namespace] }),
            (rows) => {
              const origins = parseOrigins(rows[0]?.["cors_origins"])
              remember(namespace, origins, at)
              return origins
            }
          )
        })

      const set: CorsOriginsService["set"] = (namespace, origins, actor) =>
        Effect.gen(function* () {
          const unique = Array.from(new Set(origins))
          const entry = yield* audit.entry(namespace, "namespace.cors", actor, namespace, { origins: unique })
          yield* store.batch([
            { sql: "UPDATE namespaces SET cors_origins = ? WHERE name = ?", params: [JSON.stringify(unique), namespace] },
            entry
          ])
          kept.delete(namespace)
          return unique
        })

      return { get, now, set }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    CorsOrigins.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Audit.Test
        )
      )
    )
  )
}
