/**
 * Publishing one `relay_push` delivery (spec §4.6 delivery rules): to the tenant's own relay
 * (its `base_url`, reached only through the guarded egress client, published to that server
 * only), or to the platform relay (`PORTICO_PUSH_RELAY_URL`): directly on a single node, fanned
 * out over the cluster's nodes through `/v1/internal/push/ntfy/<topic>` otherwise, succeeding when
 * at least one node accepted it. Never a fallback to any other host.
 */
import { Context, type Effect } from "effect"
import type { DeliveryOutcome } from "./Delivery.js"
import type { NtfyMessage } from "./NtfyClient.js"

/** The tenant's relay: its stored `relay_push` credential, or the legacy config's relay fields. */
export interface TenantRelay {
  /** Undefined: the credential names no server, so the platform relay is used (spec §2.6). */
  readonly baseUrl: string | undefined
  readonly authToken: string | undefined
}

export interface RelayPublisherService {
  /**
   * Publishes `message` to the device's registered `token` (a bare topic, or an endpoint URL
   * whose scheme and host must be the relay's). `tenant` undefined: the platform relay. Never
   * fails: a refused, unreachable or unconfigured relay is a `failed` outcome.
   */
  readonly publish: (namespace: string, tenant: TenantRelay | undefined, token: string, message: NtfyMessage) => Effect.Effect<DeliveryOutcome>
}

export class RelayPublisher extends Context.Tag("portico/RelayPublisher")<RelayPublisher, RelayPublisherService>() {}
