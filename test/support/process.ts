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

/** Starts `server` on 127.0.0.1 at a port the system picks, and answers that port (the stand-ins' servers). */
export const listenOnLoopback = async (server: { listen: (port: number, host: string, ready: () => void) => unknown; once: (event: "error", listener: (error: Error) => void) => unknown; address: () => unknown }): Promise<number> => {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = server.address()
  return typeof address === "object" && address !== null && "port" in address && typeof address.port === "number" ? address.port : 0
}

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
