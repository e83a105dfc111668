import { Effect } from "effect"
import { internal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"

/** The caller of a route whose policy needs a credential; the gate guarantees one is there. */
export const requirePrincipal = Effect.flatMap(CurrentPrincipal, (p) =>
  p === undefined ? Effect.fail(internal()) : Effect.succeed(p)
)
