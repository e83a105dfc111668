/**
 * The ntfy client against the ntfy-compatible stand-in: publish headers, bearer token, endpoint
 * URLs, subscribers receiving the message, and failures per publish.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { headerValue, makeNtfyClient, relayPublishUrl } from "../../src/layers/push/NtfyClient.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"

let ntfy: NtfyStandIn
const client = makeNtfyClient({ timeoutMs: 500 })
const urlOf = (token: string) => Either.getOrThrow(relayPublishUrl(ntfy.url, token))

beforeAll(async () => {
  ntfy = await startNtfyStandIn({ tokens: ["tk_relay"] })
})
afterAll(async () => {
  await ntfy.stop()
})

describe("NtfyClient", () => {
  it("publishes with Title, Priority, Tags and the bearer token, and a subscriber receives it", async () => {
    const controller = new AbortController()
    const stream = await fetch(ntfy.url + "/alerts-1/json", { signal: controller.signal })
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader()
    let buffered = ""
    const nextEvent = async (): Promise<Record<string, unknown>> => {
      while (!buffered.includes("\n")) {
        const { value, done } = await reader.read()
        if (done) throw new Error("stream ended")
        buffered += value
      }
      const line = buffered.slice(0, buffered.indexOf("\n"))
      buffered = buffered.slice(line.length + 1)
      return JSON.parse(line) as Record<string, unknown>
    }
    expect(await nextEvent()).toMatchObject({ event: "open", topic: "alerts-1" })

    const outcome = await Effect.runPromise(
      client.publish(urlOf("alerts-1"), { title: "Grüße", body: "the body", priority: "high", tags: ["warning", "disk"] }, "tk_relay")
    )
    expect(outcome).toMatchObject({ outcome: "ok", status: 200 })
    expect(outcome.providerId).toEqual(expect.any(String))
    expect(ntfy.published.at(-1)).toEqual({
      topic: "alerts-1", method: "POST", message: "the body", title: "Grüße", priority: 4, tags: ["warning", "disk"], authorization: "Bearer tk_relay"
    })
    expect(await nextEvent()).toMatchObject({ event: "message", topic: "alerts-1", message: "the body", title: "Grüße", priority: 4, tags: ["warning", "disk"] })
    controller.abort()
  })

  it("maps normal priority to ntfy's default and encodes non-ASCII headers as RFC 2047 words", () => {
    expect(headerValue("plain")).toBe("plain")
    expect(headerValue("Grüße")).toBe("=?UTF-8?B?R3LDvMOfZQ==?=")
  })

  it("posts an endpoint URL verbatim when its scheme and host are the relay's, and refuses others", async () => {
    const endpoint = ntfy.url + "/device-7"
    expect(relayPublishUrl(ntfy.url, endpoint)).toEqual(Either.right(endpoint))
    expect((await Effect.runPromise(client.publish(urlOf(endpoint), { body: "x", priority: "normal" }, "tk_relay"))).outcome).toBe("ok")
    expect(ntfy.published.at(-1)).toMatchObject({ topic: "device-7", priority: 3 })
    expect(Either.isLeft(relayPublishUrl(ntfy.url, "https://elsewhere.example/device-7"))).toBe(true)
    expect(Either.isLeft(relayPublishUrl(ntfy.url, ntfy.url.replace("http:", "https:") + "/device-7"))).toBe(true)
    expect(Either.isLeft(relayPublishUrl(ntfy.url, ntfy.url + "/a/b?x=1"))).toBe(true)
    expect(Either.isLeft(relayPublishUrl(ntfy.url, "a/b"))).toBe(true)
  })

  it("reports ntfy's refusals, a 5xx and a timeout as failures of that publish", async () => {
    expect(await Effect.runPromise(client.publish(urlOf("alerts-2"), { body: "x" }, "wrong"))).toEqual({ outcome: "failed", status: 401, reason: "unauthorized" })
    expect(await Effect.runPromise(client.publish(urlOf("alerts-2"), { body: "x" }))).toEqual({ outcome: "failed", status: 403, reason: "forbidden" })
    ntfy.answer("broken", 502)
    expect(await Effect.runPromise(client.publish(urlOf("broken"), { body: "x" }, "tk_relay"))).toMatchObject({ outcome: "failed", status: 502 })
    ntfy.stall("slow")
    const started = Date.now()
    expect(await Effect.runPromise(client.publish(urlOf("slow"), { body: "x" }, "tk_relay"))).toEqual({ outcome: "failed", status: 0, reason: "Timeout" })
    expect(Date.now() - started).toBeLessThan(3_000)
  })

  it("uses the fetch function it is given (the guarded egress client's place)", async () => {
    const asked: Array<string> = []
    const guarded = makeNtfyClient({ fetch: (input, init) => (asked.push(input), fetch(input, init)) })
    expect((await Effect.runPromise(guarded.publish(urlOf("alerts-3"), { body: "y" }, "tk_relay"))).outcome).toBe("ok")
    expect(asked).toEqual([ntfy.url + "/alerts-3"])
    const refusing = makeNtfyClient({ fetch: () => Promise.reject(new Error("address refused")) })
    expect(await Effect.runPromise(refusing.publish(urlOf("alerts-3"), { body: "y" }))).toEqual({ outcome: "failed", status: 0, reason: "ConnectionFailed" })
  })
})
