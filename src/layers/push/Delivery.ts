/**
 * What one provider request did for one device: the provider clients (APNs, ntfy, Expo) answer
 * every device with one of these and never fail, so a timeout or a 5xx at one device neither
 * throws nor holds up the others. The send routes turn these into the per-device envelope of
 * spec 2.6 (`status`, `reason`, `unregistered`).
 */
import { UNREADABLE_ANSWER } from "../../domain/PushSend.js"

export type DeliveryKind = "ok" | "unregistered" | "failed"

export interface DeliveryOutcome {
  readonly outcome: DeliveryKind
  /** The provider's HTTP status for this device's request; 0 when there was no answer. */
  readonly status: number
  /** The provider's reason string (APNs `reason`, Expo `details.error`, ntfy `error`), or ours. */
  readonly reason?: string
  /** The provider's id for the accepted message (APNs `apns-id`, Expo ticket id, ntfy message id). */
  readonly providerId?: string
}

export const delivered = (status: number, providerId?: string): DeliveryOutcome =>
  providerId === undefined ? { outcome: "ok", status } : { outcome: "ok", status, providerId }

export const unregistered = (status: number, reason: string): DeliveryOutcome => ({ outcome: "unregistered", status, reason })

export const failed = (status: number, reason: string): DeliveryOutcome => ({ outcome: "failed", status, reason })

/** Reasons of our own, for answers that never came or requests we refused to send. */
export const Reasons = {
  timeout: "Timeout",
  connection: "ConnectionFailed",
  payloadTooLarge: "PayloadTooLarge",
  badDeviceToken: "BadDeviceToken",
  badProviderKey: "InvalidProviderKey",
  badAnswer: UNREADABLE_ANSWER
} as const

/**
 * What a fetch-like function rejects with when it knows why it did not send (the guarded egress
 * client's refusals): the clients report `reason` instead of a bare `ConnectionFailed`.
 */
export class FetchRefused extends Error {
  constructor(readonly reason: string, detail: string) {
    super(detail)
    this.name = "FetchRefused"
  }
}

/** The reason for a fetch that threw: our deadline, a known refusal, or a connection failure. */
export const reasonOfThrown = (error: unknown, deadline: AbortSignal): string =>
  deadline.aborted ? Reasons.timeout : error instanceof FetchRefused ? error.reason : Reasons.connection

/**
 * A fetch-like function: the ntfy and Expo clients take one, so a tenant-chosen host can go
 * through the guarded egress client while the operator's own addresses use global fetch.
 */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>
