/**
 * The messages between the gateway, the function runner process (functionRunner.ts) and its
 * instance threads (instanceThread.ts). Plain data, carried by structured clone: the IPC channel
 * with advanced serialization between processes, `postMessage` between threads.
 */

/** A host call's argument: a string's bytes, or an integer. */
export type HostArg = Uint8Array | number | bigint

/** The gateway's answer to a host call; `ok: false` is the call's failure value (0). */
export type HostAnswer = { readonly ok: true; readonly value: Uint8Array | number | bigint | null } | { readonly ok: false }

export interface Caller {
  readonly wallet?: string | undefined
  readonly subject?: string | undefined
  readonly device?: string | undefined
}

/** What an instance thread runs. */
export interface RunJob {
  readonly module: WebAssembly.Module
  readonly name: string
  readonly input: Uint8Array
  readonly requestId: string
  readonly caller: Caller
  readonly env: Readonly<Record<string, string>>
  readonly maxStdout: number
  readonly maxLogLines: number
  readonly maxLogBytes: number
  /** The socket a persistent instance serves (`get_ws_client_id`); absent for a run. */
  readonly socket?: string | undefined
}

/** A persistent instance's entries after `open` (docs/functions.md, "Sockets"): a client's frame, or its close. */
export type SessionEntry = { readonly entry: "frame"; readonly data: Uint8Array } | { readonly entry: "close" }

/** What an instance thread is given: a run, a persistent instance to open, or an entry of the one it holds. */
export type ToThread =
  | ({ readonly t: "run" } & RunJob)
  | ({ readonly t: "open" } & RunJob)
  | ({ readonly t: "entry" } & SessionEntry)

export type Ending =
  | { readonly kind: "exit"; readonly code: number; readonly stdout: Uint8Array }
  /** A persistent instance's entry returned: the instance lives on; `stdout` is what the entry wrote. */
  | { readonly kind: "returned"; readonly stdout: Uint8Array }
  /** The module lacks the export this use needs (`_start` for a run, `ws_frame` for a socket). */
  | { readonly kind: "no-entry"; readonly message: string }
  | { readonly kind: "trap" | "link-failed" | "output-overflow" | "compile-failed"; readonly message: string }
  | { readonly kind: "timeout" }

/** From an instance thread to the runner's main thread. */
export type ThreadReport =
  /** The thread has loaded and listens. */
  | { readonly t: "ready" }
  | { readonly t: "host"; readonly name: string; readonly args: ReadonlyArray<HostArg> }
  | { readonly t: "log"; readonly level: "info" | "error"; readonly message: string }
  | ({ readonly t: "done" } & Ending)

/** A run, or a persistent instance's opening: the same fields. */
export interface Start {
  readonly id: number
  /** The module's bytes (memory already capped), keyed by `key`; absent when the runner said it holds it. */
  readonly key: string
  readonly wasm?: Uint8Array | undefined
  readonly job: Omit<RunJob, "module">
  readonly timeoutMs: number
}

/** From the gateway to the runner. */
export type ToRunner =
  | ({ readonly t: "run" } & Start)
  /** A persistent instance, opened like a run (`_initialize`, then `ws_open`) and kept on a thread of its own. */
  | ({ readonly t: "open" } & Start)
  | ({ readonly t: "entry"; readonly id: number; readonly timeoutMs: number } & SessionEntry)
  /** The persistent instance is dropped, its thread ended. */
  | { readonly t: "end"; readonly id: number }
  | { readonly t: "answer"; readonly id: number; readonly answer: HostAnswer }
  /** A module just deployed: compiled and kept now, so its first run does not wait for it. */
  | { readonly t: "warm"; readonly key: string; readonly wasm: Uint8Array }

/** From the runner to the gateway. */
export type FromRunner =
  | { readonly t: "ready" }
  | { readonly t: "need-module"; readonly id: number }
  | { readonly t: "host"; readonly id: number; readonly name: string; readonly args: ReadonlyArray<HostArg> }
  | { readonly t: "log"; readonly id: number; readonly level: "info" | "error"; readonly message: string }
  | ({ readonly t: "done"; readonly id: number; readonly ms: number } & Ending)
