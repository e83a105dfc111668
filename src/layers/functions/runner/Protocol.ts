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
}

export type Ending =
  | { readonly kind: "exit"; readonly code: number; readonly stdout: Uint8Array }
  | { readonly kind: "trap" | "link-failed" | "output-overflow" | "compile-failed"; readonly message: string }
  | { readonly kind: "timeout" }

/** From an instance thread to the runner's main thread. */
export type ThreadReport =
  | { readonly t: "host"; readonly name: string; readonly args: ReadonlyArray<HostArg> }
  | { readonly t: "log"; readonly level: "info" | "error"; readonly message: string }
  | ({ readonly t: "done" } & Ending)

/** From the gateway to the runner. */
export type ToRunner =
  | {
      readonly t: "run"
      readonly id: number
      /** The module's bytes (memory already capped), keyed by `key`; absent when the runner said it holds it. */
      readonly key: string
      readonly wasm?: Uint8Array | undefined
      readonly job: Omit<RunJob, "module">
      readonly timeoutMs: number
    }
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
