/**
 * The network of the 3-node harness (test/support/cluster.ts), built inside the loopback-only
 * network namespace a `*.cluster.test.ts` child runs in (test/support/netns.ts), where this
 * process is root of its own user namespace.
 *
 * Each node gets a network namespace of its own, held open by a `sleep` process, joined to this
 * one by a veth pair: node i owns 127.0.0.1i there, and every other 127.x address is reached
 * through this namespace, which routes between the nodes. So a node's connections leave from its
 * own address (on one shared loopback they would all leave from 127.0.0.1), and an nft rule on
 * the forwarding path can cut two nodes apart both ways while the client (this process, 127.0.0.100)
 * and Redis (127.0.0.10) still reach both. No address outside 127.0.0.0/8 is used; nothing here can
 * reach another machine.
 *
 * Loopback addresses on a veth need `route_localnet`; neighbours are static (ARP does not answer
 * for 127.x), and each side keeps only 127.0.0.1 (and its own addresses) local.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"

export const CLIENT_ADDRESS = "127.0.0.100"
export const REDIS_ADDRESS = "127.0.0.10"
export const nodeAddress = (index: number) => `127.0.0.${11 + index}`

const sh = (script: string) => execFileSync("sh", ["-ec", script], { stdio: ["ignore", "pipe", "pipe"] }).toString()
const mac = (side: number, index: number) => `02:00:00:00:0${side}:${(index + 1).toString(16).padStart(2, "0")}`

export interface ClusterNetwork {
  /** The command prefix that runs a program in node `index`'s namespace. */
  readonly enter: (index: number) => ReadonlyArray<string>
  /** Drops every packet between nodes `a` and `b`, both ways. */
  readonly partition: (a: number, b: number) => void
  /** Removes every partition. */
  readonly heal: () => void
  readonly stop: () => void
}

export const startClusterNetwork = async (count: number): Promise<ClusterNetwork> => {
  sh(`
    ip link set lo up
    sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.default.route_localnet=1 net.ipv4.ip_forward=1
    ip route del local 127.0.0.0/8 dev lo table local
    ip route replace local 127.0.0.1 dev lo table local
    ip addr add ${REDIS_ADDRESS}/32 dev lo
    ip addr add ${CLIENT_ADDRESS}/32 dev lo
  `)
  const holders: Array<ChildProcess> = []
  const stop = () => {
    for (const holder of holders) holder.kill("SIGKILL")
  }
  try {
    for (let i = 0; i < count; i++) {
      const holder = spawn("unshare", ["--net", "sleep", "infinity"], { stdio: "ignore" })
      holders.push(holder)
      const ns = `/proc/${holder.pid}/ns/net`
      // unshare runs before it execs sleep: wait until the namespace is its own
      const own = sh(`readlink /proc/self/ns/net`).trim()
      for (let tries = 0; sh(`readlink ${ns}`).trim() === own; tries++) {
        if (tries > 100) throw new Error("the node's network namespace did not appear")
        await new Promise((r) => setTimeout(r, 20))
      }
      const address = nodeAddress(i)
      sh(`
        ip link add h${i} address ${mac(0, i)} type veth peer name n${i} address ${mac(1, i)} netns ${holder.pid}
        ip link set h${i} up
        sysctl -qw net.ipv4.conf.h${i}.route_localnet=1
        ip route add ${address}/32 dev h${i} src ${CLIENT_ADDRESS}
        ip neigh replace ${address} lladdr ${mac(1, i)} dev h${i} nud permanent
        nsenter --net=${ns} sh -ec '
          sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.default.route_localnet=1 net.ipv4.conf.n${i}.route_localnet=1
          ip link set lo up
          ip link set n${i} up
          ip route del local 127.0.0.0/8 dev lo table local
          ip route replace local 127.0.0.1 dev lo table local
          ip addr add ${address}/32 dev n${i}
          ip neigh replace 127.0.0.254 lladdr ${mac(0, i)} dev n${i} nud permanent
          ip route add 127.0.0.0/8 via 127.0.0.254 dev n${i} onlink src ${address}
        '
      `)
    }
  } catch (error) {
    stop()
    throw error
  }
  let cut = false
  return {
    enter: (index) => ["nsenter", `--net=/proc/${holders[index]!.pid}/ns/net`],
    partition: (a, b) => {
      if (!cut) sh(`nft add table inet partition && nft add chain inet partition cut '{ type filter hook forward priority 0; policy accept; }'`)
      cut = true
      const [x, y] = [nodeAddress(a), nodeAddress(b)]
      sh(`nft add rule inet partition cut ip saddr ${x} ip daddr ${y} drop && nft add rule inet partition cut ip saddr ${y} ip daddr ${x} drop`)
    },
    heal: () => {
      if (cut) sh("nft delete table inet partition")
      cut = false
    },
    stop
  }
}
