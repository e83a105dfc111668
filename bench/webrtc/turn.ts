/**
 * bench/webrtc's coturn: the shipped configuration (engines/coturn/turnserver.conf) with what a
 * loopback bench needs on top, as test/support/coturn.ts runs it, but pinned to CPU 0 beside the
 * gateway and its SFU (bench/support/children.ts), the clients on CPU 1:
 *
 * - one listening and relay address on 127.0.0.1 and loopback peers allowed (the shipped file
 *   denies them);
 * - a relay port range wide enough for the signalling row's joins (each SFU peer connection
 *   allocates a relay);
 * - `max-bps=0`: the shipped file caps each session at 500 kbit/s each way, a production policy
 *   that would make the media row measure the cap (about 60 packets of 1 KB a second) on both
 *   sides instead of what the SFU forwards.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { loopbackTurnConfig } from "../../test/support/coturn.js"
import { type Child, freePort, startPinned, waitUntil } from "../support/children.js"

export interface BenchTurn {
  readonly child: Child
  readonly port: number
  readonly uri: string
}

export const hasCoturn = () => ["turnserver"].every((tool) => (process.env["PATH"] ?? "").split(":").some((dir) => fs.existsSync(path.join(dir, tool))))

export const startBenchTurn = async (dir: string, secret: string): Promise<BenchTurn> => {
  const port = await freePort()
  const config = path.join(dir, "turnserver.conf")
  const relayBase = 20000 + Math.floor(Math.random() * 20000)
  fs.writeFileSync(
    config,
    loopbackTurnConfig({ host: "127.0.0.1", port, relayPorts: { min: relayBase, max: relayBase + 4000 }, dir, extra: ["max-bps=0"] })
  )
  const child = startPinned("coturn", dir, "turnserver", ["-c", config, "--static-auth-secret", secret])
  await waitUntil(child, () => /Total General servers|listener opened on/i.test(fs.readFileSync(child.log, "utf8")), 10_000)
  return { child, port, uri: `turn:127.0.0.1:${port}?transport=udp` }
}
