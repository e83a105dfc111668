/**
 * A deployed app's health check (spec §2.7): `GET <health path>` on 127.0.0.1:<port>, healthy only
 * on 200. The gateway's own connection is not the app's, so the sandbox's socket rules do not
 * apply to it. No connection reuse (a check must see the app accept), a bounded wait per probe.
 */
import { Duration, Effect, Schedule } from "effect"
import * as http from "node:http"
import type { Exit } from "../sandbox/Sandbox.js"

/** How long one probe may take before it counts as failed. */
export const PROBE_TIMEOUT_MS = 5_000
/** How often a starting app is probed until it answers 200. */
const STARTING_POLL_MS = 200

/** One probe: true only when the app answered 200 within `timeoutMs`. */
export const probe = (port: number, healthPath: string, timeoutMs: number = PROBE_TIMEOUT_MS): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    let done = false
    const finish = (healthy: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(Effect.succeed(healthy))
    }
    const request = http.get({ host: "127.0.0.1", port, path: healthPath, agent: false, headers: { "user-agent": "portico-health-check" } }, (response) => {
      response.resume()
      finish(response.statusCode === 200)
    })
    const timer = setTimeout(() => {
      request.destroy()
      finish(false)
    }, timeoutMs)
    request.on("error", () => finish(false))
    return Effect.sync(() => {
      clearTimeout(timer)
      request.destroy()
    })
  })

export type StartResult =
  | { readonly kind: "healthy" }
  | { readonly kind: "exited"; readonly exit: Exit }
  | { readonly kind: "timeout" }

/**
 * Waits until the starting app answers 200 on its health path, it exits, or `timeoutMs` passes,
 * whichever comes first.
 */
export const awaitHealthy = (port: number, healthPath: string, timeoutMs: number, exited: Promise<Exit>): Effect.Effect<StartResult> => {
  const healthy = probe(port, healthPath, Math.min(PROBE_TIMEOUT_MS, timeoutMs)).pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(STARTING_POLL_MS)), until: (ok) => ok }),
    Effect.as<StartResult>({ kind: "healthy" })
  )
  const exit = Effect.map(
    Effect.promise(() => exited),
    (e): StartResult => ({ kind: "exited", exit: e })
  )
  return Effect.raceFirst(healthy, exit).pipe(
    Effect.timeoutTo({ duration: Duration.millis(timeoutMs), onTimeout: (): StartResult => ({ kind: "timeout" }), onSuccess: (r) => r })
  )
}
