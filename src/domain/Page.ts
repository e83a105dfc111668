/** A page of a keyset-paged list (src/layers/registry/Keyset.ts) as the API pages it (src/api/Paging.ts). */

/** The values of a row's ordering key, in the order's column order. */
export type KeyValues = ReadonlyArray<string | number>

/** One page to read: at most `limit` rows after `after` (undefined: from the start). */
export interface PageRequest {
  readonly limit: number
  readonly after: KeyValues | undefined
}

/** A page read: its items, and the key to continue after when there may be more (undefined at the end). */
export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly next: KeyValues | undefined
}
