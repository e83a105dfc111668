/**
 * Cron expressions for function schedules (docs/functions.md, "Schedules"): five fields (minute,
 * hour, day of month, month, day of week) or six with seconds first, each `*`, a number, a range
 * `a-b`, a list `a,b`, and a step `/n` on `*` or a range. Times are UTC. Day of month and day of
 * week follow Vixie cron: when both are restricted, either matching is enough. Client-safe.
 */

export interface Cron {
  readonly text: string
  readonly seconds: ReadonlySet<number>
  readonly minutes: ReadonlySet<number>
  readonly hours: ReadonlySet<number>
  readonly days: ReadonlySet<number>
  readonly months: ReadonlySet<number>
  readonly weekdays: ReadonlySet<number>
  readonly daysRestricted: boolean
  readonly weekdaysRestricted: boolean
}

const FIELDS = [
  { name: "second", min: 0, max: 59 },
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12 },
  { name: "day of week", min: 0, max: 7 }
] as const

const field = (text: string, spec: (typeof FIELDS)[number]): Set<number> | string => {
  const values = new Set<number>()
  for (const part of text.split(",")) {
    const match = /^(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:\/(\d{1,2}))?$/.exec(part)
    if (match === null) return `${spec.name}: ${JSON.stringify(part)} is not *, N, A-B or a list of them, with an optional /STEP`
    const from = match[1] === "*" ? spec.min : Number(match[2])
    const to = match[1] === "*" ? spec.max : match[3] === undefined ? (match[4] === undefined ? from : spec.max) : Number(match[3])
    const step = match[4] === undefined ? 1 : Number(match[4])
    if (from < spec.min || to > spec.max || from > to || step < 1) return `${spec.name}: ${part} is outside ${spec.min}-${spec.max}`
    for (let v = from; v <= to; v += step) values.add(spec.name === "day of week" && v === 7 ? 0 : v)
  }
  return values
}

/** The expression parsed, or why it is refused. */
export const parseCron = (text: string): Cron | string => {
  const parts = text.trim().split(/\s+/)
  if (parts.length !== 5 && parts.length !== 6) return "a schedule has five fields (minute hour day month weekday), or six with seconds first"
  const all = parts.length === 5 ? ["0", ...parts] : parts
  const sets: Array<Set<number>> = []
  for (const [i, spec] of FIELDS.entries()) {
    const parsed = field(all[i]!, spec)
    if (typeof parsed === "string") return parsed
    sets.push(parsed)
  }
  return {
    text: text.trim(),
    seconds: sets[0]!,
    minutes: sets[1]!,
    hours: sets[2]!,
    days: sets[3]!,
    months: sets[4]!,
    weekdays: sets[5]!,
    daysRestricted: all[3] !== "*",
    weekdaysRestricted: all[5] !== "*"
  }
}

/** Whether the schedule fires at this second (UTC; `at` is whole seconds since the epoch). */
export const firesAt = (cron: Cron, at: number): boolean => {
  const d = new Date(at * 1000)
  if (!cron.seconds.has(d.getUTCSeconds()) || !cron.minutes.has(d.getUTCMinutes()) || !cron.hours.has(d.getUTCHours())) return false
  if (!cron.months.has(d.getUTCMonth() + 1)) return false
  const day = cron.days.has(d.getUTCDate())
  const weekday = cron.weekdays.has(d.getUTCDay())
  return cron.daysRestricted && cron.weekdaysRestricted ? day || weekday : day && weekday
}
