/**
 * Shamir's secret sharing over GF(2^8) (docs/vault.md, "Shares"): the vault's split of an
 * envelope across nodes and its combine. The field is the AES one (x^8 + x^4 + x^3 + x + 1), and
 * a share is its y bytes followed by its x coordinate, the layout of the audited
 * `shamir-secret-sharing` package (and of HashiCorp Vault's `shamir`), so each side combines the
 * other's shares: the tests hold this implementation to that one.
 *
 * Table-driven over whole buffers: multiplying by a fixed x, or by a fixed Lagrange coefficient, is
 * one 256-entry table built per share, so a 512 KiB split is a few passes over typed arrays rather
 * than a call per byte (the package takes seconds for that size).
 */
import { randomFillSync } from "node:crypto"

const EXP = new Uint8Array(510)
const LOG = new Uint8Array(256)
{
  // 3 generates the field's multiplicative group; EXP runs twice round so a sum of two logs indexes it
  let v = 1
  for (let i = 0; i < 255; i++) {
    EXP[i] = v
    LOG[v] = i
    const doubled = (v << 1) ^ (v & 0x80 ? 0x11b : 0)
    v = doubled ^ v
  }
  for (let i = 255; i < 510; i++) EXP[i] = EXP[i - 255]!
}

/** a·b in the field. */
export const gfMul = (a: number, b: number): number => (a === 0 || b === 0 ? 0 : EXP[LOG[a]! + LOG[b]!]!)

/** a/b in the field (b not 0). */
const gfDiv = (a: number, b: number): number => (a === 0 ? 0 : EXP[LOG[a]! + 255 - LOG[b]!]!)

/** The table of v ↦ v·c. */
const timesTable = (c: number): Uint8Array => {
  const table = new Uint8Array(256)
  for (let v = 1; v < 256; v++) table[v] = gfMul(v, c)
  return table
}

/** Distinct non-zero x coordinates, `count` of them, in a random order. */
const coordinates = (count: number): Uint8Array => {
  const all = new Uint8Array(255)
  for (let i = 0; i < 255; i++) all[i] = i + 1
  const picks = new Uint32Array(count)
  randomFillSync(picks)
  // a partial Fisher-Yates shuffle: the first `count` places are a uniform choice (bias of a
  // 32-bit value modulo at most 255 is below 2^-24)
  for (let i = 0; i < count; i++) {
    const j = i + (picks[i]! % (255 - i))
    const t = all[i]!
    all[i] = all[j]!
    all[j] = t
  }
  return all.subarray(0, count)
}

/**
 * `secret` split into `shares` shares, any `threshold` of which give it back (1 ≤ threshold ≤
 * shares ≤ 255). With threshold 1 every share holds the secret itself: that is a copy, not a
 * sharing, and the vault says so (`mode: local`).
 */
export const split = (secret: Uint8Array, shares: number, threshold: number): ReadonlyArray<Uint8Array> => {
  if (!Number.isInteger(shares) || !Number.isInteger(threshold) || threshold < 1 || shares < threshold || shares > 255) {
    throw new RangeError(`cannot split into ${shares} shares with threshold ${threshold}`)
  }
  if (secret.length === 0) throw new RangeError("cannot split an empty secret")
  const length = secret.length
  const degree = threshold - 1
  // the random coefficients of every byte's polynomial, degree 1 first; the constant term is the secret
  const coefficients = new Uint8Array(degree * length)
  randomFillSync(coefficients)
  const xs = coordinates(shares)
  const out: Array<Uint8Array> = []
  for (let s = 0; s < shares; s++) {
    const x = xs[s]!
    const share = new Uint8Array(length + 1)
    share[length] = x
    const y = share.subarray(0, length)
    if (degree === 0) {
      y.set(secret)
    } else {
      // Horner's rule over the whole buffer: y = (((a_d)·x + a_{d-1})·x + …)·x + secret
      const times = timesTable(x)
      y.set(coefficients.subarray((degree - 1) * length, degree * length))
      for (let d = degree - 2; d >= -1; d--) {
        const row = d === -1 ? secret : coefficients.subarray(d * length, (d + 1) * length)
        for (let i = 0; i < length; i++) y[i] = times[y[i]!]! ^ row[i]!
      }
    }
    out.push(share)
  }
  coefficients.fill(0)
  return out
}

/**
 * The secret that `shares` (each y bytes then x, all one length, distinct x) interpolate to at 0.
 * Shares of different splits, or too few of one, give other bytes without any error: the caller
 * checks what comes out against a digest of the secret (the vault stores one with every share).
 */
export const combine = (shares: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (shares.length === 0) throw new RangeError("no shares to combine")
  const size = shares[0]!.length
  if (size < 2) throw new RangeError("a share holds at least one byte and its x")
  const xs = shares.map((share) => {
    if (share.length !== size) throw new RangeError("shares differ in length")
    const x = share[size - 1]!
    if (x === 0) throw new RangeError("a share's x is 0")
    return x
  })
  if (new Set(xs).size !== xs.length) throw new RangeError("two shares have the same x")
  const length = size - 1
  const secret = new Uint8Array(length)
  for (let i = 0; i < shares.length; i++) {
    // the Lagrange basis polynomial of share i at 0: ∏ x_j / (x_i − x_j), subtraction being XOR
    let basis = 1
    for (let j = 0; j < shares.length; j++) {
      if (j !== i) basis = gfMul(basis, gfDiv(xs[j]!, xs[i]! ^ xs[j]!))
    }
    const times = timesTable(basis)
    const y = shares[i]!
    for (let b = 0; b < length; b++) secret[b] = secret[b]! ^ times[y[b]!]!
  }
  return secret
}
