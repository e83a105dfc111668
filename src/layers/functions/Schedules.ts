/**
 * Functions' schedules (docs/functions.md, "Schedules"): every gateway ticks each second, and for
 * each schedule firing in that second claims the slot in the registry; the one gateway whose claim
 * made the row runs the function, so a slot fires once across the cluster however many gateways
 * tick. The function runs with `{trigger: "cron", schedule, at}` as its input and no caller.
 *
 * The schedules are read from the registry every PORTICO_FUNCTIONS_TRIGGER_REFRESH_MS (5 s), so a
 * change takes effect within that. A gateway catches up on at most the last few seconds it missed (a pause, a slow tick);
 * older slots are not fired late. Claims older than an hour are removed.
 */
import { Effect, Layer, Schedule } from "effect"
import { type Cron, firesAt, parseCron } from "../../domain/Cron.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { FunctionStore, type Schedule as FunctionSchedule } from "./FunctionStore.js"
import { Invocations, runClaimed } from "./Invocations.js"

/** Seconds a tick looks back for slots it has not seen (a late tick fires them, older ones are skipped). */
const CATCH_UP_S = 5
/** How long a slot's claim is kept, seconds (the cluster's worker prunes older ones). */
export const CLAIM_KEEP_S = 3600

export const FunctionSchedules = Layer.scopedDiscard(
  Effect.gen(function* () {
    const store = yield* FunctionStore
    const invocations = yield* Invocations
    const config = yield* PorticoConfig
    const node = config.nodeId
    const scope = yield* Effect.scope
    let schedules: ReadonlyArray<FunctionSchedule & { readonly cron: Cron }> = []
    let lastSecond = Math.floor(Date.now() / 1000)

    const refresh = Effect.ignore(
      Effect.map(store.allSchedules, (rows) => {
        schedules = rows.flatMap((row) => {
          const cron = parseCron(row.expression)
          return typeof cron === "string" ? [] : [{ ...row, cron }]
        })
      })
    )

    const fire = (schedule: FunctionSchedule, slot: number) =>
      runClaimed(invocations, store.claimSlot(schedule, slot, node), {
        namespace: schedule.namespace,
        name: schedule.name,
        caller: undefined,
        input: new TextEncoder().encode(JSON.stringify({ trigger: "cron", schedule: schedule.expression, at: new Date(slot * 1000).toISOString() })),
        trigger: `cron ${schedule.expression}`
      })

    const tick = Effect.suspend(() => {
      const now = Math.floor(Date.now() / 1000)
      const from = Math.max(lastSecond + 1, now - CATCH_UP_S + 1)
      lastSecond = Math.max(lastSecond, now)
      const due: Array<readonly [FunctionSchedule, number]> = []
      for (let slot = from; slot <= now; slot++) {
        for (const schedule of schedules) if (firesAt(schedule.cron, slot)) due.push([schedule, slot])
      }
      // each run on a fiber of its own: a long function does not hold the next tick
      return Effect.forEach(due, ([schedule, slot]) => Effect.forkIn(fire(schedule, slot), scope), { discard: true })
    })

    yield* refresh
    yield* Effect.forkScoped(Effect.repeat(refresh, Schedule.spaced(`${config.functions.triggerRefreshMs} millis`)))
    yield* Effect.forkScoped(Effect.repeat(tick, Schedule.spaced("1 second")))
    // spent claims are pruned by the cluster's worker (src/layers/nodes/ClusterWorker.ts)
  })
)
