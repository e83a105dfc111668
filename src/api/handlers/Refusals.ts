import { BadRequest, type DomainRefusal, type ErrorCode, type ErrorOf, fromRefusal, type Unavailable, unavailable } from "../../domain/Errors.js"
import { Effect } from "effect"
import { StoreError } from "../../layers/registry/RegistryStore.js"

/**
 * A service's refusal as the catalogue's class of its code, and the registry not answering (a
 * StoreError, which is no refusal: its detail is for the log) as 503 UNAVAILABLE.
 */
export const refusedOrDown = <E extends DomainRefusal<ErrorCode> | StoreError>(
  e: E
): ErrorOf<Exclude<E, StoreError>["code"]> | Unavailable =>
  e instanceof StoreError ? unavailable("registry unavailable") : fromRefusal(e as DomainRefusal<Exclude<E, StoreError>["code"]>)

/** A WebSocket route's path asked without an upgrade: 400, the upgrade listener answers the handshakes. */
export const socketOnly = (path: string) =>
  Effect.fail(new BadRequest({ error: `${path} is a WebSocket`, hint: "open it with Connection: Upgrade and Upgrade: websocket" }))
