/** How IPFS Cluster's per-peer answers fold into one pin status (spec §2.4). */
import { describe, expect, it } from "vitest"
import { aggregate } from "../../../src/layers/storage/KuboContentEngine.js"

describe("cluster pin status", () => {
  it("counts only the peers the pin is allocated to", () => {
    const state = aggregate(
      { a: { status: "pinned" }, b: { status: "pinned" }, c: { status: "pin_error", error: "disk full" } },
      ["a", "b"],
      2,
      2
    )
    expect(state).toEqual({ status: "pinned", replicationMin: 2, replicationMax: 2, replicationFactor: 2, peers: ["a", "b"], error: "" })
  })
  it("reports an error, then pinning, then queued, before pinned", () => {
    expect(aggregate({ a: { status: "pinned" }, b: { status: "pin_error", error: "boom" } }, [], -1, -1)).toMatchObject({
      status: "error",
      error: "boom",
      replicationFactor: 1
    })
    expect(aggregate({ a: { status: "pinned" }, b: { status: "pinning" } }, [], -1, -1).status).toBe("pinning")
    expect(aggregate({ a: { status: "pin_queued" }, b: { status: "pinned" } }, [], -1, -1).status).toBe("queued")
    expect(aggregate({ a: { status: "unpinned" } }, [], -1, -1).status).toBe("unpinned")
    expect(aggregate({}, [], -1, -1).status).toBe("unknown")
    expect(aggregate({ a: { status: "remote" } }, [], -1, -1).status).toBe("unknown")
  })
})
