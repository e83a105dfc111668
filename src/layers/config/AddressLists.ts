/**
 * Settings that list addresses: peers and rqlite clusters by name, the cache's Redis deployments
 * by namespace, DNS servers. Each is refused at start when malformed, printed without credentials.
 */
import { ConfigError, Effect } from "effect"
import { isIP } from "node:net"

/** A refused setting is printed without the password a URL in it may carry. */
const withoutCredentials = (text: string): string => text.replace(/\/\/[^/@\s]*@/g, "//***@")

/**
 * `name=url` pairs with distinct names and URLs. For SQL_RQLITE_URLS each namespace named gets
 * its own rqlite cluster: rqlite holds one database per cluster, and tenants' tables must never
 * share one. For PEERS the name is the peer gateway's node id.
 */
export const parseUrlMap = (variable: string, pairs: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const map = new Map<string, string>()
    for (const pair of pairs) {
      const at = pair.indexOf("=")
      const ns = pair.slice(0, at).trim()
      const url = pair.slice(at + 1).trim().replace(/\/$/, "")
      if (at <= 0 || !/^https?:\/\/[^\s]+$/.test(url) || map.has(ns) || [...map.values()].includes(url)) {
        return yield* Effect.fail(
          ConfigError.InvalidData(["PORTICO", variable], `expected distinct name=http(s)://host:port pairs, got "${withoutCredentials(pair)}"`)
        )
      }
      map.set(ns, url)
    }
    return map as ReadonlyMap<string, string>
  })

/**
 * REDIS_URLS: `namespace=redis://…` pairs, each namespace's cache on a deployment of its own, so
 * its memory bound is that deployment's maxmemory (spec §8: 256 MiB per namespace). Needs
 * REDIS_URL, which keeps every namespace not listed.
 */
export const parseRedisMap = (pairs: ReadonlyArray<string>, hasDefault: boolean) =>
  Effect.gen(function* () {
    const map = new Map<string, string>()
    if (pairs.length > 0 && !hasDefault) {
      return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "REDIS_URLS"], "REDIS_URLS needs REDIS_URL for the namespaces it does not list"))
    }
    for (const pair of pairs) {
      const at = pair.indexOf("=")
      const ns = pair.slice(0, at).trim()
      const url = pair.slice(at + 1).trim()
      if (at <= 0 || !/^rediss?:\/\/[^\s]+$/.test(url) || map.has(ns)) {
        return yield* Effect.fail(
          ConfigError.InvalidData(["PORTICO", "REDIS_URLS"], `expected distinct namespace=redis(s)://host:port pairs, got "${withoutCredentials(pair)}"`)
        )
      }
      map.set(ns, url)
    }
    return map as ReadonlyMap<string, string>
  })

/**
 * PORTICO_DNS_SERVERS: comma-separated `ip`, `ip:port`, bare IPv6 or `[ipv6]:port`, each kept as
 * written (node's `Resolver.setServers` takes these forms). Names are refused: the resolver
 * itself cannot be found by a name.
 */
export const parseDnsServers = (text: string) =>
  Effect.gen(function* () {
    const servers: Array<string> = []
    for (const raw of text.split(",")) {
      const entry = raw.trim()
      if (entry === "") continue
      const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry)
      const v4 = /^([0-9.]+)(?::(\d{1,5}))?$/.exec(entry)
      const [address, port] = bracketed !== null ? [bracketed[1], bracketed[2]] : v4 !== null ? [v4[1], v4[2]] : [entry, undefined]
      const family = isIP(address ?? "")
      const ok = (bracketed !== null ? family === 6 : family !== 0) && (port === undefined || (Number(port) >= 1 && Number(port) <= 65535))
      if (!ok) {
        return yield* Effect.fail(
          ConfigError.InvalidData(["PORTICO", "DNS_SERVERS"], `expected comma-separated ip, ip:port or [ipv6]:port, got "${entry}"`)
        )
      }
      servers.push(entry)
    }
    return servers as ReadonlyArray<string>
  })

/** An address to listen on: `ip:port` or `[ipv6]:port`, the port required. */
export const parseListenAddress = (path: ReadonlyArray<string>, text: string) =>
  Effect.gen(function* () {
    const entry = text.trim()
    const bracketed = /^\[([^\]]+)\]:(\d{1,5})$/.exec(entry)
    const v4 = /^([0-9.]+):(\d{1,5})$/.exec(entry)
    const [host, port] = bracketed !== null ? [bracketed[1] ?? "", bracketed[2]] : v4 !== null ? [v4[1] ?? "", v4[2]] : ["", undefined]
    const ok = (bracketed !== null ? isIP(host) === 6 : isIP(host) === 4) && Number(port) >= 1 && Number(port) <= 65535
    if (!ok) return yield* Effect.fail(ConfigError.InvalidData([...path], `expected ip:port or [ipv6]:port, got "${entry}"`))
    return { host, port: Number(port) }
  })
