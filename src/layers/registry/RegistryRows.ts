/**
 * Registry rows decoded by Schema: a row not of its shape is a StoreError of reason `statement`
 * (a damaged row, never a client's), named for what it should have been.
 */
import { Effect, Schema } from "effect"
import { type Row, StoreError } from "./RegistryStore.js"

export const decodeRows = <A, I>(what: string, schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(schema))
  return (rows: ReadonlyArray<Row>) =>
    Effect.mapError(decode(rows), (e) => new StoreError({ reason: "statement", detail: `a ${what} row is not of its shape: ${e.message}` }))
}
