/**
 * Where the function runner's process is started (docs/functions.md, "Isolation"). A gateway that
 * runs as root on a machine with bubblewrap puts the runner in a jail of its own:
 *
 *   bwrap     new mount, pid, network, ipc, uts and cgroup namespaces; a root of /usr read-only
 *             (Debian's merged /bin and /lib as links), the checkout that holds the runner's code
 *             read-only with the gateway's data directory hidden under an empty tmpfs, /proc,
 *             /dev and a private /tmp; nothing else of the host's file system, no network
 *   setpriv   drops to nobody, no supplementary groups, no capabilities, no_new_privs
 *   portico-sandbox-exec  the deployments sandbox's last step (docs/deployments.md): Landlock
 *             scopes abstract Unix sockets and signals to the runner, seccomp refuses what widens
 *             the kernel surface (namespaces, mounts, chroot, the key store, bpf, io_uring, module
 *             loading, odd socket families); it gives node only the IPC channel's variables
 *   node      the runner, which talks to the gateway over the IPC descriptor it inherited
 *
 * So a V8 escape in tenant code finds no root secret, no registry file, no socket to the outside
 * and no privilege. Without root (or as a root whose user namespace has no nobody) or bwrap, the runner is a plain child process as the gateway's
 * user, with an empty environment (FunctionRunner.ts): the platform's secrets stay out of its
 * memory, but its files do not.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"

const BWRAP = "/usr/bin/bwrap"
const SETPRIV = "/usr/bin/setpriv"
const NOBODY = 65534
/** Where the jail has the exec helper and its environment file. */
const EXEC_IN_JAIL = "/run/portico-exec"
const ENV_IN_JAIL = "/run/portico-env"

/**
 * The runner's whole environment, as portico-sandbox-exec reads it (NUL-ended entries): node's IPC
 * channel on descriptor 3 (FunctionRunner.ts's stdio), with the advanced serialization.
 */
const RUNNER_ENV = "NODE_CHANNEL_FD=3\0NODE_CHANNEL_SERIALIZATION_MODE=advanced\0"

export interface RunnerCommand {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Set when the runner runs as another user than the gateway without a jail (spawn's uid/gid). */
  readonly uid?: number | undefined
  readonly jailed: boolean
}

/** The directory holding package.json above `file`: the checkout the runner's code is in. */
const checkoutOf = (file: string): string => {
  let dir = path.dirname(file)
  while (!existsSync(path.join(dir, "package.json"))) {
    const up = path.dirname(dir)
    if (up === dir) return path.dirname(file)
    dir = up
  }
  return dir
}

/** `/a/b/c` → `/a`, `/a/b`. */
const parentsOf = (dir: string): Array<string> => {
  const parents: Array<string> = []
  for (let up = path.dirname(dir); up !== path.dirname(up); up = path.dirname(up)) parents.unshift(up)
  return parents
}

const inside = (dir: string, root: string): boolean => {
  const relative = path.relative(root, dir)
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative))
}

/**
 * Whether nobody exists in this process's user namespace: root inside a namespace that maps only
 * itself (`unshare --map-root-user`, as the loopback-only test runs are) cannot become nobody, and
 * runs the runner as itself.
 */
const nobodyMapped = (): boolean => {
  try {
    return readFileSync("/proc/self/uid_map", "utf8")
      .split("\n")
      .some((line) => {
        const [inside, , count] = line.trim().split(/\s+/).map(Number)
        return inside !== undefined && count !== undefined && inside <= NOBODY && NOBODY < inside + count
      })
  } catch {
    return true
  }
}

/**
 * How to start `node <nodeArgs>` for the runner at `entry`, hiding `dataDir`; `execHelper` is
 * portico-sandbox-exec (scripts/engines.sh builds it), used in the jail when it is there.
 */
export const runnerCommand = (entry: string, nodeArgs: ReadonlyArray<string>, dataDir: string, execHelper?: string): RunnerCommand => {
  const root = process.getuid?.() === 0 && nobodyMapped()
  if (!root || !existsSync(BWRAP) || !existsSync(SETPRIV)) {
    return { file: process.execPath, args: nodeArgs, ...(root ? { uid: NOBODY } : {}), jailed: false }
  }
  const checkout = checkoutOf(entry)
  const data = path.resolve(dataDir)
  const node = process.execPath
  const helper = execHelper !== undefined && existsSync(execHelper) ? execHelper : undefined
  const envFile = path.join(data, "functions", "runner.env")
  if (helper !== undefined) {
    mkdirSync(path.dirname(envFile), { recursive: true })
    writeFileSync(envFile, RUNNER_ENV, { mode: 0o644 })
  }
  return {
    file: BWRAP,
    args: [
      // no user namespace: setpriv drops to the host's nobody, which a new one would not map
      "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
      "--die-with-parent",
      "--new-session",
      "--ro-bind", "/usr", "/usr",
      "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
      ...(node.startsWith("/usr/") ? [] : ["--ro-bind", node, node]),
      "--proc", "/proc",
      "--dev", "/dev",
      // the private /tmp before the checkout: bwrap mounts in order, so a /tmp mounted after a
      // checkout under /tmp (a clone there) would cover it and the runner's file with it
      "--tmpfs", "/tmp",
      "--chmod", "1777", "/tmp",
      // the checkout's parents, which bwrap would otherwise make for root alone
      ...parentsOf(checkout).flatMap((dir) => ["--perms", "0755", "--dir", dir]),
      "--ro-bind", checkout, checkout,
      // the data directory inside the checkout (npm start's default) is hidden under an empty tmpfs
      ...(inside(data, checkout) ? ["--tmpfs", data] : []),
      ...(helper === undefined ? [] : ["--perms", "0755", "--dir", "/run", "--ro-bind", helper, EXEC_IN_JAIL, "--ro-bind", envFile, ENV_IN_JAIL]),
      "--chdir", "/",
      "--",
      SETPRIV, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups",
      "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
      ...(helper === undefined ? [] : [EXEC_IN_JAIL, ENV_IN_JAIL, "--"]),
      node, ...nodeArgs
    ],
    jailed: true
  }
}
