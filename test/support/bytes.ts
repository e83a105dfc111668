/** Deterministic bytes that do not repeat block to block (so no chunk is shared by accident). */
export const bytesOf = (size: number, seed: number): Uint8Array => {
  const out = new Uint8Array(size)
  let x = seed * 2654435761 + 1
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}
