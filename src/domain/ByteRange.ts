/**
 * One HTTP byte range (RFC 9110 §14) against a representation of `size` bytes. Several ranges in
 * one header are answered with the whole body, which the RFC allows: content here is immutable
 * and clients that seek ask for one range at a time.
 */
export type RangeAnswer =
  | { readonly kind: "whole" }
  | { readonly kind: "partial"; readonly start: number; readonly end: number }
  | { readonly kind: "unsatisfiable" }

const SINGLE = /^bytes=(\d{0,16})-(\d{0,16})$/

export const resolveRange = (header: string | undefined, size: number): RangeAnswer => {
  if (header === undefined) return { kind: "whole" }
  const match = SINGLE.exec(header.trim())
  // not a single bytes range: ignore it, as a server may
  if (match === null) return { kind: "whole" }
  const [, first = "", last = ""] = match
  if (first === "" && last === "") return { kind: "whole" }
  if (first === "") {
    // suffix range: the last N bytes
    const n = Number(last)
    if (n === 0) return { kind: "unsatisfiable" }
    return size === 0 ? { kind: "unsatisfiable" } : { kind: "partial", start: Math.max(0, size - n), end: size - 1 }
  }
  const start = Number(first)
  if (start >= size) return { kind: "unsatisfiable" }
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  if (end < start) return { kind: "whole" }
  return { kind: "partial", start, end }
}
