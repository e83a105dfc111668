import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { EDGE_TOKEN_FILE, edgeToken, makeEdgeAccess } from "../../../src/layers/edge/EdgeAccess.js"

describe("the edge token", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-edge-token-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  it("is made once, 32 random bytes in a file only its owner reads, and read back after", () => {
    const token = edgeToken(dir)
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(fs.statSync(path.join(dir, EDGE_TOKEN_FILE)).mode & 0o777).toBe(0o600)
    expect(edgeToken(dir)).toBe(token)
    expect(fs.readdirSync(dir)).toEqual([EDGE_TOKEN_FILE])
  })

  it("admits only a loopback caller holding it", () => {
    const access = makeEdgeAccess(dir)
    const token = edgeToken(dir)
    const code = (authorization: string | undefined, remote: string | undefined) => {
      const result = Effect.runSync(Effect.either(access.admit(authorization, remote)))
      return Either.isLeft(result) ? result.left.code : "admitted"
    }
    expect(code(`Bearer ${token}`, "127.0.0.1")).toBe("admitted")
    expect(code(`Bearer ${token}`, "::ffff:127.0.0.1")).toBe("admitted")
    expect(code(`Bearer ${token}`, "::1")).toBe("admitted")
    for (const remote of ["192.0.2.7", "::ffff:192.0.2.7", "2001:db8::1", undefined]) expect(code(`Bearer ${token}`, remote)).toBe("FORBIDDEN")
    for (const authorization of [undefined, "", token, `bearer ${token}`, `Bearer ${token}x`, `Bearer ${"A".repeat(43)}`]) {
      expect(code(authorization, "127.0.0.1")).toBe("UNAUTHORIZED")
    }
  })
})
