/**
 * The cgroups of one deployment: memory, CPU and process-count limits, the usage `stats` reports,
 * and the cgroup v2 directory the socket rules (SocketPolicy.ts) attach to.
 *
 * Three layouts are met in practice and detected from /sys/fs/cgroup:
 * - v2 (unified): one directory /sys/fs/cgroup/<parent>/<name> holds limits and socket programs;
 *   the parent enables the memory, cpu and pids controllers for its children.
 * - hybrid (v1 controllers plus the v2 tree at /sys/fs/cgroup/unified, this VM): limits in the v1
 *   memory, cpu, cpuacct and pids hierarchies, socket programs on the v2 tree (cgroup socket
 *   programs exist only there; it carries no controllers, only membership).
 * - v1 without a v2 tree: refused, since the socket rules could not be enforced.
 *
 * Every directory is created fresh at launch (a stale one from a crashed gateway is emptied and
 * removed first) and removed after the last process has left.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs"
import * as path from "node:path"

export interface Limits {
  /** Hard memory limit (RAM; swap is not granted). Past it the kernel's OOM killer ends a process. */
  readonly memoryBytes: number
  /** CPU time per period as a fraction of one CPU (0.5 = half a core; 2 = two cores). */
  readonly cpus: number
  /** Relative weight under contention, 1-10000 (cgroup v2 cpu.weight; v1 shares scale it). */
  readonly cpuWeight?: number
  /** Processes and threads together. */
  readonly pids: number
}

export interface Usage {
  readonly cpuSeconds: number
  readonly memoryBytes: number
  readonly memoryPeakBytes: number
  readonly oomKills: number
  readonly pids: number
}

export type Layout = "v2" | "hybrid"

const root = "/sys/fs/cgroup"
const period = 100_000

export function detectLayout(): Layout {
  if (existsSync(path.join(root, "cgroup.controllers"))) return "v2"
  if (existsSync(path.join(root, "unified", "cgroup.procs")) && existsSync(path.join(root, "memory", "cgroup.procs"))) return "hybrid"
  throw new Error("cgroup v1 without a cgroup v2 tree (/sys/fs/cgroup/unified): the sandbox's socket rules need cgroup v2")
}

const read = (file: string): string => readFileSync(file, "utf8").trim()
const readNumber = (file: string): number => (existsSync(file) ? Number(read(file)) : 0)
const field = (file: string, name: string): number => {
  if (!existsSync(file)) return 0
  const line = read(file).split("\n").find((l) => l.startsWith(`${name} `))
  return line ? Number(line.split(" ")[1]) : 0
}

export class DeploymentCgroup {
  private constructor(
    readonly layout: Layout,
    /** Every directory a process of the deployment joins (its cgroup.procs). */
    readonly dirs: ReadonlyArray<string>,
    /** The v2 directory the socket programs attach to. */
    readonly socketDir: string,
    private readonly dir: (controller: string) => string
  ) {}

  static create(parent: string, name: string, limits: Limits): DeploymentCgroup {
    const layout = detectLayout()
    if (!/^[A-Za-z0-9_.-]+$/.test(parent) || !/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error(`bad cgroup name ${parent}/${name}`)
    if (layout === "v2") {
      const parentDir = path.join(root, parent)
      mkdirSync(parentDir, { recursive: true })
      for (const controlFile of [path.join(root, "cgroup.subtree_control"), path.join(parentDir, "cgroup.subtree_control")])
        writeFileSync(controlFile, "+memory +cpu +pids")
      const dir = path.join(parentDir, name)
      const cgroup = new DeploymentCgroup(layout, [dir], dir, () => dir)
      cgroup.fresh()
      writeFileSync(path.join(dir, "memory.max", ), String(limits.memoryBytes))
      if (existsSync(path.join(dir, "memory.swap.max"))) writeFileSync(path.join(dir, "memory.swap.max"), "0")
      writeFileSync(path.join(dir, "cpu.max"), `${Math.max(1000, Math.round(limits.cpus * period))} ${period}`)
      writeFileSync(path.join(dir, "cpu.weight"), String(limits.cpuWeight ?? 100))
      writeFileSync(path.join(dir, "pids.max"), String(limits.pids))
      return cgroup
    }
    const v1 = (controller: string) => path.join(root, controller, parent, name)
    const dirs = ["memory", "cpu", "cpuacct", "pids", "unified"].map(v1)
    const cgroup = new DeploymentCgroup(layout, dirs, v1("unified"), v1)
    cgroup.fresh()
    writeFileSync(path.join(v1("memory"), "memory.limit_in_bytes"), String(limits.memoryBytes))
    if (existsSync(path.join(v1("memory"), "memory.memsw.limit_in_bytes")))
      writeFileSync(path.join(v1("memory"), "memory.memsw.limit_in_bytes"), String(limits.memoryBytes))
    writeFileSync(path.join(v1("memory"), "memory.swappiness"), "0")
    writeFileSync(path.join(v1("cpu"), "cpu.cfs_period_us"), String(period))
    writeFileSync(path.join(v1("cpu"), "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(limits.cpus * period))))
    // v2's weight 100 is v1's default 1024 shares.
    writeFileSync(path.join(v1("cpu"), "cpu.shares"), String(Math.max(2, Math.round(((limits.cpuWeight ?? 100) * 1024) / 100))))
    writeFileSync(path.join(v1("pids"), "pids.max"), String(limits.pids))
    return cgroup
  }

  /** Pids of every process in the deployment (the membership directory). */
  pids(): Array<number> {
    const file = path.join(this.dirs[0]!, "cgroup.procs")
    if (!existsSync(file)) return []
    return read(file).split("\n").filter(Boolean).map(Number)
  }

  usage(): Usage {
    if (this.layout === "v2") {
      const dir = this.dirs[0]!
      return {
        cpuSeconds: field(path.join(dir, "cpu.stat"), "usage_usec") / 1e6,
        memoryBytes: readNumber(path.join(dir, "memory.current")),
        memoryPeakBytes: readNumber(path.join(dir, "memory.peak")),
        oomKills: field(path.join(dir, "memory.events"), "oom_kill"),
        pids: readNumber(path.join(dir, "pids.current"))
      }
    }
    const memory = this.dir("memory")
    return {
      cpuSeconds: readNumber(path.join(this.dir("cpuacct"), "cpuacct.usage")) / 1e9,
      memoryBytes: readNumber(path.join(memory, "memory.usage_in_bytes")),
      memoryPeakBytes: readNumber(path.join(memory, "memory.max_usage_in_bytes")),
      oomKills: field(path.join(memory, "memory.oom_control"), "oom_kill"),
      pids: readNumber(path.join(this.dir("pids"), "pids.current"))
    }
  }

  /** Signals every process inside (but `except`); true when none is left. */
  signalAll(signal: NodeJS.Signals, except?: number): boolean {
    const pids = this.pids()
    for (const pid of pids) {
      if (pid === except) continue
      try {
        process.kill(pid, signal)
      } catch {
        // gone between the listing and the signal
      }
    }
    return pids.length === 0
  }

  /** Removes the directories; throws while a process is still inside. */
  remove(): void {
    for (const dir of this.dirs) if (existsSync(dir)) rmdirSync(dir)
  }

  /** A directory left by an earlier run of the same deployment is emptied and removed. */
  private fresh(): void {
    if (this.dirs.some(existsSync)) {
      this.signalAll("SIGKILL")
      const until = Date.now() + 5000
      for (;;) {
        try {
          this.remove()
          break
        } catch (error) {
          if (Date.now() > until) throw error
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50)
        }
      }
    }
    for (const dir of this.dirs) mkdirSync(dir, { recursive: true })
  }
}
