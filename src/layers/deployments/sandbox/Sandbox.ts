/**
 * Starts one deployed app's process sandboxed (spec §2.7, docs/deployments.md "The sandbox").
 *
 * The chain, each step doing one thing, all as the gateway's root until setpriv, and all of it
 * with a fixed environment of ours (PATH and the cgroup list): the app's environment, which holds
 * the tenant's variables, is a file that only the last step reads, as the app's uid.
 *   sh        joins the deployment's cgroups (limits and socket rules), execs
 *   bwrap     new mount, pid, ipc, uts and cgroup namespaces; a root of /usr, a few /etc files,
 *             the app directory read-only at /app, state and cache read-write, nothing else;
 *             clears the environment for what it starts
 *   setpriv   drops to the deployment's uid and gid, no supplementary groups, empty capability
 *             sets and bounding set, no_new_privs; execs
 *   portico-sandbox-exec  reads the app's environment from its file, umask 077 (after bwrap,
 *             whose own directories must stay 0755), Landlock (abstract Unix sockets and signals
 *             scoped to the app, TCP bind to PORT only), seccomp (no namespaces, mounts, chroot,
 *             key store, bpf, io_uring, module loading, odd socket families); execs the app's argv
 * Socket rules are cgroup eBPF programs (SocketPolicy.ts) attached by portico-sandbox-bpf before
 * the app starts; memory, CPU and process count are cgroup limits (Cgroups.ts).
 */
import { Data, Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { renderEnvironment } from "../../../domain/DeploymentEnv.js"
import { type Limits, type Usage, DeploymentCgroup } from "./Cgroups.js"
import { type Allowance, type Cidr, cidr, internalRanges, socketPrograms } from "./SocketPolicy.js"

/** Where things are inside the sandbox; the environment the caller renders names these. */
export const sandboxPaths = {
  app: "/app",
  state: "/var/lib/app/state",
  cache: "/var/lib/app/cache",
  /** The directory holding the workload token file (read-only; the gateway renews the file). */
  run: "/run/portico",
  /** portico-sandbox-exec, bound read-only. */
  exec: "/run/portico-exec",
  /** The app's environment file (NUL-separated entries), read by portico-sandbox-exec. */
  env: "/run/portico-env"
} as const

export interface SandboxSpec {
  /** Names the cgroups and the runtime directory: letters, digits, `-`, `_`, `.`. */
  readonly deploymentId: string
  readonly uid: number
  readonly gid?: number
  readonly appDir: string
  readonly stateDir: string
  readonly cacheDir: string
  /** Host directory bound read-only at sandboxPaths.run (the token file's directory). */
  readonly runDir?: string
  /** The one TCP port the app may bind. */
  readonly port: number
  /** The app's whole environment (PATH and HOME default when absent). */
  readonly env: Readonly<Record<string, string>>
  /** Run inside the sandbox with /app as working directory, e.g. ["node", "server.js"]. */
  readonly argv: ReadonlyArray<string>
  readonly limits: Limits
  /** Appended with the app's stdout and stderr; none: discarded. */
  readonly logFile?: string
  /** Destinations refused to connect(); default internalRanges. */
  readonly refuse?: ReadonlyArray<Cidr>
  /** Address-and-port pairs reachable although inside `refuse` (the resolvers on port 53 are added). */
  readonly allow?: ReadonlyArray<Allowance>
}

export interface SandboxOptions {
  /** Parent cgroup name under every hierarchy. */
  readonly cgroupParent: string
  /** Host directory for per-launch files (passwd, group, resolv.conf), root-owned. */
  readonly runtimeRoot: string
  /** The socket rules loader (built by scripts/engines.sh). */
  readonly bpfHelper: string
  /** The last step before the app: environment, Landlock, seccomp (built by scripts/engines.sh). */
  readonly execHelper: string
  readonly bwrap: string
}

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface SandboxHandle {
  /** Pid of the bwrap process on the host (the app is its child inside the pid namespace). */
  readonly pid: number
  readonly exited: Promise<Exit>
  /** Every process and thread the deployment has, from its cgroup. */
  readonly usage: () => Usage
  /** SIGTERM to every process of the deployment, SIGKILL after `graceMs`; cgroups removed. */
  readonly stop: (graceMs?: number) => Promise<Exit>
}

export class SandboxFailed extends Data.TaggedError("SandboxFailed")<{ readonly detail: string }> {}

export const defaultSandboxOptions = (engines = process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(".engines/bin")): SandboxOptions => ({
  cgroupParent: "portico",
  runtimeRoot: "/run/portico-sandbox",
  bpfHelper: path.join(engines, "portico-sandbox-bpf"),
  execHelper: path.join(engines, "portico-sandbox-exec"),
  bwrap: "/usr/bin/bwrap"
})

/** Host files the sandbox's root is made of, bound read-only when present. */
const hostReadOnly = ["/usr", "/etc/ssl", "/etc/ca-certificates", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime", "/etc/alternatives"]

/** The nameservers of the host's resolv.conf; the sandbox reaches each on TCP port 53 only. */
export function hostResolvers(): Array<string> {
  const text = existsSync("/etc/resolv.conf") ? readFileSync("/etc/resolv.conf", "utf8") : ""
  return text.split("\n").flatMap((line) => {
    const m = /^\s*nameserver\s+(\S+)/.exec(line)
    return m ? [m[1]!.replace(/%.*$/, "")] : []
  })
}

const safeName = /^[A-Za-z0-9_.-]{1,100}$/

function validate(spec: SandboxSpec): void {
  if (!safeName.test(spec.deploymentId) || spec.deploymentId.startsWith(".")) throw new Error(`bad deployment id ${spec.deploymentId}`)
  if (!Number.isInteger(spec.uid) || spec.uid < 1000) throw new Error(`uid ${spec.uid} is not an unprivileged uid`)
  for (const dir of [spec.appDir, spec.stateDir, spec.cacheDir, ...(spec.runDir ? [spec.runDir] : [])])
    if (!path.isAbsolute(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir} is not an absolute directory`)
  if (spec.argv.length === 0) throw new Error("empty argv")
}

function launchSync(spec: SandboxSpec, options: SandboxOptions): SandboxHandle {
  validate(spec)
  const gid = spec.gid ?? spec.uid
  // State and cache belong to the app alone: its uid, mode 0700 (with the umask, files 0600).
  for (const dir of [spec.stateDir, spec.cacheDir]) {
    chownSync(dir, spec.uid, gid)
    chmodSync(dir, 0o700)
  }
  // the machine's own names for this process: a deployment runs on several nodes (its home and
  // replicas), which on one machine (a test cluster) differ by port, unique on the machine as the uid is
  const slot = `${spec.deploymentId}-${spec.port}`
  const runtime = path.join(options.runtimeRoot, slot)
  rmSync(runtime, { recursive: true, force: true })
  mkdirSync(runtime, { recursive: true, mode: 0o755 })
  // Lookups of the app's own user work (getpwuid) without a host account; `use-vc` sends the
  // resolver over TCP, since UDP sockets are refused.
  writeFileSync(path.join(runtime, "passwd"), `root:x:0:0::/:/usr/sbin/nologin\napp:x:${spec.uid}:${gid}::${sandboxPaths.state}:/usr/sbin/nologin\n`, { mode: 0o644 })
  writeFileSync(path.join(runtime, "group"), `root:x:0:\napp:x:${gid}:\n`, { mode: 0o644 })
  const resolvers = hostResolvers()
  writeFileSync(path.join(runtime, "resolv.conf"), [...resolvers.map((r) => `nameserver ${r}`), "options use-vc", ""].join("\n"), { mode: 0o644 })
  // Readable by root and the app's uid only; never in a process's environment or arguments above.
  const envFile = path.join(runtime, "env")
  writeFileSync(envFile, renderEnvironment({ PATH: "/usr/local/bin:/usr/bin:/bin", HOME: sandboxPaths.state, ...spec.env }), { mode: 0o400 })
  chownSync(envFile, spec.uid, gid)

  const cgroup = DeploymentCgroup.create(options.cgroupParent, slot, spec.limits)
  const programs = socketPrograms({
    port: spec.port,
    refuse: spec.refuse ?? internalRanges,
    allow: [...(spec.allow ?? []), ...resolvers.map((r) => ({ ...cidr(r), port: 53 }))]
  })
  const loaded = spawnSync(options.bpfHelper, [cgroup.socketDir], { input: programs, encoding: "utf8" })
  if (loaded.status !== 0) {
    cgroup.remove()
    throw new Error(`socket rules not attached: ${loaded.error?.message ?? loaded.stderr}`)
  }

  const bwrapArgs = [
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
    "--die-with-parent", "--new-session", "--hostname", "app", "--clearenv",
    ...["/etc", "/var", "/var/lib", "/var/lib/app", "/run"].flatMap((d) => ["--perms", "0755", "--dir", d]),
    ...hostReadOnly.filter(existsSync).flatMap((p) => ["--ro-bind", p, p]),
    "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
    "--ro-bind", path.join(runtime, "passwd"), "/etc/passwd",
    "--ro-bind", path.join(runtime, "group"), "/etc/group",
    "--ro-bind", path.join(runtime, "resolv.conf"), "/etc/resolv.conf",
    "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
    "--ro-bind", spec.appDir, sandboxPaths.app,
    "--bind", spec.stateDir, sandboxPaths.state,
    "--bind", spec.cacheDir, sandboxPaths.cache,
    ...(spec.runDir ? ["--ro-bind", spec.runDir, sandboxPaths.run] : []),
    "--ro-bind", options.execHelper, sandboxPaths.exec,
    "--ro-bind", envFile, sandboxPaths.env,
    // /tmp is the only other writable place; it is the app's own and memory-backed (counted
    // against its memory limit).
    "--chmod", "1777", "/tmp",
    "--chdir", sandboxPaths.app,
    "--",
    "/usr/bin/setpriv", `--reuid=${spec.uid}`, `--regid=${gid}`, "--clear-groups",
    "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
    sandboxPaths.exec, sandboxPaths.env, "--",
    ...spec.argv
  ]
  // sh joins every cgroup before exec, so nothing of the app ever runs outside them.
  const join = 'umask 022; for d in $PORTICO_CGROUPS; do echo $$ > "$d/cgroup.procs" || exit 125; done; unset PORTICO_CGROUPS; exec "$@"'
  const log = spec.logFile ? openSync(spec.logFile, "a", 0o600) : null
  const child = spawn("/bin/sh", ["-c", join, "sh", options.bwrap, ...bwrapArgs], {
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", PORTICO_CGROUPS: cgroup.dirs.join(" ") },
    stdio: ["ignore", log ?? "ignore", log ?? "ignore"],
    detached: false
  })
  if (log !== null) closeSync(log)

  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      // The app's children may outlive bwrap's own child only until the pid namespace ends;
      // the cgroup is removed once empty.
      const until = Date.now() + 5000
      const sweep = () => {
        cgroup.signalAll("SIGKILL")
        try {
          cgroup.remove()
          rmSync(runtime, { recursive: true, force: true })
          resolve({ code, signal })
        } catch {
          if (Date.now() > until) resolve({ code, signal })
          else setTimeout(sweep, 50)
        }
      }
      sweep()
    })
  })
  const stop = async (graceMs = 5000): Promise<Exit> => {
    // Not bwrap itself: it ends when the app does, and killing it first would SIGKILL the app.
    cgroup.signalAll("SIGTERM", child.pid)
    const timer = setTimeout(() => cgroup.signalAll("SIGKILL"), graceMs)
    try {
      return await exited
    } finally {
      clearTimeout(timer)
    }
  }
  return { pid: child.pid ?? -1, exited, usage: () => cgroup.usage(), stop }
}

/** Starts the app; fails (nothing left running, no cgroup left) when any rule cannot be put in place. */
export const launch = (spec: SandboxSpec, options: SandboxOptions = defaultSandboxOptions()): Effect.Effect<SandboxHandle, SandboxFailed> =>
  Effect.try({
    try: () => launchSync(spec, options),
    catch: (error) => new SandboxFailed({ detail: error instanceof Error ? error.message : String(error) })
  })
