/**
 * WASI preview 1 for a function instance: stdin is the invocation's input, stdout its answer
 * (capped), stderr its log (capped), argv the function's name, the host's clocks and random
 * source, and nothing else. No descriptor beyond 0-2 exists and no directory is preopened, so a
 * guest has no file system; every call that would reach one, a socket or another process answers
 * ENOSYS or EBADF (docs/functions.md, "What a guest sees").
 */
import { WASI_CALLS } from "../../../domain/FunctionHostCalls.js"

const ESUCCESS = 0
const EBADF = 8
const EINVAL = 28
const ENOSYS = 52
const ESPIPE = 70
const FILETYPE_CHARACTER_DEVICE = 2

/** proc_exit: unwinds the guest's stack to the caller of `_start`. */
export class GuestExit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`)
  }
}

/** The guest wrote more than its cap to stdout; the instance stops there. */
export class OutputOverflow extends Error {
  constructor(readonly limit: number) {
    super(`output over ${limit} bytes`)
  }
}

export interface WasiIo {
  readonly args: ReadonlyArray<string>
  readonly stdin: Uint8Array
  readonly maxStdout: number
  /** A line the guest wrote to stderr (split at newlines, the rest when it exits). */
  readonly stderrLine: (line: string) => void
}

export interface WasiState {
  readonly imports: Record<string, (...args: Array<never>) => unknown>
  /** stdout as written so far. */
  readonly stdout: () => Uint8Array
  /** stdout as written so far, emptied: a persistent instance's entries each answer what they wrote. */
  readonly take: () => Uint8Array
  /** Flushes a partial stderr line. */
  readonly flush: () => void
}

const sleeper = new Int32Array(new SharedArrayBuffer(4))

export const makeWasi = (memory: () => WebAssembly.Memory, io: WasiIo): WasiState => {
  const view = () => new DataView(memory().buffer)
  const bytes = () => new Uint8Array(memory().buffer)
  const encoder = new TextEncoder()
  const args = io.args.map((a) => encoder.encode(a + "\0"))
  let readAt = 0
  const out: Array<Uint8Array> = []
  let outBytes = 0
  let errPending = ""
  const decoder = new TextDecoder()

  const writeErr = (chunk: Uint8Array) => {
    errPending += decoder.decode(chunk, { stream: true })
    let nl: number
    while ((nl = errPending.indexOf("\n")) >= 0) {
      io.stderrLine(errPending.slice(0, nl))
      errPending = errPending.slice(nl + 1)
    }
  }

  const iovecs = (iovs: number, count: number): Array<Uint8Array> => {
    const v = view()
    const list: Array<Uint8Array> = []
    for (let i = 0; i < count; i++) {
      const ptr = v.getUint32(iovs + i * 8, true)
      const len = v.getUint32(iovs + i * 8 + 4, true)
      list.push(new Uint8Array(memory().buffer, ptr, len))
    }
    return list
  }

  const now = (clock: number): bigint =>
    clock === 0 ? BigInt(Date.now()) * 1_000_000n + BigInt(Math.floor((performance.now() % 1) * 1e6)) : process.hrtime.bigint()

  const implemented: Record<string, (...args: Array<never>) => unknown> = {
    args_sizes_get: (countPtr: number, sizePtr: number) => {
      view().setUint32(countPtr, args.length, true)
      view().setUint32(sizePtr, args.reduce((n, a) => n + a.length, 0), true)
      return ESUCCESS
    },
    args_get: (argvPtr: number, bufPtr: number) => {
      let at = bufPtr
      args.forEach((a, i) => {
        view().setUint32(argvPtr + i * 4, at, true)
        bytes().set(a, at)
        at += a.length
      })
      return ESUCCESS
    },
    environ_sizes_get: (countPtr: number, sizePtr: number) => {
      view().setUint32(countPtr, 0, true)
      view().setUint32(sizePtr, 0, true)
      return ESUCCESS
    },
    environ_get: () => ESUCCESS,
    clock_res_get: (_clock: number, resPtr: number) => {
      view().setBigUint64(resPtr, 1000n, true)
      return ESUCCESS
    },
    clock_time_get: (clock: number, _precision: bigint, timePtr: number) => {
      if (clock > 3) return EINVAL
      view().setBigUint64(timePtr, now(clock === 0 ? 0 : 1), true)
      return ESUCCESS
    },
    random_get: (ptr: number, len: number) => {
      for (let at = 0; at < len; at += 65536) crypto.getRandomValues(new Uint8Array(memory().buffer, ptr + at, Math.min(65536, len - at)))
      return ESUCCESS
    },
    fd_write: (fd: number, iovs: number, count: number, writtenPtr: number) => {
      if (fd !== 1 && fd !== 2) return EBADF
      let written = 0
      for (const chunk of iovecs(iovs, count)) {
        if (fd === 1) {
          if (outBytes + chunk.length > io.maxStdout) throw new OutputOverflow(io.maxStdout)
          out.push(chunk.slice())
          outBytes += chunk.length
        } else writeErr(chunk)
        written += chunk.length
      }
      view().setUint32(writtenPtr, written, true)
      return ESUCCESS
    },
    fd_read: (fd: number, iovs: number, count: number, readPtr: number) => {
      if (fd !== 0) return EBADF
      let read = 0
      for (const into of iovecs(iovs, count)) {
        const n = Math.min(into.length, io.stdin.length - readAt)
        into.set(io.stdin.subarray(readAt, readAt + n))
        readAt += n
        read += n
        if (n < into.length) break
      }
      view().setUint32(readPtr, read, true)
      return ESUCCESS
    },
    fd_fdstat_get: (fd: number, statPtr: number) => {
      if (fd > 2) return EBADF
      const v = view()
      v.setUint8(statPtr, FILETYPE_CHARACTER_DEVICE)
      v.setUint16(statPtr + 2, 0, true)
      v.setBigUint64(statPtr + 8, fd === 0 ? 2n : 64n, true)
      v.setBigUint64(statPtr + 16, 0n, true)
      return ESUCCESS
    },
    fd_fdstat_set_flags: (fd: number) => (fd > 2 ? EBADF : ESUCCESS),
    fd_close: (fd: number) => (fd > 2 ? EBADF : ESUCCESS),
    fd_seek: (fd: number) => (fd > 2 ? EBADF : ESPIPE),
    fd_tell: (fd: number) => (fd > 2 ? EBADF : ESPIPE),
    fd_sync: (fd: number) => (fd > 2 ? EBADF : ESUCCESS),
    fd_datasync: (fd: number) => (fd > 2 ? EBADF : ESUCCESS),
    fd_prestat_get: () => EBADF,
    fd_prestat_dir_name: () => EBADF,
    sched_yield: () => ESUCCESS,
    proc_exit: (code: number) => {
      throw new GuestExit(code)
    },
    poll_oneoff: (inPtr: number, outPtr: number, count: number, eventsPtr: number) => {
      const v = view()
      let wait = Infinity
      let ready = 0
      // descriptors (0-2) are always ready; a clock subscription sleeps, bounded by the deadline
      // that terminates the whole instance
      for (let i = 0; i < count; i++) {
        const sub = inPtr + i * 48
        const tag = v.getUint8(sub + 8)
        if (tag === 0) {
          const timeout = v.getBigUint64(sub + 24, true)
          const absolute = (v.getUint16(sub + 40, true) & 1) !== 0
          const clock = v.getUint32(sub + 16, true)
          const ns = absolute ? timeout - now(clock === 0 ? 0 : 1) : timeout
          wait = Math.min(wait, Math.max(0, Number(ns) / 1e6))
        }
      }
      const anyFd = Array.from({ length: count }, (_, i) => v.getUint8(inPtr + i * 48 + 8)).some((t) => t !== 0)
      if (!anyFd && wait !== Infinity && wait > 0) Atomics.wait(sleeper, 0, 0, wait)
      for (let i = 0; i < count; i++) {
        const sub = inPtr + i * 48
        const tag = v.getUint8(sub + 8)
        if (anyFd && tag === 0) continue
        const event = outPtr + ready * 32
        v.setBigUint64(event, v.getBigUint64(sub, true), true)
        v.setUint16(event + 8, tag === 0 ? ESUCCESS : v.getUint32(sub + 16, true) > 2 ? EBADF : ESUCCESS, true)
        v.setUint8(event + 10, tag)
        v.setBigUint64(event + 16, 0n, true)
        v.setUint16(event + 24, 0, true)
        ready++
      }
      v.setUint32(eventsPtr, ready, true)
      return ESUCCESS
    }
  }
  const imports: Record<string, (...args: Array<never>) => unknown> = {}
  for (const name of WASI_CALLS) imports[name] = implemented[name] ?? (() => (name.startsWith("fd_") ? EBADF : ENOSYS))
  const stdout = () => {
    const all = new Uint8Array(outBytes)
    let at = 0
    for (const chunk of out) {
      all.set(chunk, at)
      at += chunk.length
    }
    return all
  }
  return {
    imports,
    stdout,
    take: () => {
      const all = stdout()
      out.length = 0
      outBytes = 0
      return all
    },
    flush: () => {
      errPending += decoder.decode()
      if (errPending.length > 0) io.stderrLine(errPending)
      errPending = ""
    }
  }
}
