/**
 * Sockets read into one shared buffer (src/layers/deployments/serving/SharedReads.ts): each read
 * comes to the callback as a copy of its own, a false answer stops the reading until the socket
 * is resumed, and an accepted socket whose stream still holds bytes is left a stream.
 */
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { readShared } from "../../../src/layers/deployments/serving/SharedReads.js"

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A loopback server and a client connected to it: the accepted socket, paused until the test reads it. */
const pair = () =>
  new Promise<{ readonly accepted: net.Socket; readonly client: net.Socket; readonly close: () => void }>((resolve) => {
    const server = net.createServer({ pauseOnConnect: true }, (accepted) => resolve({ accepted, client, close: () => (accepted.destroy(), client.destroy(), server.close()) }))
    let client: net.Socket
    server.listen(0, "127.0.0.1", () => {
      client = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
    })
  })

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await pause(10)
}

describe("shared reads", () => {
  const open: Array<() => void> = []
  afterEach(() => open.splice(0).forEach((close) => close()))

  it("hands each read to the callback as a copy the next read does not touch", async () => {
    const { accepted, client, close } = await pair()
    open.push(close)
    const got: Array<Buffer> = []
    expect(readShared(accepted, (chunk) => (got.push(chunk), true))).toBe(true)
    accepted.resume()
    client.write("first")
    await until(() => got.length === 1)
    client.write("second!")
    await until(() => got.length === 2)
    expect(got.map((c) => c.toString())).toEqual(["first", "second!"])
  })

  it("stops reading on a false answer until the socket is resumed, and ends as a stream does", async () => {
    const { accepted, client, close } = await pair()
    open.push(close)
    const got: Array<string> = []
    let ended = false
    accepted.on("end", () => (ended = true))
    // the first read stops the reading; later ones let it go on
    readShared(accepted, (chunk) => (got.push(chunk.toString()), got.length > 1))
    accepted.resume()
    client.write("one")
    await until(() => got.length === 1)
    client.write("two")
    await pause(100)
    expect(got).toEqual(["one"])
    accepted.resume()
    await until(() => got.length === 2)
    client.end()
    await until(() => ended)
    expect([got, ended]).toEqual([["one", "two"], true])
  })

  it("leaves a socket whose stream holds unread bytes a stream", async () => {
    const { accepted, client, close } = await pair()
    open.push(close)
    accepted.resume()
    accepted.pause()
    client.write("held")
    await until(() => accepted.readableLength > 0)
    expect(readShared(accepted, () => true)).toBe(false)
    const data = new Promise<string>((r) => accepted.once("data", (c: Buffer) => r(c.toString())))
    accepted.resume()
    expect(await data).toBe("held")
  })
})
