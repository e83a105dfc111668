/**
 * The one client of the node-to-node routes (spec §4.10), derived from the internal group's
 * endpoints (src/api/groups/InternalGroup.ts): a call names its endpoint, and its path and the
 * type of its payload come from there, so a route's path is written once. The payload is encoded
 * with the endpoint's own schema and sent as canonical JSON, signed for the receiving node by
 * Coordination; PeerGate alone verifies it there (src/api/gate/GatesLive.ts).
 */
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { type Duration, Effect, Option, Schema } from "effect"
import { InternalGroup, type UpdateEnvelope } from "../../api/groups/InternalGroup.js"
import type { CoordinationService, PeerAnswer, PeerUnreachable } from "./Coordination.js"

type Endpoint = HttpApiGroup.HttpApiGroup.Endpoints<typeof InternalGroup>
/** The internal routes, by their endpoint's name. */
export type InternalRoute = HttpApiEndpoint.HttpApiEndpoint.Name<Endpoint>
/** What endpoint `N` takes, as its handler decodes it. */
export type InternalPayload<N extends InternalRoute> = HttpApiEndpoint.HttpApiEndpoint.Payload<HttpApiEndpoint.HttpApiEndpoint.WithName<Endpoint, N>>

/** The group's endpoints by name, with what a call needs of each. */
const byName = new Map(
  Object.values(InternalGroup.endpoints).map((e) => {
    const payload = e.payloadSchema as Option.Option<Schema.Schema<unknown, unknown>>
    return [e.name as string, { path: e.path as string, payload }]
  })
)

/** Endpoint `name` of the group (the type admits only its names: a miss is a defect). */
const endpointOf = (name: InternalRoute) => {
  const found = byName.get(name)
  if (found === undefined) throw new Error(`no internal endpoint ${name}`)
  return found
}

/** The path of internal endpoint `name`, as the group declares it. */
export const internalPath = (name: InternalRoute): string => endpointOf(name).path

/** `payload` in its wire form: a typed payload that does not encode is a defect of the caller. */
const encoded = <N extends InternalRoute>(name: N, payload: InternalPayload<N>): Effect.Effect<unknown> =>
  Option.match(endpointOf(name).payload, {
    onNone: () => Effect.succeed(payload),
    onSome: (schema) => Effect.orDie(Schema.encodeUnknown(schema)(payload))
  })

export interface InternalClient {
  /** Calls endpoint `name` of node `nodeId` (from `PORTICO_PEERS`); any HTTP answer as it came. */
  readonly call: <N extends InternalRoute>(
    nodeId: string,
    name: N,
    payload: InternalPayload<N>,
    timeout: Duration.DurationInput
  ) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /** As `call`, for an endpoint that answers bytes: a 200's body streamed into `dest`, at most `maxBytes`. */
  readonly callToFile: <N extends InternalRoute>(
    nodeId: string,
    name: N,
    payload: InternalPayload<N>,
    timeout: Duration.DurationInput,
    dest: string,
    maxBytes: number
  ) => Effect.Effect<PeerAnswer, PeerUnreachable>
  /** A forwarded deployment update: the multipart `body` streamed, its envelope signed. */
  readonly update: (
    nodeId: string,
    envelope: typeof UpdateEnvelope.Type,
    contentType: string,
    body: AsyncIterable<Uint8Array>,
    timeout: Duration.DurationInput
  ) => Effect.Effect<PeerAnswer, PeerUnreachable>
}

export const internalClient = (coordination: CoordinationService): InternalClient => ({
  call: (nodeId, name, payload, timeout) =>
    Effect.flatMap(encoded(name, payload), (wire) => coordination.post(nodeId, internalPath(name), wire, timeout)),
  callToFile: (nodeId, name, payload, timeout, dest, maxBytes) =>
    Effect.flatMap(encoded(name, payload), (wire) => coordination.postToFile(nodeId, internalPath(name), wire, timeout, dest, maxBytes)),
  update: (nodeId, envelope, contentType, body, timeout) =>
    coordination.postStream(nodeId, internalPath("deploymentUpdate"), envelope, contentType, body, timeout)
})
