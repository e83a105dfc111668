/**
 * The first look at a connection's bytes (src/layers/deployments/serving/HeadPeek.ts): the one
 * `Host` of a whole head, `null` for none or several, and undefined for anything it leaves to
 * llhttp. Every head llhttp would read differently must be undefined or name the same host.
 */
import { describe, expect, it } from "vitest"
import { soleHost } from "../../../src/layers/deployments/serving/HeadPeek.js"

const head = (...lines: ReadonlyArray<string>) => Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1")

describe("the head peek", () => {
  const cases: ReadonlyArray<readonly [string, Buffer, string | null | undefined]> = [
    ["the one Host, its spaces and tabs around it dropped", head("GET / HTTP/1.1", "Host: \t api.example.test \t", "Accept: */*"), "api.example.test"],
    ["any letter case", head("GET / HTTP/1.1", "hOsT:app.example.test:8080"), "app.example.test:8080"],
    ["a Host last, before the blank line", head("GET /x HTTP/1.1", "Accept: */*", "Host: a.test"), "a.test"],
    ["no Host", head("GET / HTTP/1.1", "Accept: */*"), null],
    ["no headers at all", head("GET / HTTP/1.1"), null],
    ["two Host lines", head("GET / HTTP/1.1", "Host: a.test", "host: b.test"), null],
    ["a name that only starts like Host", head("GET / HTTP/1.1", "Hostname: a.test", "X-Host: b.test"), null],
    ["a space before the colon (llhttp refuses it; node's server answers)", head("GET / HTTP/1.1", "Host : a.test"), null],
    ["a head not yet whole", Buffer.from("GET / HTTP/1.1\r\nHost: a.test\r\n", "latin1"), undefined],
    ["a line folded onto the next", head("GET / HTTP/1.1", "Host: a.test", " b.test"), undefined],
    ["a bare LF inside a line", Buffer.from("GET / HTTP/1.1\r\nX: y\nHost: evil.test\r\nHost: a.test\r\n\r\n", "latin1"), undefined],
    ["a bare CR inside a line", Buffer.from("GET / HTTP/1.1\r\nX: y\rHost: evil.test\r\n\r\n", "latin1"), undefined],
    ["a request line ended by a bare LF", Buffer.from("GET / HTTP/1.1\nHost: a.test\r\n\r\n", "latin1"), undefined],
    ["a non-breaking space kept in the value (only SP and HTAB are OWS)", head("GET / HTTP/1.1", "Host: a.test\u00a0"), "a.test\u00a0"]
  ]
  for (const [what, bytes, expected] of cases) {
    it(what, () => expect(soleHost(bytes)).toBe(expected))
  }

  it("reads a head with a body after it, and gives up past 16 KiB", () => {
    expect(soleHost(Buffer.concat([head("POST / HTTP/1.1", "Host: a.test", "Content-Length: 5"), Buffer.from("hello")]))).toBe("a.test")
    expect(soleHost(head("GET / HTTP/1.1", `X-Long: ${"x".repeat(17 * 1024)}`, "Host: a.test"))).toBeUndefined()
  })
})
