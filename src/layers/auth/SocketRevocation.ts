/**
 * The revocation check every long-lived socket registers with (spec §3.1, §6.5; docs/proxy.md
 * "Revocation", docs/pubsub.md): revoking a device (`device:<id>`), ending a session, logging
 * out, revoking an API key or deleting a deployment must close the sockets opened with that
 * credential within 10 seconds on every gateway.
 *
 * The list itself is the registry's session, device, key and deployment state, which every
 * gateway shares: the very checks the authenticator makes of each request (SessionLiveness,
 * ApiKeys.active, WorkloadLiveness), named by `credentialOf`. Every `intervalMs` (3 s by default)
 * this reads the standing of each distinct credential that has an open socket on this gateway,
 * and closes the sockets of those that no longer stand. A registry that does not answer closes
 * nothing (a read failure is not a revocation); the next round reads again.
 */
import { Effect, Either, Option } from "effect"
import type { Principal } from "../../domain/Principal.js"
import type { ApiKeysService } from "../keys/ApiKeys.js"
import type { StoreError } from "../registry/RegistryStore.js"
import type { SessionLiveness, WorkloadLiveness } from "./Authenticator.js"

/**
 * What a socket's standing is read by: `session:<id>` for a signed-in session, `key:<id>` for an
 * API key or a token exchanged from one, `deployment:<namespace>/<id>` for a workload token.
 */
export type Credential = `session:${string}` | `key:${string}` | `deployment:${string}/${string}`

/** The credential a caller's sockets stand or fall with; undefined for one nothing can revoke. */
export const credentialOf = (caller: Principal): Credential | undefined => {
  if (caller.keyId !== undefined) return `key:${caller.keyId}`
  if (caller.method === "workload") return `deployment:${caller.namespace}/${caller.subject.slice(caller.subject.indexOf(":") + 1)}`
  if (caller.sessionId !== undefined) return `session:${caller.sessionId}`
  return undefined
}

/** A credential's standing from the same registry reads the authenticator makes per request. */
export const credentialStanding =
  (reads: {
    readonly sessions: SessionLiveness["Type"]
    readonly keys: Pick<ApiKeysService, "active">
    readonly workloads: WorkloadLiveness["Type"]
  }) =>
  (credential: Credential): Effect.Effect<boolean, StoreError> => {
    const colon = credential.indexOf(":")
    const kind = credential.slice(0, colon)
    const id = credential.slice(colon + 1)
    if (kind === "session") return Effect.map(reads.sessions.standing(id), Option.isSome)
    if (kind === "key") return Effect.map(reads.keys.active(id), Option.isSome)
    const slash = id.indexOf("/")
    return reads.workloads.stands(id.slice(0, slash), id.slice(slash + 1))
  }

export interface RevocableSocket {
  readonly credential: Credential
  /** Closes the socket as revoked. */
  readonly revoke: () => void
}

export interface SocketRevocation {
  /** Watches the socket until the returned call unregisters it. */
  readonly register: (socket: RevocableSocket) => () => void
  /** How many sockets are watched (tests, metrics). */
  readonly size: () => number
  readonly stop: () => void
}

export const makeSocketRevocation = (options: {
  /** Whether the credential still stands (false: revoked, ended, deleted). */
  readonly stands: (credential: Credential) => Effect.Effect<boolean, StoreError>
  readonly intervalMs: number
}): SocketRevocation => {
  const open = new Set<RevocableSocket>()
  let running = false
  const round = async () => {
    if (running || open.size === 0) return
    running = true
    try {
      const credentials = new Set([...open].map((s) => s.credential))
      for (const credential of credentials) {
        const stands = await Effect.runPromise(Effect.either(options.stands(credential)))
        if (Either.isRight(stands) && !stands.right) {
          for (const socket of [...open]) if (socket.credential === credential) socket.revoke()
        }
      }
    } finally {
      running = false
    }
  }
  const timer = setInterval(() => void round(), options.intervalMs)
  timer.unref()
  return {
    register: (socket) => {
      open.add(socket)
      return () => open.delete(socket)
    },
    size: () => open.size,
    stop: () => clearInterval(timer)
  }
}
