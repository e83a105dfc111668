import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { baseUrlOf, parseNodeAddress } from "../../src/domain/Multiaddr.js"

describe("parseNodeAddress: /ip4|ip6|dns/<host>/tcp/<port>/p2p/<node id>, strictly", () => {
  it.each([
    ["/ip4/127.0.0.1/tcp/8080/p2p/node-a", { kind: "ip4", host: "127.0.0.1", port: 8080, nodeId: "node-a" }, "http://127.0.0.1:8080"],
    ["/ip6/::1/tcp/1/p2p/n_1.b", { kind: "ip6", host: "::1", port: 1, nodeId: "n_1.b" }, "http://[::1]:1"],
    ["/dns/localhost/tcp/65535/p2p/node-2f1c0a9e4b7d", { kind: "dns", host: "localhost", port: 65535, nodeId: "node-2f1c0a9e4b7d" }, "http://localhost:65535"]
  ])("reads %s", (text, address, url) => {
    const parsed = Either.getOrThrow(parseNodeAddress(text))
    expect(parsed).toEqual(address)
    expect(baseUrlOf(parsed)).toBe(url)
  })

  it.each([
    ["", "/ip4/, /ip6/ or /dns/"],
    ["ip4/127.0.0.1/tcp/1/p2p/a", "starting with /"],
    ["/ip4/127.0.0.1/tcp/1/p2p/a/", "starting with /"],
    ["/ip4//tcp/1/p2p/a", "starting with /"],
    ["/ip4/127.0.0.1/tcp/8080", "names no node"],
    ["/ip4/127.0.0.1/tcp/8080/ipfs/node-a", "names no node"],
    ["/ip4/127.0.0.1/udp/8080/p2p/node-a", "/tcp/<port>"],
    ["/ip4/127.0.0.1/tcp/0/p2p/node-a", "1-65535"],
    ["/ip4/127.0.0.1/tcp/65536/p2p/node-a", "1-65535"],
    ["/ip4/127.0.0.1/tcp/08080/p2p/node-a", "1-65535"],
    ["/ip4/127.0.0.1/tcp/80x/p2p/node-a", "1-65535"],
    ["/ip4/127.1/tcp/80/p2p/node-a", "no IPv4"],
    ["/ip4/::1/tcp/80/p2p/node-a", "no IPv4"],
    ["/ip6/127.0.0.1/tcp/80/p2p/node-a", "no IPv6"],
    ["/ip6/fe80::1%eth0/tcp/80/p2p/node-a", "no IPv6"],
    ["/dns/exa_mple/tcp/80/p2p/node-a", "no host name"],
    ["/dns4/localhost/tcp/80/p2p/node-a", "/ip4/, /ip6/ or /dns/"],
    ["/unix/tmp/sock", "/ip4/, /ip6/ or /dns/"],
    ["/ip4/127.0.0.1/tcp/80/p2p/-node", "node id"],
    ["/ip4/127.0.0.1/tcp/80/p2p/" + "n".repeat(129), "node id"],
    ["/ip4/127.0.0.1/tcp/80/p2p/node a", "node id"],
    ["/ip4/127.0.0.1/tcp/80/p2p/node-a/http", "nothing follows"]
  ])("refuses %j", (text, why) => {
    const parsed = parseNodeAddress(text)
    expect(Either.isLeft(parsed) ? parsed.left : "parsed").toContain(why)
  })
})
