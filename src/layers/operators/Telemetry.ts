/**
 * The operator telemetry stream's events (spec §6.2): `event: snapshot` with the snapshot as one
 * JSON line every `interval` seconds (the first at once), `event: error` when no snapshot could be
 * assembled, `: keepalive` comments between them, and the end after 100 seconds (the client
 * reconnects).
 */
import { Duration, Effect, Schedule, Stream } from "effect"

export const TELEMETRY_INTERVAL_MIN = 2
export const TELEMETRY_INTERVAL_MAX = 60
export const TELEMETRY_INTERVAL_DEFAULT = 5
/** How long one stream lasts. */
export const TELEMETRY_STREAM_SECONDS = 100
/** A comment this often keeps proxies from closing a quiet stream. */
export const KEEPALIVE_SECONDS = 15

export const snapshotEvent = (snapshot: unknown): string => `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`
export const errorEvent = (message: string): string => `event: error\ndata: ${JSON.stringify({ error: message })}\n\n`
export const KEEPALIVE = ": keepalive\n\n"

/** The stream's text, event by event. */
export const telemetryEvents = <E>(snapshot: Effect.Effect<unknown, E>, intervalSeconds: number): Stream.Stream<string> => {
  const one = Effect.match(snapshot, {
    onFailure: () => errorEvent("no snapshot could be assembled"),
    onSuccess: snapshotEvent
  })
  const snapshots = Stream.repeatEffectWithSchedule(one, Schedule.spaced(Duration.seconds(intervalSeconds)))
  const keepalives = Stream.tick(Duration.seconds(KEEPALIVE_SECONDS)).pipe(Stream.drop(1), Stream.as(KEEPALIVE))
  return Stream.merge(snapshots, keepalives).pipe(Stream.interruptAfter(Duration.seconds(TELEMETRY_STREAM_SECONDS)))
}
