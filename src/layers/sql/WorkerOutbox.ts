/**
 * A SQLite worker's outgoing answers (sqliteWorker.ts): held while the worker runs a turn's
 * requests and written together when the turn ends, with a watchdog thread that writes whatever
 * is held every millisecond while the worker is busy.
 *
 * Why held: each write wakes the gateway, and on a shared CPU a woken gateway preempts the worker,
 * so one write per answer became two context switches per statement and answers handled one at
 * a time. Why the watchdog: the gateway reads the oldest unanswered request as the one running,
 * which is how it knows which statement ran past the timeout and that none behind it ran
 * (WorkerPool.ts). A statement stuck in SQLite holds the worker's only JS thread, so the answers
 * done before it are written by the watchdog, within about a millisecond, not lost at the kill.
 *
 * The held bytes live in a SharedArrayBuffer under a spin lock (Atomics), taken by the worker to
 * append and by either thread to write out; an answer larger than the buffer is written directly.
 */
import { writeSync } from "node:fs"
import { Worker } from "node:worker_threads"

const CAPACITY = 1 << 20
const EVERY_MS = 1
/** Int32 slots: the lock, the held length, whether the worker is busy, a slot nothing wakes (for sleeping). */
const LOCK = 0
const LENGTH = 1
const BUSY = 2
const SLEEP = 3
const HEADER = 16

/** Writes all of `bytes` to `fd`, retrying a full non-blocking pipe. */
const writeAll = (fd: number, bytes: Uint8Array): void => {
  let at = 0
  while (at < bytes.length) {
    try {
      at += writeSync(fd, bytes, at)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EAGAIN") throw e
    }
  }
}

/** The watchdog, as its own thread's source (no module resolution needed in the thread). */
const watchdogSource = `
const { workerData } = require("node:worker_threads")
const { writeSync } = require("node:fs")
const { sab, fd, every } = workerData
const ctl = new Int32Array(sab, 0, 4)
const writeAll = (fd, bytes) => {
  let at = 0
  while (at < bytes.length) {
    try {
      at += writeSync(fd, bytes, at)
    } catch (e) {
      if (e.code !== "EAGAIN") throw e
    }
  }
}
for (;;) {
  // asleep until the worker is busy, then a tick every \`every\` ms while it is
  Atomics.wait(ctl, ${BUSY}, 0)
  Atomics.wait(ctl, ${SLEEP}, 0, every)
  if (Atomics.load(ctl, ${LENGTH}) === 0) continue
  while (Atomics.compareExchange(ctl, ${LOCK}, 0, 1) !== 0) {}
  const length = Atomics.load(ctl, ${LENGTH})
  if (length > 0) {
    writeAll(fd, new Uint8Array(sab, ${HEADER}, length))
    Atomics.store(ctl, ${LENGTH}, 0)
  }
  Atomics.store(ctl, ${LOCK}, 0)
}
`

export class Outbox {
  private readonly sab = new SharedArrayBuffer(HEADER + CAPACITY)
  private readonly ctl = new Int32Array(this.sab, 0, 4)
  private readonly bytes = new Uint8Array(this.sab, HEADER)

  constructor(private readonly fd: number) {
    const watchdog = new Worker(watchdogSource, { eval: true, workerData: { sab: this.sab, fd, every: EVERY_MS } })
    // it never ends on its own; it must not keep the process alive
    watchdog.unref()
  }

  private lock(): void {
    while (Atomics.compareExchange(this.ctl, LOCK, 0, 1) !== 0) {
      // the watchdog is writing; it holds the lock for one write
    }
  }

  private unlock(): void {
    Atomics.store(this.ctl, LOCK, 0)
  }

  /** Writes what is held; the lock is held by the caller. */
  private flushLocked(): void {
    const length = this.ctl[LENGTH]!
    if (length === 0) return
    writeAll(this.fd, this.bytes.subarray(0, length))
    Atomics.store(this.ctl, LENGTH, 0)
  }

  /** The worker starts a turn's requests: the watchdog ticks until `idle`. */
  busy(): void {
    if (Atomics.load(this.ctl, BUSY) === 1) return
    Atomics.store(this.ctl, BUSY, 1)
    Atomics.notify(this.ctl, BUSY)
  }

  /** Holds a frame; writes first if it would not fit. */
  add(frame: Uint8Array): void {
    this.lock()
    try {
      const length = this.ctl[LENGTH]!
      if (length + frame.length > CAPACITY) {
        this.flushLocked()
        if (frame.length > CAPACITY) return writeAll(this.fd, frame)
      }
      this.bytes.set(frame, this.ctl[LENGTH]!)
      Atomics.store(this.ctl, LENGTH, this.ctl[LENGTH]! + frame.length)
    } finally {
      this.unlock()
    }
  }

  /** The turn is over (or the worker waits on something): write what is held, let the watchdog sleep. */
  idle(): void {
    this.lock()
    try {
      this.flushLocked()
    } finally {
      this.unlock()
    }
    Atomics.store(this.ctl, BUSY, 0)
  }
}
