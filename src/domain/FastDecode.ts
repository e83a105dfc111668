/**
 * A fast path for decoding small request payloads: a schema's AST compiled once into a plain
 * function that accepts exactly what `Schema.decodeUnknownEither(schema)` accepts, with the same
 * output, for the few AST shapes the hot payloads use (strict structs of strings, refinements,
 * arrays, optional members, SQL arguments' scalars and bigints), and says "not sure" (undefined)
 * for anything else.
 *
 * Why: on the cache routes the schema decode of a two-member body was ~5 µs of a ~100 µs request
 * under load (ParseResult's generic struct walk: option merging, key reflection, Either per
 * member). The schema stays the authority: `decoderOf` below uses the compiled check only to
 * accept; whatever it does not accept goes through the schema, which then decides (and says why).
 * test/domain/FastDecode.test.ts checks the two agree on generated inputs.
 */
import { Either, Option, type ParseResult, Schema, SchemaAST as AST } from "effect"

/** Decodes `input`, or undefined when it does not accept (which says nothing about validity). */
type Check = (input: unknown) => { readonly value: unknown } | undefined

type Options = AST.ParseOptions

const NO = undefined

/**
 * The check for `ast` under the parse options in force there (`options`), or undefined when the
 * AST holds a node this compiler does not model exactly.
 */
const compile = (ast: AST.AST, inherited: Options | undefined): Check | undefined => {
  if (Option.isSome(AST.getDecodingFallbackAnnotation(ast))) return undefined
  const annotated = AST.getParseOptionsAnnotation(ast)
  const options: Options | undefined = Option.isSome(annotated) ? { ...inherited, ...annotated.value } : inherited
  switch (ast._tag) {
    case "StringKeyword":
      return (u) => (typeof u === "string" ? { value: u } : NO)
    case "NumberKeyword":
      return (u) => (typeof u === "number" ? { value: u } : NO)
    case "BooleanKeyword":
      return (u) => (typeof u === "boolean" ? { value: u } : NO)
    case "UndefinedKeyword":
      return (u) => (u === undefined ? { value: u } : NO)
    case "UnknownKeyword":
    case "AnyKeyword":
      return (u) => ({ value: u })
    case "Literal": {
      const literal = ast.literal
      return (u) => (u === literal ? { value: u } : NO)
    }
    case "BigIntKeyword":
      // `BigIntFromSelf`: a wide SQL argument, as the body parser keeps it (ExactJson.ts)
      return (u) => (typeof u === "bigint" ? { value: u } : NO)
    case "Refinement": {
      const from = compile(ast.from, options)
      if (from === undefined) return undefined
      // ParseResult hands a filter the options in force, or its default when there are none
      const filterOptions = options ?? AST.defaultParseOption
      return (u) => {
        const decoded = from(u)
        return decoded !== undefined && Option.isNone(ast.filter(decoded.value, filterOptions, ast)) ? decoded : NO
      }
    }
    case "Union": {
      // `X | undefined`, as `optional` makes it: undefined is only undefined's, anything else X's
      if (ast.types.length === 2 && ast.types[1]?._tag === "UndefinedKeyword" && !isPrimitive(ast.types[0] as AST.AST)) {
        const member = compile(ast.types[0] as AST.AST, options)
        if (member === undefined) return undefined
        return (u) => (u === undefined ? { value: u } : member(u))
      }
      // otherwise only unions whose members decode to their input (strings, numbers, null...):
      // then which member accepts first cannot change the output
      if (!ast.types.every(isPrimitive)) return undefined
      const members = ast.types.map((t) => compile(t, options))
      if (members.some((m) => m === undefined)) return undefined
      const checks = members as ReadonlyArray<Check>
      return (u) => (checks.some((check) => check(u) !== undefined) ? { value: u } : NO)
    }
    case "TupleType": {
      // arrays only (`Schema.Array`): one rest element, no fixed elements
      if (ast.elements.length !== 0 || ast.rest.length !== 1) return undefined
      const item = compile((ast.rest[0] as AST.Type).type, options)
      if (item === undefined) return undefined
      return (u) => {
        if (!Array.isArray(u)) return NO
        const out: Array<unknown> = new Array(u.length)
        for (let i = 0; i < u.length; i++) {
          const decoded = item(u[i])
          if (decoded === undefined) return NO
          out[i] = decoded.value
        }
        return { value: out }
      }
    }
    case "TypeLiteral": {
      // strict structs only: under the default ("ignore") an excess member would be dropped from
      // the output, which this check does not model
      if (options?.onExcessProperty !== "error" || ast.indexSignatures.length > 0) return undefined
      const members: Array<{ name: string; optional: boolean; check: Check }> = []
      for (const ps of ast.propertySignatures) {
        const check = compile(ps.type, options)
        if (check === undefined || typeof ps.name !== "string") return undefined
        members.push({ name: ps.name, optional: ps.isOptional, check })
      }
      const expected = new Set(members.map((m) => m.name))
      const exact = options?.exact === true
      return (u) => {
        if (typeof u !== "object" || u === null || Array.isArray(u)) return NO
        for (const key of Reflect.ownKeys(u)) if (typeof key !== "string" || !expected.has(key)) return NO
        const input = u as Record<string, unknown>
        const out: Record<string, unknown> = {}
        for (const m of members) {
          const present = Object.prototype.hasOwnProperty.call(input, m.name)
          if (!present) {
            if (m.optional) continue
            // as ParseResult: a missing required member is checked as undefined unless `exact`
            if (exact) return NO
          }
          const decoded = m.check(input[m.name])
          if (decoded === undefined) return NO
          out[m.name] = decoded.value
        }
        return { value: out }
      }
    }
    default:
      return undefined
  }
}

const isPrimitive = (ast: AST.AST): boolean => {
  switch (ast._tag) {
    case "BigIntKeyword":
      return true
    case "StringKeyword":
    case "NumberKeyword":
    case "BooleanKeyword":
    case "UndefinedKeyword":
    case "Literal":
      return true
    case "Refinement":
      return isPrimitive(ast.from)
    // a union of such (`Schema.Union(Role, KeyRole)`, each a union of literals) decodes to its input too
    case "Union":
      return ast.types.every(isPrimitive)
    default:
      return false
  }
}

/** The compiled check of a schema, or undefined when its AST is outside what is modelled. */
export const fastCheck = <A, I>(schema: Schema.Schema<A, I>): ((input: unknown) => { readonly value: A } | undefined) | undefined =>
  compile(schema.ast, undefined) as ((input: unknown) => { readonly value: A } | undefined) | undefined

/**
 * `Schema.decodeUnknownEither(schema)`, taking the compiled check's answer when it accepts. The
 * schema decides everything else, so a failure always carries the schema's own issue.
 */
export const decoderOf = <A, I>(schema: Schema.Schema<A, I>): ((input: unknown) => Either.Either<A, ParseResult.ParseError>) => {
  const decode = Schema.decodeUnknownEither(schema)
  const fast = fastCheck(schema)
  if (fast === undefined) return decode
  return (input) => {
    const accepted = fast(input)
    return accepted !== undefined ? Either.right(accepted.value) : decode(input)
  }
}
