/**
 * A SQLite worker process: runs tenant statements with better-sqlite3 off the gateway's event
 * loop. better-sqlite3 is synchronous and has no interrupt, and a thread stuck in a native
 * SQLite loop cannot be terminated, so this is a child process: the gateway enforces the
 * statement timeout with SIGKILL (SQLite rolls the open transaction back when the file is next
 * opened).
 *
 * What it does with a request is SqliteRunner.ts; this file is its transport: request frames on
 * stdin, answer frames on fd 3.
 */
import type { WorkerOptions } from "./SqliteProtocol.js"
import { makeSqliteRunner } from "./SqliteRunner.js"
import { answerFrame, FrameReader, readRequests, readyFrame } from "./WorkerFrames.js"
import { Outbox } from "./WorkerOutbox.js"

const options = JSON.parse(process.env["PORTICO_SQLITE_WORKER"] ?? "{}") as WorkerOptions

/** Answers go out on fd 3 (WorkerOutbox.ts: held for the turn, a watchdog writes them while a statement runs long). */
const ANSWERS_FD = 3
const outbox = new Outbox(ANSWERS_FD)
const runner = makeSqliteRunner(options, {
  send: (answer) => outbox.add(answerFrame(answer)),
  busy: () => outbox.busy(),
  idle: () => outbox.idle()
})

const frames = new FrameReader()
process.stdin.on("data", (chunk: Buffer) => {
  for (const frame of frames.push(chunk)) for (const request of readRequests(frame)) runner.enqueue(request)
  runner.drain()
})
outbox.add(readyFrame())
outbox.idle()
// the gateway gone, nothing is left to answer
process.stdin.on("end", () => process.exit(0))
process.stdin.on("error", () => process.exit(0))
