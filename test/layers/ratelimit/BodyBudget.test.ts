/** Body bytes in flight per client network and per process (src/layers/ratelimit/BodyBudget.ts). */
import { describe, expect, it } from "vitest"
import { BodyBudget } from "../../../src/layers/ratelimit/BodyBudget.js"

describe("BodyBudget", () => {
  it("refuses a network past its cap, then the process past its own, and takes bodies again once released", () => {
    const budget = new BodyBudget({ perNetworkBytes: 10, perProcessBytes: 25 })
    expect(budget.reserve("a", 4)).toBeUndefined()
    expect(budget.reserve("a", 6)).toBeUndefined()
    expect(budget.reserve("a", 1)).toBe("network")
    expect(budget.inFlight("a")).toBe(10)
    expect(budget.reserve("b", 10)).toBeUndefined()
    // 20 in flight: a third network's 6 would pass the process cap
    expect(budget.reserve("c", 6)).toBe("process")
    expect(budget.reserve("c", 5)).toBeUndefined()
    expect(budget.inFlight()).toBe(25)
    budget.release("a", 4)
    expect(budget.reserve("a", 4)).toBeUndefined()
    budget.release("a", 10)
    budget.release("b", 10)
    budget.release("c", 5)
    expect(budget.inFlight()).toBe(0)
    expect(budget.inFlight("a")).toBe(0)
  })

  it("admits one body larger than a cap when nothing else of its network (or process) is in flight", () => {
    const budget = new BodyBudget({ perNetworkBytes: 10, perProcessBytes: 30 })
    expect(budget.reserve("a", 50)).toBeUndefined()
    expect(budget.reserve("a", 1)).toBe("network")
    expect(budget.reserve("b", 1)).toBe("process")
    budget.release("a", 50)
    expect(budget.reserve("b", 1)).toBeUndefined()
  })

  it("counts a node-to-node body against the process only", () => {
    const budget = new BodyBudget({ perNetworkBytes: 10, perProcessBytes: 100 })
    expect(budget.reserve(undefined, 40)).toBeUndefined()
    expect(budget.reserve(undefined, 40)).toBeUndefined()
    expect(budget.reserve("a", 10)).toBeUndefined()
    expect(budget.reserve(undefined, 40)).toBe("process")
  })
})
