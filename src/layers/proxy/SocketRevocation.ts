/**
 * The revocation check every long-lived socket registers with (spec §3.1, §6.5; docs/proxy.md
 * "Revocation"): revoking a device (`device:<id>`), ending a session or logging out must close
 * that session's open sockets within 10 seconds on every gateway.
 *
 * The list itself is the registry's session and device state, which every gateway shares: a
 * session stands while it is open, its device (if bound to one) active and its wallet still let
 * in, the very check the authenticator makes of each access token (SessionLiveness). Every
 * `intervalMs` (3 s by default) this reads the standing of each distinct session that has an open
 * socket on this gateway, and closes the sockets of those that no longer stand. A registry that
 * does not answer closes nothing (a read failure is not a revocation); the next round reads again.
 * Pub/sub sockets are to register here too.
 */
import { Effect, Either, Option } from "effect"
import type { Role } from "../../domain/Grants.js"
import type { StoreError } from "../registry/RegistryStore.js"

export interface RevocableSocket {
  readonly sessionId: string
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
  readonly standing: (sessionId: string) => Effect.Effect<Option.Option<Role>, StoreError>
  readonly intervalMs: number
}): SocketRevocation => {
  const open = new Set<RevocableSocket>()
  let running = false
  const round = async () => {
    if (running || open.size === 0) return
    running = true
    try {
      const sessions = new Set([...open].map((s) => s.sessionId))
      for (const sessionId of sessions) {
        const standing = await Effect.runPromise(Effect.either(options.standing(sessionId)))
        if (Either.isRight(standing) && Option.isNone(standing.right)) {
          for (const socket of [...open]) if (socket.sessionId === sessionId) socket.revoke()
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
