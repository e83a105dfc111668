/**
 * Starts a real single-node `rqlited` for engine suites: free 127.0.0.1 ports, a fresh temp data
 * dir, ready once `/readyz` answers 200. The binary comes from `scripts/engines.sh rqlite`.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Data, Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { freePort as sharedFreePort, killChild } from "./process.js"

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** Where the suites expect the binary: `$PORTICO_ENGINES_DIR/rqlited` or `<repo>/.engines/bin/rqlited`. */
export const rqlitedPath = (): string =>
  path.join(process.env["PORTICO_ENGINES_DIR"] ?? path.join(repoRoot, ".engines", "bin"), "rqlited")

/** Whether the binary is installed; suites fail (not skip) with `rqlitedMissingMessage` when not. */
export const hasRqlited = (): boolean => existsSync(rqlitedPath())

export const rqlitedMissingMessage = (): string =>
  `rqlited is not installed at ${rqlitedPath()}: run \`scripts/engines.sh rqlite\` (CI's .ci/run does) ` +
  "or point PORTICO_ENGINES_DIR at a directory holding it"

export class RqlitedError extends Data.TaggedError("RqlitedError")<{ readonly message: string }> {}

export interface RqlitedServer {
  /** Base URL of the HTTP API, `http://127.0.0.1:<port>`. */
  readonly url: string
  readonly dataDir: string
  /** Kills the process and removes its data dir; safe to run more than once. */
  readonly stop: Effect.Effect<void>
}

const freePort = Effect.mapError(sharedFreePort, (message) => new RqlitedError({ message }))

const startOnce = (options: { readonly readyTimeout: Duration.Duration }): Effect.Effect<RqlitedServer, RqlitedError> =>
  Effect.gen(function* () {
    if (!hasRqlited()) return yield* new RqlitedError({ message: rqlitedMissingMessage() })
    const httpPort = yield* freePort
    const raftPort = yield* freePort
    const dataDir = yield* Effect.try({
      try: () => mkdtempSync(path.join(tmpdir(), "portico-rqlited-")),
      catch: (error) => new RqlitedError({ message: `temp dir: ${String(error)}` })
    })
    const url = `http://127.0.0.1:${httpPort}`
    // Short Raft timeouts: a single node elects itself in ~0.3 s instead of ~1.5 s.
    const args = [
      "-node-id", "n1",
      "-http-addr", `127.0.0.1:${httpPort}`,
      "-raft-addr", `127.0.0.1:${raftPort}`,
      "-raft-election-timeout", "200ms",
      "-raft-timeout", "200ms",
      "-raft-leader-lease-timeout", "200ms",
      path.join(dataDir, "data")
    ]
    const child = spawn(rqlitedPath(), args, { stdio: ["ignore", "pipe", "pipe"] })
    // Keep the tail of its log for error messages; reading also keeps the pipes from filling.
    let log = ""
    const keep = (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4000)
    }
    child.stdout?.on("data", keep)
    child.stderr?.on("data", keep)
    // A test worker that exits without running finalizers must not leave the server behind.
    const onExit = () => child.kill("SIGKILL")
    process.once("exit", onExit)

    let stopped = false
    const stop = Effect.suspend(() => {
      if (stopped) return Effect.void
      stopped = true
      return killChild(child).pipe(
        Effect.zipRight(
          Effect.sync(() => {
            process.removeListener("exit", onExit)
            rmSync(dataDir, { recursive: true, force: true })
          })
        )
      )
    })

    const exited = () => child.exitCode !== null || child.signalCode !== null
    const ready = Effect.tryPromise({
      try: (signal) => fetch(`${url}/readyz`, { signal }),
      catch: (error) => new RqlitedError({ message: `readyz: ${String(error)}` })
    }).pipe(
      Effect.timeout(Duration.seconds(1)),
      Effect.mapError((error) => (error._tag === "RqlitedError" ? error : new RqlitedError({ message: "readyz timed out" }))),
      Effect.flatMap((response) =>
        response.status === 200
          ? Effect.void
          : Effect.fail(new RqlitedError({ message: `readyz answered ${response.status}` }))
      ),
      Effect.tapError(() =>
        exited() ? Effect.fail(new RqlitedError({ message: `rqlited exited (${child.exitCode ?? child.signalCode})` })) : Effect.void
      )
    )
    yield* ready.pipe(
      Effect.retry({ schedule: Schedule.spaced(Duration.millis(50)), while: () => !exited() }),
      Effect.timeout(options.readyTimeout),
      Effect.catchAll((error) =>
        stop.pipe(
          Effect.zipRight(
            Effect.fail(
              new RqlitedError({
                message: `rqlited did not become ready at ${url}: ${error.message}\n--- rqlited log ---\n${log}`
              })
            )
          )
        )
      )
    )
    return { url, dataDir, stop }
  })

/** Starts a fresh rqlited; the caller runs `stop`. Retries twice when a port was taken meanwhile. */
export const startRqlited = (options?: { readonly readyTimeout?: Duration.DurationInput }): Effect.Effect<RqlitedServer, RqlitedError> =>
  startOnce({ readyTimeout: Duration.decode(options?.readyTimeout ?? Duration.seconds(20)) }).pipe(
    Effect.retry({ times: 2, while: () => hasRqlited() })
  )

/** A fresh rqlited stopped (and its dir removed) when the scope closes. */
export const rqlited = (options?: { readonly readyTimeout?: Duration.DurationInput }): Effect.Effect<RqlitedServer, RqlitedError, Scope.Scope> =>
  Effect.acquireRelease(startRqlited(options), (server) => server.stop)
