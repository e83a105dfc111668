/**
 * Starts a real `redis-server` for the cache engine suite: a free 127.0.0.1 port, a fresh temp
 * dir, no persistence, a small `maxmemory`, ready once it answers PING. The binary is the Debian
 * package (`scripts/engines.sh redis` installs it in CI).
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { Socket } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { Data, Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import { freePort as sharedFreePort, killChild } from "./process.js"

/** The binary, from `$PORTICO_REDIS_SERVER` or PATH. */
export const redisServerPath = (): string => process.env["PORTICO_REDIS_SERVER"] ?? "redis-server"

/** Whether the binary runs; suites fail (not skip) with `redisMissingMessage` when not. */
export const hasRedisServer = (): boolean => {
  const probe = spawnSync(redisServerPath(), ["--version"], { stdio: "ignore" })
  return probe.error === undefined && probe.status === 0
}

export const redisMissingMessage = (): string =>
  `redis-server is not available (${redisServerPath()}): run \`scripts/engines.sh redis\` ` +
  "(apt-get install -y redis-server; CI's .ci/run does) or set PORTICO_REDIS_SERVER to the binary"

export class RedisServerError extends Data.TaggedError("RedisServerError")<{ readonly message: string }> {}

export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  /** Kills the process and removes its dir; safe to run more than once. */
  readonly stop: Effect.Effect<void>
  /** Kills the process (SIGKILL), as a crash would; `start` brings a fresh one back on the same port. */
  readonly kill: Effect.Effect<void>
  /** Starts the server again on its port after `kill` (no data: persistence is off). */
  readonly start: Effect.Effect<void, RedisServerError>
}

export interface RedisServerOptions {
  /** Redis size string; default `64mb`. */
  readonly maxmemory?: string
  /** Default `allkeys-lru`; `noeviction` for the refusal test. */
  readonly policy?: string
  readonly readyTimeout?: Duration.DurationInput
  /** The loopback address it binds (a cluster's shared Redis on its own address); default 127.0.0.1. */
  readonly host?: string
}

const freePort = Effect.mapError(sharedFreePort, (message) => new RedisServerError({ message }))

/** One raw PING over RESP, so readiness does not depend on the client under test. */
const pingOnce = (port: number, host: string): Effect.Effect<void, RedisServerError> =>
  Effect.async<void, RedisServerError>((resume) => {
    const socket = new Socket()
    let reply = ""
    const done = (result: Effect.Effect<void, RedisServerError>) => {
      socket.destroy()
      resume(result)
    }
    socket.once("error", (error) => done(Effect.fail(new RedisServerError({ message: `ping: ${error.message}` }))))
    socket.on("data", (chunk) => {
      reply += chunk.toString()
      if (reply.includes("\r\n")) {
        done(reply.startsWith("+PONG") ? Effect.void : Effect.fail(new RedisServerError({ message: `ping answered ${reply.trim()}` })))
      }
    })
    socket.connect(port, host, () => socket.write("PING\r\n"))
    return Effect.sync(() => socket.destroy())
  }).pipe(
    Effect.timeoutFail({ duration: Duration.seconds(1), onTimeout: () => new RedisServerError({ message: "ping timed out" }) })
  )

const startOnce = (options: RedisServerOptions): Effect.Effect<RedisServer, RedisServerError> =>
  Effect.gen(function* () {
    if (!hasRedisServer()) return yield* new RedisServerError({ message: redisMissingMessage() })
    const host = options.host ?? "127.0.0.1"
    const port = yield* freePort
    const dir = yield* Effect.try({
      try: () => mkdtempSync(path.join(tmpdir(), "portico-redis-")),
      catch: (error) => new RedisServerError({ message: `temp dir: ${String(error)}` })
    })
    const args = [
      "--port", String(port),
      "--bind", host,
      // protected mode answers only 127.0.0.1 and ::1; the cluster's nodes come from 127.0.0.1x
      ...(host === "127.0.0.1" ? [] : ["--protected-mode", "no"]),
      "--dir", dir,
      "--save", "",
      "--appendonly", "no",
      "--daemonize", "no",
      "--maxmemory", options.maxmemory ?? "64mb",
      "--maxmemory-policy", options.policy ?? "allkeys-lru"
    ]
    // Keep the tail of its log for error messages; reading also keeps the pipes from filling.
    let log = ""
    const keep = (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4000)
    }
    const launch = () => {
      const started = spawn(redisServerPath(), args, { stdio: ["ignore", "pipe", "pipe"] })
      started.stdout?.on("data", keep)
      started.stderr?.on("data", keep)
      return started
    }
    let child = launch()
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
            rmSync(dir, { recursive: true, force: true })
          })
        )
      )
    })

    const exited = () => child.exitCode !== null || child.signalCode !== null
    const ready = pingOnce(port, host).pipe(
      Effect.retry({ schedule: Schedule.spaced(Duration.millis(25)), while: () => !exited() }),
      Effect.timeout(Duration.decode(options.readyTimeout ?? Duration.seconds(10))),
      Effect.mapError(
        (error) => new RedisServerError({ message: `redis-server did not answer PING on port ${port}: ${error.message}\n--- redis log ---\n${log}` })
      )
    )
    yield* ready.pipe(Effect.catchAll((error) => stop.pipe(Effect.zipRight(Effect.fail(error)))))
    const kill = Effect.suspend(() => {
      child.kill("SIGKILL")
      return Effect.async<void>((resume) => {
        if (exited()) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
      })
    })
    const start = Effect.suspend(() => {
      child = launch()
      return ready
    })
    return { url: `redis://${host}:${port}`, port, stop, kill, start }
  })

/** Starts a fresh redis-server; the caller runs `stop`. Retries twice when a port was taken meanwhile. */
export const startRedis = (options: RedisServerOptions = {}): Effect.Effect<RedisServer, RedisServerError> =>
  startOnce(options).pipe(Effect.retry({ times: 2, while: () => hasRedisServer() }))

/** A fresh redis-server stopped (and its dir removed) when the scope closes. */
export const redisServer = (options: RedisServerOptions = {}): Effect.Effect<RedisServer, RedisServerError, Scope.Scope> =>
  Effect.acquireRelease(startRedis(options), (server) => server.stop)
