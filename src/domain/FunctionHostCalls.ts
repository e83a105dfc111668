/**
 * The host calls a function may import (docs/functions.md, "Host calls"): their names, their
 * WebAssembly signatures in the original system's pointer/length ABI, and where each is answered.
 *
 * The ABI: a string or byte argument is two i32 parameters, a pointer into the guest's memory and
 * a length (`s` below). A byte answer is a P64, an i64 whose high 32 bits are a pointer and low
 * 32 bits a length, of a buffer the host allocated with the guest's own `orama_alloc` (or
 * `malloc`) export; 0 is failure and also the empty answer. Calls answering i32 use 1 for success
 * and 0 for failure, except `db_execute` (rows affected). Every call takes its namespace and
 * caller from the invocation, never from an argument.
 *
 * The same table is offered under the module names `env`, `host` and `orama`, so functions built
 * for the original system link unchanged. Client-safe: names and values only.
 */

export type Param = "s" | "i32" | "i64"
export type Result = "p64" | "i32" | "i64" | "void"

export interface HostCall {
  readonly params: ReadonlyArray<Param>
  readonly result: Result
  /**
   * `local`: answered by the instance's own thread from what the invocation carries (identity,
   * environment, logging). `gateway`: answered by the gateway's services, the instance waiting.
   */
  readonly where: "local" | "gateway"
}

const call = (params: ReadonlyArray<Param>, result: Result, where: "local" | "gateway" = "gateway"): HostCall => ({ params, result, where })

export const HOST_CALLS = {
  // identity and context
  get_caller_wallet: call([], "p64", "local"),
  get_caller_jwt_subject: call([], "p64", "local"),
  get_caller_device_id: call([], "p64", "local"),
  get_caller_claim: call(["s"], "p64", "local"),
  get_request_id: call([], "p64", "local"),
  get_env: call(["s"], "p64", "local"),
  get_secret: call(["s"], "p64"),
  // the cluster SQL store, one statement per call through the SQL guard
  db_query: call(["s", "s"], "p64"),
  db_query_v2: call(["s", "s"], "p64"),
  db_execute: call(["s", "s"], "i32"),
  db_execute_v2: call(["s", "s"], "p64"),
  // a cache map of the function's namespace that the HTTP API cannot name
  cache_get: call(["s"], "p64"),
  cache_set: call(["s", "s", "i64"], "void"),
  cache_delete: call(["s"], "i32"),
  cache_incr: call(["s"], "i64"),
  cache_incr_by: call(["s", "i64"], "i64"),
  // content storage, read only
  storage_get: call(["s"], "p64"),
  // outbound HTTP through the egress guard
  http_fetch: call(["s", "s", "s", "s"], "p64"),
  // publish/subscribe
  pubsub_publish: call(["s", "s"], "i32"),
  // push (spec §4.6)
  push_send: call(["s", "s"], "i32"),
  push_send_v2: call(["s", "s"], "p64"),
  push_send_topic: call(["s", "s"], "p64"),
  // sockets (docs/functions.md, "Sockets"): this instance's socket, and any socket of the namespace's functions
  get_ws_client_id: call([], "p64", "local"),
  ws_send: call(["s", "s"], "i32"),
  ws_disconnect: call(["s"], "i32"),
  ws_list_clients: call([], "p64"),
  // real-time media (docs/webrtc.md, "From functions"): admissions, kicks and mutes on every node, TURN credentials
  webrtc_admit: call(["s", "s", "i64"], "i32"),
  webrtc_kick: call(["s", "s"], "p64"),
  webrtc_mute: call(["s", "s"], "p64"),
  webrtc_unmute: call(["s", "s"], "p64"),
  webrtc_turn_credentials: call([], "p64"),
  // composition and logging
  function_invoke: call(["s", "s"], "p64"),
  log_info: call(["s"], "void", "local"),
  log_error: call(["s"], "void", "local")
} as const satisfies Record<string, HostCall>

export type HostCallName = keyof typeof HOST_CALLS

export const HOST_MODULES: ReadonlyArray<string> = ["env", "host", "orama"]
export const WASI_MODULE = "wasi_snapshot_preview1"

/**
 * WASI preview 1, every name. A module may import any of them; those that would reach a file
 * system, a socket or the process answer ENOSYS or EBADF (docs/functions.md, "What a guest sees").
 */
export const WASI_CALLS: ReadonlySet<string> = new Set([
  "args_get", "args_sizes_get", "environ_get", "environ_sizes_get", "clock_res_get", "clock_time_get",
  "fd_advise", "fd_allocate", "fd_close", "fd_datasync", "fd_fdstat_get", "fd_fdstat_set_flags",
  "fd_fdstat_set_rights", "fd_filestat_get", "fd_filestat_set_size", "fd_filestat_set_times", "fd_pread",
  "fd_prestat_get", "fd_prestat_dir_name", "fd_pwrite", "fd_read", "fd_readdir", "fd_renumber", "fd_seek",
  "fd_sync", "fd_tell", "fd_write", "path_create_directory", "path_filestat_get", "path_filestat_set_times",
  "path_link", "path_open", "path_readlink", "path_remove_directory", "path_rename", "path_symlink",
  "path_unlink_file", "poll_oneoff", "proc_exit", "proc_raise", "sched_yield", "random_get", "sock_accept",
  "sock_recv", "sock_send", "sock_shutdown"
])

/** The export the host allocates answers with, in order of preference. */
export const ALLOC_EXPORTS: ReadonlyArray<string> = ["orama_alloc", "malloc"]

/** An import the gateway does not offer, named for the 400 at deploy; undefined when all are offered. */
export const unofferedImport = (imports: ReadonlyArray<{ readonly module: string; readonly name: string; readonly kind: string }>) =>
  imports.find((i) =>
    i.module === WASI_MODULE
      ? i.kind !== "function" || !WASI_CALLS.has(i.name)
      : !HOST_MODULES.includes(i.module) || i.kind !== "function" || !Object.hasOwn(HOST_CALLS, i.name)
  )
