/** Wire helpers shared by every route group. */
import { Schema } from "effect"

/** Refuses unknown members: a misspelt field is a 400, never silently ignored. */
export const strict = <S extends Schema.Schema.Any>(schema: S): S =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

/** Unix seconds, as every timestamp on the wire. */
export const UnixSeconds = Schema.Int.annotations({ description: "Unix time in seconds" })

export const toUnixSeconds = (ms: number): number => Math.floor(ms / 1000)
