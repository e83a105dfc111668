/**
 * What this gateway wrote, kept for `GET /v1/node/logs` (docs/cluster.md, "Node administration"):
 * the last lines of its standard output and error (the JSON access and event lines, and the
 * engine's own log lines), so an operator reads a node's log through the cluster without a shell
 * on its machine. Bounded in lines and in each line's length; the process's output itself is
 * unchanged. A running gateway's only: the CLI's commands keep none.
 */
import { Context, Effect, Layer } from "effect"
import { NODE_LOG_LINES } from "../../domain/NodeAdmin.js"
/** A longer line is cut here (an access line is a few hundred bytes). */
const LINE_CHARS = 4096

export interface NodeLogsService {
  /** The last `lines` lines, oldest first. */
  readonly tail: (lines: number) => ReadonlyArray<string>
}

export class NodeLogs extends Context.Tag("portico/NodeLogs")<NodeLogs, NodeLogsService>() {
  static readonly Live = Layer.scoped(
    NodeLogs,
    Effect.gen(function* () {
      const ring: Array<string> = []
      let partial = ""
      const keep = (chunk: unknown) => {
        const text = typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString("utf8") : ""
        const parts = (partial + text).split("\n")
        partial = (parts.pop() ?? "").slice(0, LINE_CHARS)
        for (const line of parts) {
          if (line === "") continue
          ring.push(line.length > LINE_CHARS ? line.slice(0, LINE_CHARS) : line)
          if (ring.length > NODE_LOG_LINES) ring.splice(0, ring.length - NODE_LOG_LINES)
        }
      }
      const wrap = (stream: NodeJS.WriteStream) => {
        const write = stream.write.bind(stream)
        stream.write = ((chunk: unknown, ...rest: Array<unknown>) => {
          keep(chunk)
          return (write as (...args: Array<unknown>) => boolean)(chunk, ...rest)
        }) as typeof stream.write
        return () => void (stream.write = write)
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => [wrap(process.stdout), wrap(process.stderr)]),
        (restores) => Effect.sync(() => restores.forEach((restore) => restore()))
      )
      return NodeLogs.of({ tail: (lines) => ring.slice(Math.max(0, ring.length - lines)) })
    })
  )

  /** The live ring: it keeps what the test process writes, and lets go of the streams with the layer. */
  static readonly Test = Layer.suspend(() => NodeLogs.Live)
}
