/**
 * Pauses that exist for tests alone, so a test can stop a gateway in the middle of a long change
 * and check what a restart makes of it. Both default to 0 (no pause) and are not documented for
 * operators.
 */
import { Config, Effect } from "effect"

export interface TestPauses {
  /** Before each part of a namespace's deletion (`PORTICO_TEARDOWN_PART_DELAY_MS`). */
  readonly teardownPartMs: number
  /** Before a restore's registry batch (`PORTICO_RESTORE_PAUSE_MS`). */
  readonly restoreBatchMs: number
}

export const noTestPauses: TestPauses = { teardownPartMs: 0, restoreBatchMs: 0 }

export const testPausesConfig = Effect.gen(function* () {
  const pauses: TestPauses = {
    teardownPartMs: yield* Config.integer("PORTICO_TEARDOWN_PART_DELAY_MS").pipe(Config.withDefault(0)),
    restoreBatchMs: yield* Config.integer("PORTICO_RESTORE_PAUSE_MS").pipe(Config.withDefault(0))
  }
  return pauses
})
