/**
 * The deployments routes' handlers. This first version answers every route 503 while the
 * Deployments service (src/layers/deployments/Deployments.ts) is being built, so the routes, their
 * schemas and the typed client exist for the CLI meanwhile.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { unavailable } from "../../domain/Errors.js"
import { PorticoApi } from "../Api.js"

const notYet = () => Effect.fail(unavailable("deployments are not served by this gateway yet"))

export const DeploymentsHandlers = HttpApiBuilder.group(PorticoApi, "deployments", (handlers) =>
  Effect.succeed(
    handlers
      .handle("upload", notYet)
      .handle("update", notYet)
      .handle("list", notYet)
      .handle("get", notYet)
      .handle("delete", notYet)
      .handle("versions", notYet)
      .handle("rollback", notYet)
      .handle("events", notYet)
      .handle("env", notYet)
      .handle("envSet", notYet)
      .handle("grants", notYet)
      .handle("setGrants", notYet)
  )
)
