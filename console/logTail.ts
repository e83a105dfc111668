/**
 * Following a log the API answers only as its last lines (`GET /v1/deployments/logs?lines=`, no
 * cursor): each read's window ends at the log's end, so what is new is what follows, in the new
 * window, the lines already shown. `appended` finds where the lines shown end inside the window:
 * the last position at which the window's lines before it equal the lines shown just as far back.
 */

/** The lines of `window` that come after `shown`, and whether some may have been missed in between. */
export const appended = (shown: ReadonlyArray<string>, window: ReadonlyArray<string>): { readonly lines: ReadonlyArray<string>; readonly gap: boolean } => {
  if (shown.length === 0) return { lines: window, gap: false }
  // the end `e` (in the window) of the lines shown, latest first: the fewest lines taken as new
  for (let e = window.length; e > 0; e--) {
    const overlap = Math.min(e, shown.length)
    let same = true
    for (let k = 1; k <= overlap && same; k++) same = window[e - k] === shown[shown.length - k]
    if (same) return { lines: window.slice(e), gap: false }
  }
  // nothing shown is in the window: more lines came than one read holds (or the log was cut)
  return { lines: window, gap: window.length > 0 }
}

/** Keeps the last `max` lines. */
export const lastOf = <A>(lines: ReadonlyArray<A>, max: number): ReadonlyArray<A> => (lines.length <= max ? lines : lines.slice(lines.length - max))
