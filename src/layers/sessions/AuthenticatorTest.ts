/**
 * Test doubles of the authenticator and of the session liveness it reads (src/layers/TestLayer.ts).
 * In their own module: the liveness comes from Sessions, which imports Authenticator.ts. Here in
 * sessions/, not auth/: the doubles read sessions and deployments' workload tokens, which both
 * import auth/, so in auth/ they would tie the folders into a loop.
 */
import { Layer } from "effect"
import { Authenticator } from "../auth/Authenticator.js"
import { ApiKeys } from "../keys/ApiKeys.js"
import { KeyRing } from "../tokens/KeyRing.js"
import { WorkloadTokens } from "../workload/WorkloadTokens.js"
import { Sessions } from "./Sessions.js"

/** The liveness check of the sessions' test double. */
export const SessionLivenessTest = Layer.suspend(() => Sessions.Liveness.pipe(Layer.provide(Sessions.Test)))

/** The authenticator over the test doubles of keys, signing keys, sessions and deployments. */
export const AuthenticatorTest = Layer.suspend(() =>
  Authenticator.Live.pipe(Layer.provide(Layer.mergeAll(ApiKeys.Test, KeyRing.Test, SessionLivenessTest, WorkloadTokens.LivenessTest)))
)
