/**
 * The catalogue's wire side and lookups: each class's wire schema (`{error, code, hint?}`, no
 * `_tag`, the code an enumeration of one, the status annotated), the status of every code and
 * class, and `refusal`, the one way to build the class of a code.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { type ApiError, catalogue, type Catalogue, type ErrorCode, type ErrorOf } from "./Catalogue.js"

/** The body every refusal goes out as (`hint` only when there is one). */
export interface ErrorBody {
  readonly error: string
  readonly code: string
  readonly hint?: string | undefined
}

/**
 * The one writer of the envelope's text, whichever path answers (the app, the fast lane, the
 * listener, node's parser refusals, app hosts, WebSocket handshakes): the members in this order,
 * `hint` only when there is one.
 */
export const envelopeText = (body: ErrorBody): string =>
  JSON.stringify(body.hint === undefined ? { error: body.error, code: body.code } : { error: body.error, code: body.code, hint: body.hint })

/** The wire body of one code. */
export interface WireBody<C extends string> {
  readonly error: string
  readonly code: C
  readonly hint?: string | undefined
}

type Tag = keyof Catalogue
type AnyClass = Catalogue[Tag]

/** A class's wire schema: the class on the type side, its body on the wire. */
export type WireOf<K extends Tag> = Schema.Schema<InstanceType<Catalogue[K]>, WireBody<InstanceType<Catalogue[K]>["code"]>>

const tags = Object.keys(catalogue) as ReadonlyArray<Tag>

/** The code a class answers (its constructor fills it in). */
const codeOfClass = (cls: AnyClass): ErrorCode => new (cls as new (props: { error: string }) => ApiError)({ error: "" }).code

/** Every code, in catalogue order. */
export const errorCodes: ReadonlyArray<ErrorCode> = tags.map((tag) => codeOfClass(catalogue[tag]))

/** The status of each class, by tag. */
export const statusOfTag = Object.fromEntries(
  tags.map((tag) => [tag, HttpApiSchema.getStatusErrorAST(catalogue[tag].ast)])
) as Readonly<Record<Tag, number>>

/** The status of each code. */
export const statusOfCode = Object.fromEntries(tags.map((tag) => [codeOfClass(catalogue[tag]), statusOfTag[tag]])) as Readonly<
  Record<ErrorCode, number>
>

const classOfCode = Object.fromEntries(tags.map((tag) => [codeOfClass(catalogue[tag]), catalogue[tag]])) as Readonly<
  Record<ErrorCode, AnyClass>
>

/** The machine codes, named once: `Code.NOT_FOUND` is the literal "NOT_FOUND". */
export const Code = Object.fromEntries(errorCodes.map((code) => [code, code])) as { readonly [C in ErrorCode]: C }

export const isErrorCode = (u: unknown): u is ErrorCode => typeof u === "string" && Object.hasOwn(classOfCode, u)

/** The HTTP status of an error. */
export const statusOf = (error: ApiError): number => statusOfTag[error._tag]

/** Whether a value is one of the catalogue's errors. */
export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" &&
  u !== null &&
  "_tag" in u &&
  typeof u._tag === "string" &&
  Object.hasOwn(catalogue, u._tag) &&
  u instanceof catalogue[u._tag as Tag]

const wireOf = (tag: Tag) => {
  const cls = catalogue[tag]
  const body = Schema.Struct({
    error: Schema.String.annotations({ description: "What went wrong, for a human" }),
    code: Schema.Literal(codeOfClass(cls)).annotations({ description: "Stable machine-readable code" }),
    hint: Schema.optional(Schema.String.annotations({ description: "How to fix or retry" }))
  }).annotations({ identifier: tag })
  return Schema.transform(body, cls as unknown as Schema.Schema<ApiError, { readonly _tag: string } & ErrorBody>, {
    strict: false,
    decode: (wire) => ({ _tag: tag, ...wire }),
    encode: (value) => {
      const { _tag, retryAfterSeconds, ...wire } = value as { readonly _tag: string; readonly retryAfterSeconds?: number } & ErrorBody
      return wire
    }
  }).annotations(HttpApiSchema.annotations({ status: statusOfTag[tag] }))
}

/** The wire schema of every class, by tag: endpoints declare `.addError(Wire.NotFound)`. */
export const Wire = Object.fromEntries(tags.map((tag) => [tag, wireOf(tag)])) as unknown as { readonly [K in Tag]: WireOf<K> }

const wireOfCode = Object.fromEntries(tags.map((tag) => [codeOfClass(catalogue[tag]), Wire[tag]])) as unknown as {
  readonly [C in ErrorCode]: Schema.Schema<ErrorOf<C>, WireBody<C>>
}

/** The wire schemas of several codes as one union to declare (`.addError(wiresOf(CacheRefusals))`). */
export const wiresOf = <const Cs extends ReadonlyArray<ErrorCode>>(codes: Cs): Schema.Schema<ErrorOf<Cs[number]>, WireBody<Cs[number]>> =>
  Schema.Union(...codes.map((code) => wireOfCode[code])) as unknown as Schema.Schema<ErrorOf<Cs[number]>, WireBody<Cs[number]>>

/**
 * The class of `code`, holding `error` and `hint`. A class that carries `Retry-After` gets
 * `retryAfterSeconds` (1 when not given); others ignore it.
 */
export const refusal = <C extends ErrorCode>(code: C, error: string, hint?: string, retryAfterSeconds?: number): ErrorOf<C> => {
  const cls = classOfCode[code] as unknown as new (props: Record<string, unknown>) => ErrorOf<C>
  const retries = "retryAfterSeconds" in classOfCode[code].fields
  return new cls({
    error,
    ...(hint === undefined ? {} : { hint }),
    ...(retries ? { retryAfterSeconds: retryAfterSeconds ?? 1 } : {})
  })
}

/** A store or engine did not answer: 503 UNAVAILABLE, retry shortly (`Retry-After: 1`). */
export const unavailable = (error: string) => refusal("UNAVAILABLE", error, "retry shortly")

/** A bug: the detail goes to the log only. */
export const internal = () => refusal("INTERNAL", "internal error")

/** A service's own refusal, in catalogue codes. */
export interface DomainRefusal<C extends ErrorCode> {
  readonly code: C
  readonly reason: string
  readonly hint?: string | undefined
  readonly retryAfterSeconds?: number | undefined
}

/** The one mapping of a service's refusal to the API error of its code. */
export const fromRefusal = <C extends ErrorCode>(r: DomainRefusal<C>): ErrorOf<C> => refusal(r.code, r.reason, r.hint, r.retryAfterSeconds)
