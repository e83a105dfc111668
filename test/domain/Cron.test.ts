import { describe, expect, it } from "vitest"
import { type Cron, firesAt, parseCron } from "../../src/domain/Cron.js"

const at = (iso: string) => Date.parse(iso) / 1000
const cron = (text: string) => parseCron(text) as Cron

describe("Cron", () => {
  it("fires on the minute for five fields, on the second for six", () => {
    expect(firesAt(cron("*/5 * * * *"), at("2026-12-05T10:15:00Z"))).toBe(true)
    expect(firesAt(cron("*/5 * * * *"), at("2026-12-05T10:15:01Z"))).toBe(false)
    expect(firesAt(cron("*/5 * * * *"), at("2026-12-05T10:16:00Z"))).toBe(false)
    expect(firesAt(cron("*/2 * * * * *"), at("2026-12-05T10:16:04Z"))).toBe(true)
    expect(firesAt(cron("*/2 * * * * *"), at("2026-12-05T10:16:05Z"))).toBe(false)
  })

  it("takes ranges, lists and steps on ranges; Sunday is 0 or 7; day and weekday either match when both are set", () => {
    const workHours = cron("0 9-17/4 * * 1-5")
    expect(firesAt(workHours, at("2026-12-07T13:00:00Z"))).toBe(true) // a Monday
    expect(firesAt(workHours, at("2026-12-06T13:00:00Z"))).toBe(false) // a Sunday
    expect(firesAt(cron("0 0 * * 7"), at("2026-12-06T00:00:00Z"))).toBe(true)
    const either = cron("0 0 1 * 1")
    expect(firesAt(either, at("2026-12-01T00:00:00Z"))).toBe(true) // the 1st, a Tuesday
    expect(firesAt(either, at("2026-12-07T00:00:00Z"))).toBe(true) // a Monday
    expect(firesAt(either, at("2026-12-08T00:00:00Z"))).toBe(false)
  })

  it("refuses what is not a schedule, naming the field", () => {
    expect(parseCron("* * * *")).toMatch(/five fields/)
    expect(parseCron("60 * * * *")).toMatch(/minute/)
    expect(parseCron("* * 0 * *")).toMatch(/day of month/)
    expect(parseCron("* * * * mon")).toMatch(/day of week/)
    expect(parseCron("*/0 * * * *")).toMatch(/minute/)
  })
})
