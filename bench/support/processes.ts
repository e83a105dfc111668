/** What the benchmark drivers measure of a process: its CPU placement and its resident memory. */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"

/** Pins this driver (every thread) to `cpu`, away from the servers it measures. */
export const pinSelf = (cpu: string) => {
  const run = spawnSync("taskset", ["-a", "-p", "-c", cpu, String(process.pid)], { encoding: "utf8" })
  if (run.status !== 0) throw new Error(`taskset -p failed (${run.status ?? run.signal}): ${run.stderr}`)
}

export const vmRss = (pid: number) => {
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for ${pid}`)
  return Number(kb) * 1024
}

/** Samples VmRSS every 20 ms until stopped; answers the peak's growth over the value at the start. */
export const sampleRss = (pid: number) => {
  const base = vmRss(pid)
  let peak = base
  const take = () => {
    try {
      peak = Math.max(peak, vmRss(pid))
    } catch {
      // gone: reported by the side's own check
    }
  }
  const timer = setInterval(take, 20)
  return () => {
    clearInterval(timer)
    take()
    return peak - base
  }
}
