/**
 * Facts a route carries on its endpoint, as annotations (`HttpApiEndpoint.annotate`, or
 * `HttpApiGroup.annotate` for a whole group): who may call it, how its body is read, whether the
 * fast lane answers it. The server builds every lookup it needs from them once, with
 * `HttpApi.reflect` (src/api/gate/RouteIndex.ts); nothing else lists routes. Client-safe: this
 * module holds names and values only.
 */
import { Context } from "effect"
import type { Policy } from "./Policy.js"

/** Who may call the route (Policy.ts). Every endpoint has one: the gateway does not start otherwise. */
export class RoutePolicy extends Context.Tag("portico/RoutePolicy")<RoutePolicy, Policy>() {}

/** What a forwarded body may carry beyond the default cap: the caller the front gateway authorized. */
export const FORWARDED_ROOM_BYTES = 64 * 1024

/**
 * A body cap of its own, named for the setting it comes from (the default is `MAX_BODY_BYTES`):
 * `sqlImport` the import cap, `upload` the upload cap plus room for the multipart framing,
 * `forwarded` the default cap plus room for the caller a peer gateway forwards with the body,
 * `relayMessage` ntfy's default message size limit (the platform relay's fan-out, 4096 bytes),
 * `deployUpload` a deployment's archive cap plus room for the multipart framing and its fields,
 * `socketFrame` a function socket's frame at its cap in base64, inside its JSON, `networkConnect`
 * the network routes' 4 KiB (spec §4.9: connect is 413 over 4 KiB), `vaultPush` a vault envelope at
 * its cap in base64 with the push's other fields, `vaultPull` a pull's 4 KiB, `webrtcEvent` a media server's
 * participant event's 4 KiB.
 */
export type BodyCapName =
  | "sqlImport"
  | "upload"
  | "forwarded"
  | "relayMessage"
  | "deployUpload"
  | "namespaceRestore"
  | "pubsubPublish"
  | "pubsubBatch"
  | "functionDeploy"
  | "functionInvoke"
  | "socketFrame"
  | "networkConnect"
  | "vaultPush"
  | "vaultPull"
  | "webrtcEvent"
export class BodyCap extends Context.Tag("portico/BodyCap")<BodyCap, BodyCapName>() {}

/**
 * The route reads its body as a stream (a file), not as a JSON payload: the listener hands it over
 * unread, and the document describes it with this content type and schema.
 */
export interface StreamedBodyFacts {
  readonly contentType: string
  readonly schema: Record<string, unknown>
  readonly description: string
}
export class StreamedBody extends Context.Tag("portico/StreamedBody")<StreamedBody, StreamedBodyFacts>() {}

/**
 * The fast lane answers the route inside the listener when it can (src/api/FastLane.ts); the name
 * picks the lane's implementation of it.
 */
export type LaneName =
  | "whoami"
  | "cache.put"
  | "cache.get"
  | "cache.delete"
  | "cache.mget"
  | "sql.query"
  | "sql.exec"
  | "db.query"
  | "internal.sqlite.query"
  | "internal.vault.share.put"
  | "internal.vault.share.get"
  | "vault.push"
  | "vault.pull"
  | "webrtc.turn"
export class FastLaneRoute extends Context.Tag("portico/FastLaneRoute")<FastLaneRoute, LaneName>() {}

/**
 * The route is a WebSocket: the server's `upgrade` listener finds it through the route index and
 * answers the handshake through the same gate and query schema as any request
 * (src/api/Upgrades.ts); the handler registered under the endpoint's `group.name` takes the
 * socket. A plain request to the route is the HttpApi handler's to answer.
 */
export class WebSocketRoute extends Context.Tag("portico/WebSocketRoute")<WebSocketRoute, true>() {}
