/**
 * The console's log follower (console/logTail.ts): what a read of a deployment's last lines adds
 * after the lines already shown, the API answering only the last lines, with no cursor.
 */
import { describe, expect, it } from "vitest"
import { appended, lastOf } from "../../console/logTail.js"

describe("appended: the new lines of a log read as its last lines", () => {
  it("takes every line on the first read, and none when nothing came", () => {
    expect(appended([], ["a", "b"])).toEqual({ lines: ["a", "b"], gap: false })
    expect(appended(["a", "b"], ["a", "b"])).toEqual({ lines: [], gap: false })
    expect(appended(["a", "b"], [])).toEqual({ lines: [], gap: false })
  })

  it("takes what follows the shown lines when the window has moved on", () => {
    expect(appended(["a", "b", "c"], ["b", "c", "d", "e"])).toEqual({ lines: ["d", "e"], gap: false })
    // the window larger than what was shown
    expect(appended(["c"], ["a", "b", "c", "d"])).toEqual({ lines: ["d"], gap: false })
  })

  it("matches the whole overlap, not only the last line", () => {
    // "x" was the last shown line, but an older "x" is not where the shown lines end
    expect(appended(["w", "x"], ["x", "y", "w", "x", "z"])).toEqual({ lines: ["z"], gap: false })
    expect(appended(["q", "x"], ["w", "x", "y"])).toEqual({ lines: ["w", "x", "y"], gap: true })
  })

  it("says lines may be missing when none of the shown lines is in the window", () => {
    expect(appended(["a", "b"], ["c", "d"])).toEqual({ lines: ["c", "d"], gap: true })
  })

  it("keeps the last lines", () => {
    expect(lastOf([1, 2, 3, 4], 2)).toEqual([3, 4])
    expect(lastOf([1], 2)).toEqual([1])
  })
})
