/**
 * The background load a bench runs beside its rounds when `BENCH_LOAD=1` (`npm run bench -- --load`
 * sets it): one CPU-bound process, a busy loop in a second node, as another tenant's busy process
 * on the same machine would be.
 *
 * It is not pinned: the benches pin their servers to CPU 0 and their load generator to CPU 1, and
 * a busy loop pinned to CPU 1 would only slow the client, which both sides of every comparison
 * share alike, so a ratio would hardly see it. Unpinned, the kernel's scheduler places it as it
 * places any other process, beside the servers as often as beside the client: what "another busy
 * process on the machine" means in production. It is spawned with every CPU allowed explicitly,
 * since a driver that pinned itself would otherwise hand its own mask down. Nice 0, like the servers.
 *
 * The process lives as long as the bench (started when the bench starts, killed when it exits),
 * so every round, warm-ups included, runs beside it.
 */
import { spawn, type ChildProcess } from "node:child_process"
import * as os from "node:os"

let busy: ChildProcess | undefined

export const loadRequested = () => process.env.BENCH_LOAD === "1"

export const loadDescription = () => (loadRequested() ? "one busy-loop process, unpinned (all CPUs allowed), nice 0" : "none")

/** Starts the busy loop when `BENCH_LOAD=1`; idempotent; stopped when this process exits. */
export const startBackgroundLoad = () => {
  if (!loadRequested() || busy !== undefined) return
  const cpus = `0-${Math.max(0, os.cpus().length - 1)}`
  busy = spawn("taskset", ["-c", cpus, process.execPath, "-e", "for (;;) {}"], { stdio: "ignore" })
  const child = busy
  // the loop must not keep the bench alive once its work is done
  child.unref()
  process.once("exit", () => {
    child.kill("SIGKILL")
  })
  process.stderr.write(`[load] busy loop pid ${child.pid ?? "?"} on CPUs ${cpus} for this bench's whole run\n`)
}
