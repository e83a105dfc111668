/**
 * The upload's progress on stderr (stdout keeps only the result): percent, bytes sent of the
 * total and the rate. On a terminal one line is redrawn in place (at most ten times a second);
 * otherwise (a CI log, a pipe) a plain line at each quarter, so a log gets five lines, not
 * thousands of carriage returns.
 */

export interface ProgressOutput {
  readonly isTTY?: boolean | undefined
  readonly columns?: number | undefined
  write(text: string): unknown
}

export interface Progress {
  /** `bytes` more were sent. */
  readonly advance: (bytes: number) => void
  /** Ends the bar (a newline on a terminal), whether or not every byte went. */
  readonly done: () => void
}

const units = ["B", "KiB", "MiB", "GiB"] as const

export const formatBytes = (bytes: number): string => {
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`
}

/** One progress line: `uploading [#####-----]  50%  1.0 MiB / 2.0 MiB  512.0 KiB/s`. */
export const progressLine = (label: string, sent: number, total: number, seconds: number, barWidth: number): string => {
  const fraction = total === 0 ? 1 : Math.min(1, sent / total)
  const percent = `${Math.floor(fraction * 100)}%`.padStart(4)
  const rate = seconds > 0 ? `${formatBytes(Math.round(sent / seconds))}/s` : "-"
  const filled = Math.round(fraction * barWidth)
  const bar = barWidth > 0 ? `[${"#".repeat(filled)}${"-".repeat(barWidth - filled)}] ` : ""
  return `${label} ${bar}${percent}  ${formatBytes(sent)} / ${formatBytes(total)}  ${rate}`
}

export const startProgress = (
  label: string,
  total: number,
  output: ProgressOutput = process.stderr,
  now: () => number = () => performance.now()
): Progress => {
  const started = now()
  const tty = output.isTTY === true
  let sent = 0
  let lastDraw = -Infinity
  let quartersShown = -1
  let finished = false
  /** The count the last line drawn on a terminal showed: the end draws again only when it moved. */
  let drawnAt = -1
  const seconds = () => (now() - started) / 1000

  const draw = (force: boolean): void => {
    if (tty) {
      const t = now()
      if (!force && t - lastDraw < 100) return
      if (sent === drawnAt && lastDraw !== -Infinity) return
      lastDraw = t
      drawnAt = sent
      // The bar shrinks with a narrow terminal so the line never wraps (a wrapped line cannot be
      // redrawn). A terminal that reports no width (undefined or 0: some pseudo-terminals) is
      // taken as 80 columns, the width every terminal has.
      const columns = output.columns !== undefined && output.columns > 0 ? output.columns : 80
      const width = Math.max(0, Math.min(30, columns - 60))
      output.write(`\r${progressLine(label, sent, total, seconds(), width)}\x1b[K`)
      return
    }
    const quarter = total === 0 ? 4 : Math.floor((Math.min(sent, total) / total) * 4)
    if (quarter > quartersShown) {
      quartersShown = quarter
      output.write(progressLine(label, sent, total, seconds(), 0) + "\n")
    }
  }

  draw(true)
  return {
    advance: (bytes) => {
      sent += bytes
      draw(sent >= total)
    },
    done: () => {
      if (finished) return
      finished = true
      if (tty) {
        draw(true)
        output.write("\n")
      }
    }
  }
}
