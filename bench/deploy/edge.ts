/**
 * bench/deploy's edge sides: the edge's Caddy (`portico-caddy`, docs/edge.md) in front of the app,
 * over plain HTTP so its hop is compared with nginx's and the gateway's alone (TLS costs the same
 * per byte whatever proxy ends it, and is left out of all three):
 * - `edge`: the edge → the gateway → the app, the path production takes today;
 * - `edge-app`: the edge → the app on its port, what routing app hosts from the edge straight to
 *   the node that runs the app (issue 38) would cost at best.
 * Pinned as the gateway is (`one-cpu`: CPU 0, GOMAXPROCS 1, as nginx's one worker; `free`: both
 * CPUs; DEPLOY_EDGE_GOMAXPROCS overrides). DEPLOY_EDGE=none leaves them out; they are left out
 * when the binary is not built.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { spawnSync } from "node:child_process"
import { type Child, startPinned, waitUntil } from "../support/children.js"

export const caddyBinary = path.resolve(import.meta.dirname, "../../.engines/bin/portico-caddy")

export interface EdgeSide {
  readonly child: Child
  readonly url: string
  readonly pids: () => ReadonlyArray<string>
}

export const startEdgeSide = async (dir: string, name: string, port: number, upstream: string, layout: "one-cpu" | "free"): Promise<EdgeSide> => {
  const home = path.join(dir, name)
  fs.mkdirSync(home)
  const config = {
    admin: { disabled: true, config: { persist: false } },
    apps: {
      http: {
        servers: {
          bench: {
            listen: [`127.0.0.1:${port}`],
            protocols: ["h1"],
            automatic_https: { disable: true },
            // kept-alive connections to the upstream for every client connection, as nginx's `keepalive 128`
            routes: [
              {
                handle: [
                  {
                    handler: "reverse_proxy",
                    upstreams: [{ dial: upstream }],
                    transport: { protocol: "http", keep_alive: { max_idle_conns_per_host: 128 } }
                  }
                ]
              }
            ]
          }
        }
      }
    }
  }
  fs.writeFileSync(path.join(home, "caddy.json"), JSON.stringify(config))
  const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: home, XDG_DATA_HOME: home, GOMAXPROCS: process.env.DEPLOY_EDGE_GOMAXPROCS ?? (layout === "free" ? "2" : "1") }
  const child = startPinned(name, dir, caddyBinary, ["run", "--config", path.join(home, "caddy.json")], { env })
  const url = `http://127.0.0.1:${port}`
  await waitUntil(child, async () => (await fetch(url).catch(() => undefined)) !== undefined, 10_000)
  const pid = String(child.process.pid)
  // startPinned runs the program under taskset, which execs it: the pid is Caddy's own
  if (layout === "free") spawnSync("taskset", ["-a", "-p", "-c", "0,1", pid])
  return { child, url, pids: () => [pid] }
}
