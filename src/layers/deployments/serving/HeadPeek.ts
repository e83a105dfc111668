/**
 * A first look at a connection's first bytes (AppConnections.ts): the `Host` of a request head
 * that arrived whole, found without a parser. It only ever decides that a connection is not an
 * app's and goes to node's server, which parses it strictly and routes every host itself (an app's
 * included, on its slower path), so a wrong answer here costs speed, never a request's meaning.
 * A head it cannot read plainly is left to llhttp.
 */

const CR = 0x0d
const LF = 0x0a
const END_OF_HEAD = Buffer.from("\r\n\r\n", "latin1")
/** Longer than any head node's server takes (16 KiB): past it the peek gives up. */
const PEEK_LIMIT = 16 * 1024

const SP = 0x20
const HTAB = 0x09

/** The field value between `from` and `to`, without the spaces and tabs around it (HTTP's OWS). */
const valueOf = (chunk: Buffer, from: number, to: number): string => {
  while (from < to && (chunk[from] === SP || chunk[from] === HTAB)) from++
  while (to > from && (chunk[to - 1] === SP || chunk[to - 1] === HTAB)) to--
  return chunk.toString("latin1", from, to)
}

/** `host` in any letter case: lowercase the ASCII letters by OR-ing 0x20. */
const isHostName = (chunk: Buffer, at: number): boolean =>
  ((chunk[at] as number) | 0x20) === 0x68 &&
  ((chunk[at + 1] as number) | 0x20) === 0x6f &&
  ((chunk[at + 2] as number) | 0x20) === 0x73 &&
  ((chunk[at + 3] as number) | 0x20) === 0x74 &&
  chunk[at + 4] === 0x3a

/**
 * The value of the head's one `Host` line; `null` when the head has none or several; undefined
 * when the chunk holds no whole head, or a line the peek does not read plainly (a line folded onto
 * the next, a bare CR or LF).
 */
export const soleHost = (chunk: Buffer): string | null | undefined => {
  const end = chunk.indexOf(END_OF_HEAD, 0)
  if (end < 0 || end > PEEK_LIMIT) return undefined
  let host: string | null = null
  // the request line ends at the first CRLF; each header line after it until the blank one
  let line = chunk.indexOf(CR, 0)
  if (line < 0 || chunk.indexOf(LF, 0) !== line + 1) return undefined
  line += 2
  while (line < end + 2) {
    const cr = chunk.indexOf(CR, line)
    // a bare CR or LF inside the line, or a line folded onto the next (obs-fold)
    if (cr < 0 || chunk[cr + 1] !== LF || chunk.indexOf(LF, line) !== cr + 1) return undefined
    if (chunk[line] === SP || chunk[line] === HTAB) return undefined
    if (cr - line >= 5 && isHostName(chunk, line)) {
      if (host !== null) return null
      host = valueOf(chunk, line + 5, cr)
    }
    line = cr + 2
  }
  return host
}

/** Whether the connection's first bytes are a whole head that names no `Host`, several, or one no app has here. */
export const plainlyNoApp = (chunk: Buffer, appOf: (host: string) => unknown): boolean => {
  const host = soleHost(chunk)
  return host === null || (host !== undefined && appOf(host) === undefined)
}
