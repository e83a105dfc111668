/**
 * The install's registry proxy (docs/deployments.md, "Preparing an app") admits a tunnel to the
 * registry's HTTPS port only. Local sockets only: refused targets are never dialled.
 */
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RegistryProxy, startRegistryProxy } from "../../../src/layers/deployments/build/RegistryProxy.js"

const connect = (port: number, target: string) =>
  new Promise<number>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "CONNECT", path: target })
    req.once("connect", (res, socket) => {
      socket.destroy()
      resolve(res.statusCode ?? 0)
    })
    req.once("response", (res) => resolve(res.statusCode ?? 0))
    req.once("error", reject)
    req.end()
  })

describe("registry proxy", () => {
  let proxy: RegistryProxy
  beforeAll(async () => {
    proxy = await startRegistryProxy("registry.npmjs.org")
  })
  afterAll(() => proxy.close())

  it("refuses any other host or port, and plain requests, without dialling", async () => {
    expect(await connect(proxy.port, "127.0.0.1:22")).toBe(403)
    expect(await connect(proxy.port, "registry.npmjs.org:80")).toBe(403)
    expect(await connect(proxy.port, "registry.npmjs.org.example.test:443")).toBe(403)
    expect(await connect(proxy.port, "169.254.169.254:443")).toBe(403)
    const plain = await new Promise<number>((resolve) =>
      http.get({ host: "127.0.0.1", port: proxy.port, path: "http://registry.npmjs.org/ms" }, (res) => resolve(res.statusCode ?? 0))
    )
    expect(plain).toBe(405)
    expect(proxy.tunnels()).toBe(0)
  })

  it("opens a tunnel to the registry's HTTPS port", async () => {
    expect(await connect(proxy.port, "registry.npmjs.org:443")).toBe(200)
    expect(proxy.tunnels()).toBe(1)
  })
})
