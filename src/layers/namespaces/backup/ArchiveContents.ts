/**
 * The JSON entries of a namespace backup (docs/namespaces.md "Backup and restore"): the manifest,
 * the registry rows and the pin list, as schemas, so a restore decodes them as strictly as a
 * request body before anything is written.
 */
import { Either, Schema } from "effect"

export const ARCHIVE_FORMAT = "portico-namespace-backup"
export const ARCHIVE_VERSION = 1

export const Manifest = Schema.Struct({
  format: Schema.Literal(ARCHIVE_FORMAT),
  version: Schema.Literal(ARCHIVE_VERSION),
  namespace: Schema.String,
  /** Unix milliseconds. */
  created_at: Schema.Number,
  node: Schema.String,
  databases: Schema.Int,
  pins: Schema.Int
})
export type Manifest = typeof Manifest.Type

const Wallet = Schema.String.pipe(Schema.pattern(/^0x[0-9a-f]{40}$/))
export const DatabaseName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/))
const Millis = Schema.Number.pipe(Schema.nonNegative())

export const RegistryRows = Schema.Struct({
  settings: Schema.Struct({
    rate_limit_rps: Schema.NullOr(Schema.Int),
    rate_limit_burst: Schema.NullOr(Schema.Int),
    cors_origins: Schema.Array(Schema.String).pipe(Schema.maxItems(32))
  }),
  members: Schema.Array(
    Schema.Struct({
      wallet: Wallet,
      role: Schema.Literal("owner", "admin", "developer", "runtime", "reader", "user"),
      added_at: Millis,
      added_by: Schema.String.pipe(Schema.maxLength(256))
    })
  ).pipe(Schema.maxItems(100_000)),
  databases: Schema.Array(Schema.Struct({ name: DatabaseName, created_at: Millis })).pipe(Schema.maxItems(10_000))
})
export type RegistryRows = typeof RegistryRows.Type

export const Pin = Schema.Struct({
  cid: Schema.String.pipe(Schema.maxLength(256)),
  name: Schema.String.pipe(Schema.maxLength(1024)),
  size: Schema.Int.pipe(Schema.nonNegative()),
  created_at: Millis
})
export const Pins = Schema.Array(Pin)
export type Pin = typeof Pin.Type

/** Decodes a JSON entry, or answers why it is not one this gateway writes. */
export const decodeEntry = <A, I>(schema: Schema.Schema<A, I>, bytes: Buffer): Either.Either<A, string> =>
  Either.mapLeft(Schema.decodeUnknownEither(Schema.parseJson(schema))(bytes.toString("utf8")), (e) => e.message.slice(0, 300))
