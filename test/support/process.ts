/** Helpers the engine harnesses share: a free loopback port and stopping a child process. */
import { Duration, Effect } from "effect"
import type { ChildProcess } from "node:child_process"
import { createServer } from "node:net"

/** A port on 127.0.0.1 that was free a moment ago (bind 0, read it, close). */
export const freePort: Effect.Effect<number, string> = Effect.async<number, string>((resume) => {
  const server = createServer()
  server.once("error", (error) => resume(Effect.fail(`no free port: ${error.message}`)))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(port > 0 ? Effect.succeed(port) : Effect.fail("no port assigned")))
  })
})

export const waitForExit = (child: ChildProcess): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

/** SIGTERM, then SIGKILL after 5 s: engines close their files on TERM; a wedged one is killed. */
export const killChild = (child: ChildProcess): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    yield* waitForExit(child).pipe(
      Effect.timeout(Duration.seconds(5)),
      Effect.catchAll(() =>
        Effect.sync(() => child.kill("SIGKILL")).pipe(Effect.zipRight(waitForExit(child)), Effect.timeout(Duration.seconds(5)))
      ),
      Effect.ignore
    )
  })
