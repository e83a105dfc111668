/**
 * Sending push (spec §2.6, §4.6): to every registered device of a user, or to a topic's one
 * token, answered with the per-device envelope (src/domain/PushSend.ts). docs/push.md, "Sending",
 * records the decisions.
 *
 * - Every provider at once: the user's APNs devices go through the one ApnsClient of this gateway
 *   (`sendAll`, one connection per key, one provider token), Expo's in batches of 100, relay
 *   devices through the RelayPublisher (tenant relay through the egress guard, or the platform
 *   relay), all concurrently. A provider that times out or answers 5xx is that device's failed
 *   result, never a failure of the send.
 * - Credentials come from the 30-second cache (CredentialCache.ts); a provider with none is a
 *   no-op: its devices are listed with reason `NotConfigured`, nothing is sent.
 * - A device the provider reports gone (APNs 410 / BadDeviceToken, Expo DeviceNotRegistered) is
 *   answered `unregistered: true` and its registration deleted (while it still holds that token).
 *   A topic is not deleted: spec §3.3 ends a topic only by DELETE, replacement or expiry.
 * - Refused before anything is sent: a message whose APNs payload is over 4096 bytes (5120 for
 *   VoIP) when an APNs device is among those targeted, a malformed topic id (400), a namespace with
 *   no push configured (503). The topic route is also 404 for an unknown or expired topic and 502
 *   when the provider refused its one delivery (`providerRefused`).
 * - The function host's calls (`pushSendV2`, `pushSendTopic`) take the message as JSON text (at
 *   most 16 KiB) and answer none where the host returns 0 (invalid input, no push configured, the
 *   registry not answering); an unknown or expired topic is the `TopicNotFound` envelope.
 */
import { Context, Duration, Effect, Either, Layer, Option, Schema } from "effect"
import type { PushSendCode } from "../../domain/Errors.js"
import type { PushProvider } from "../../domain/PushProviders.js"
import {
  type DeviceOutcome,
  envelopeOf,
  isSendTopicId,
  MAX_PUSH_MESSAGE_BYTES,
  providerRefused,
  providerSelected,
  SendMessage,
  type SendEnvelope,
  SendReasons,
  topicNotFoundEnvelope
} from "../../domain/PushSend.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { type Refused, refuse } from "../Refused.js"
import { ApnsClient, type ApnsClientService, type ApnsCredential, apnsPayloadFits, type ApnsMessage } from "./ApnsClient.js"
import { type CredentialCacheService, makeCredentialCache, type SendCredentials } from "./CredentialCache.js"
import type { DeliveryOutcome } from "./Delivery.js"
import { type ExpoClientService, makeExpoClient } from "./ExpoClient.js"
import { apnsMessageOf, apnsPayloadOf, expoMessageOf, ntfyMessageOf, type OutgoingPush } from "./Messages.js"
import { PushStore, type PushStoreService } from "./PushStore.js"
import { RelayPublisher, type RelayPublisherService } from "./RelayPublisher.js"
import { Membership } from "../cluster/Membership.js"
import { platformRelayReachable } from "./RelayPublisherLive.js"
import { RelayPublisherTest } from "./RelayPublisherLive.js"

export type PushSendRefused = Refused<PushSendCode>

export interface PushSenderService {
  /** `POST /v1/push/send`: every registered device of `userId` in the namespace. */
  readonly sendToUser: (namespace: string, userId: string, message: SendMessage) => Effect.Effect<SendEnvelope, PushSendRefused | StoreError>
  /** `POST /v1/push/topics/send`: 400 malformed id, 404 unknown or expired, 502 refused, 503 not configured. */
  readonly sendToTopic: (namespace: string, topicId: string, message: SendMessage) => Effect.Effect<SendEnvelope, PushSendRefused | StoreError>
  /** The function host's `push_send_v2`: none where the host returns 0. */
  readonly pushSendV2: (namespace: string, userId: string, messageJson: string) => Effect.Effect<Option.Option<SendEnvelope>>
  /** The function host's `push_send_topic`: none where the host returns 0; an unknown topic is the TopicNotFound envelope. */
  readonly pushSendTopic: (namespace: string, topicId: string, messageJson: string) => Effect.Effect<Option.Option<SendEnvelope>>
}

/** One delivery to make: a user's registration, or a topic's token. */
interface Target {
  readonly deviceId?: string
  readonly provider: PushProvider
  readonly token: string
}

export interface PushSenderDeps {
  readonly store: PushStoreService
  readonly credentials: CredentialCacheService
  readonly apns: ApnsClientService
  readonly expo: ExpoClientService
  readonly relay: RelayPublisherService
  /** Relay publishes in flight at once for one send (each is one HTTP request). */
  readonly relayConcurrency?: number
}

export const outgoingOf = (message: SendMessage): OutgoingPush => ({
  title: message.title,
  body: message.body,
  ...(message.channel === undefined ? {} : { channel: message.channel }),
  ...(message.priority === undefined ? {} : { priority: message.priority }),
  ...(message.badge === undefined ? {} : { badge: message.badge }),
  ...(message.sound === undefined ? {} : { sound: message.sound }),
  ...(message.data === undefined ? {} : { data: message.data }),
  ...(message.message_id === undefined ? {} : { messageId: message.message_id })
})

const decodeMessage = Schema.decodeUnknownEither(Schema.parseJson(SendMessage))
const USER_ID = /^[\x21-\x7e]{1,512}$/

export const makePushSender = (deps: PushSenderDeps): PushSenderService => {
  const { store, credentials, apns, expo, relay } = deps
  const relayConcurrency = deps.relayConcurrency ?? 64

  const skipped = (t: Target): DeviceOutcome => ({ deviceId: t.deviceId, provider: t.provider, outcome: "skipped", status: 0, reason: SendReasons.notConfigured })
  const outcomeOf = (t: Target, d: DeliveryOutcome): DeviceOutcome => ({ deviceId: t.deviceId, provider: t.provider, outcome: d.outcome, status: d.status, reason: d.reason })

  /** APNs for `targets` with one credential: one payload text, one connection, one provider token. */
  const viaApns = (credential: ApnsCredential | undefined, targets: ReadonlyArray<Target>, push: OutgoingPush, voip: boolean) => {
    if (targets.length === 0) return Effect.succeed([])
    if (credential === undefined) return Effect.succeed(targets.map(skipped))
    const first = apnsMessageOf(push, targets[0]!.token, voip)
    const messages: Array<ApnsMessage> = targets.map((t) => ({ ...first, deviceToken: t.token }))
    return Effect.map(apns.sendAll(credential, messages), (outcomes) => targets.map((t, i) => outcomeOf(t, outcomes[i]!)))
  }

  const viaExpo = (token: string | undefined, targets: ReadonlyArray<Target>, push: OutgoingPush) => {
    if (targets.length === 0) return Effect.succeed([])
    if (token === undefined) return Effect.succeed(targets.map(skipped))
    return Effect.map(expo.send(token, targets.map((t) => expoMessageOf(push, t.token))), (outcomes) => targets.map((t, i) => outcomeOf(t, outcomes[i]!)))
  }

  const viaRelay = (namespace: string, creds: SendCredentials, targets: ReadonlyArray<Target>, push: OutgoingPush) => {
    if (targets.length === 0) return Effect.succeed([])
    if (!creds.relayConfigured) return Effect.succeed(targets.map(skipped))
    const message = ntfyMessageOf(push)
    return Effect.forEach(targets, (t) => Effect.map(relay.publish(namespace, creds.relay, t.token, message), (d) => outcomeOf(t, d)), {
      concurrency: relayConcurrency
    })
  }

  /** Every target on its provider, all providers at once; outcomes in the targets' order. */
  const deliver = (namespace: string, creds: SendCredentials, targets: ReadonlyArray<Target>, push: OutgoingPush) =>
    Effect.gen(function* () {
      const of = (provider: PushProvider) => targets.filter((t) => t.provider === provider)
      const groups = [of("ios_push"), of("ios_voip_push"), of("legacy_push"), of("relay_push")] as const
      const answered = yield* Effect.all(
        [
          viaApns(creds.apns, groups[0], push, false),
          viaApns(creds.voip, groups[1], push, true),
          viaExpo(creds.expoToken, groups[2], push),
          viaRelay(namespace, creds, groups[3], push)
        ],
        { concurrency: "unbounded" }
      )
      const byTarget = new Map<Target, DeviceOutcome>()
      groups.forEach((group, g) => group.forEach((t, i) => byTarget.set(t, answered[g]![i]!)))
      return targets.map((t) => byTarget.get(t)!)
    })

  /** The namespace's credentials, or 503 when push is not configured there at all. */
  const configured = (namespace: string) =>
    Effect.filterOrFail(
      credentials.get(namespace),
      (creds) => creds.configured,
      () =>
        refuse("PUSH_NOT_CONFIGURED", `push is not configured in namespace ${namespace}`, "store a credential: PUT /v1/namespace/push-credentials/{provider}")
    )

  /** 400 before anything is sent when an APNs device is targeted and the payload is over APNs' limit. */
  const payloadFits = (targets: ReadonlyArray<Target>, push: OutgoingPush): Effect.Effect<void, PushSendRefused> => {
    const apnsTargets = targets.filter((t) => t.provider === "ios_push" || t.provider === "ios_voip_push")
    if (apnsTargets.length === 0) return Effect.void
    const voipOnly = apnsTargets.every((t) => t.provider === "ios_voip_push")
    return apnsPayloadFits(apnsPayloadOf(push), voipOnly)
      ? Effect.void
      : Effect.fail(
          refuse(
            "VALIDATION_FAILED",
            `the message is over APNs' ${voipOnly ? 5120 : 4096} bytes as an APNs payload`,
            "shorten title, body or data; nothing was sent"
          )
        )
  }

  const sendToUser: PushSenderService["sendToUser"] = (namespace, userId, message) =>
    Effect.gen(function* () {
      const creds = yield* configured(namespace)
      const devices = yield* store.deliveryTargets(namespace, userId)
      const targets: Array<Target> = devices
        .filter((d) => providerSelected(message, d.provider))
        .map((d) => ({ deviceId: d.deviceId, provider: d.provider, token: d.token }))
      if (targets.length === 0) return envelopeOf([])
      const push = outgoingOf(message)
      yield* payloadFits(targets, push)
      const outcomes = yield* deliver(namespace, creds, targets, push)
      // the provider said these tokens are gone: their registrations go (unless renewed meanwhile)
      const gone = targets.filter((_, i) => outcomes[i]!.outcome === "unregistered")
      if (gone.length > 0) {
        yield* Effect.forEach(
          gone,
          (t) =>
            Effect.catchAll(store.dropDeviceToken(namespace, userId, t.deviceId!, t.token), (e) =>
              Effect.logWarning("push: an unregistered device's registration was not deleted", { namespace, reason: e.reason, detail: e.detail })
            ),
          { concurrency: 16, discard: true }
        )
      }
      return envelopeOf(outcomes)
    })

  type TopicSent = { readonly found: false } | { readonly found: true; readonly envelope: SendEnvelope; readonly refused: DeviceOutcome | undefined }

  const topicSend = (namespace: string, topicId: string, message: SendMessage): Effect.Effect<TopicSent, PushSendRefused | StoreError> =>
    Effect.gen(function* () {
      if (!isSendTopicId(topicId)) return yield* refuse("VALIDATION_FAILED", "topic_id: must be 64 lowercase hex characters", "the topic id is the lowercase hex SHA-256 of the topic secret's bytes")
      const creds = yield* configured(namespace)
      const topic = yield* store.topic(namespace, topicId)
      if (Option.isNone(topic)) return { found: false } as const
      if (!providerSelected(message, topic.value.provider)) return { found: true, envelope: envelopeOf([]), refused: undefined } as const
      const targets = [{ provider: topic.value.provider, token: topic.value.token }]
      const push = outgoingOf(message)
      yield* payloadFits(targets, push)
      const outcomes = yield* deliver(namespace, creds, targets, push)
      return { found: true, envelope: envelopeOf(outcomes), refused: outcomes.find(providerRefused) } as const
    })

  const sendToTopic: PushSenderService["sendToTopic"] = (namespace, topicId, message) =>
    Effect.flatMap(topicSend(namespace, topicId, message), (sent): Effect.Effect<SendEnvelope, PushSendRefused> => {
      if (!sent.found) return Effect.fail(refuse("NOT_FOUND", "no live topic with this id in this namespace", "topics expire; the device registers its secret again"))
      if (sent.refused !== undefined) {
        const { provider, status, reason } = sent.refused
        return Effect.fail(refuse("PUSH_PROVIDER_REFUSED", `${provider} refused the notification: ${status} ${reason ?? ""}`.trim()))
      }
      return Effect.succeed(sent.envelope)
    })

  /** The host's message: JSON text within 16 KiB, decoded by the same schema as the routes'. */
  const hostMessage = (messageJson: string): Option.Option<SendMessage> =>
    Buffer.byteLength(messageJson, "utf8") > MAX_PUSH_MESSAGE_BYTES ? Option.none() : Either.getRight(decodeMessage(messageJson))

  /** A refusal or an unanswered registry as the host's 0, logged when it is the registry. */
  const asHostZero = (e: PushSendRefused | StoreError) =>
    e._tag === "StoreError"
      ? Effect.as(Effect.logWarning("push: a function's send found the registry unavailable", { reason: e.reason, detail: e.detail }), Option.none<SendEnvelope>())
      : Effect.succeed(Option.none<SendEnvelope>())

  return {
    sendToUser,
    sendToTopic,
    pushSendV2: (namespace, userId, messageJson) =>
      Option.match(hostMessage(messageJson), {
        onNone: () => Effect.succeed(Option.none()),
        onSome: (message) =>
          namespace === "" || !USER_ID.test(userId)
            ? Effect.succeed(Option.none())
            : Effect.catchAll(Effect.map(sendToUser(namespace, userId, message), Option.some), asHostZero)
      }),
    pushSendTopic: (namespace, topicId, messageJson) =>
      Option.match(hostMessage(messageJson), {
        onNone: () => Effect.succeed(Option.none()),
        onSome: (message) =>
          namespace === ""
            ? Effect.succeed(Option.none())
            : Effect.catchAll(
                // a refused delivery is the envelope's result here, not a failure
                Effect.map(topicSend(namespace, topicId, message), (sent) => Option.some(sent.found ? sent.envelope : topicNotFoundEnvelope)),
                asHostZero
              )
      })
  }
}

export class PushSender extends Context.Tag("portico/PushSender")<PushSender, PushSenderService>() {
  /** Over PushStore, this gateway's ApnsClient and RelayPublisher; Expo at PORTICO_EXPO_URL or Expo's host. */
  static readonly Live = Layer.effect(
    PushSender,
    Effect.gen(function* () {
      const settings = yield* PorticoConfig
      const store = yield* PushStore
      // a node without a relay of its own still delivers relay_push through its peers' relays
      const credentials = yield* makeCredentialCache(store, {
        platformRelay: platformRelayReachable(settings, yield* Membership),
        timeToLive: Duration.seconds(settings.pushCredentialCacheSeconds)
      })
      return makePushSender({
        store,
        credentials,
        apns: yield* ApnsClient,
        expo: makeExpoClient(settings.push.expoUrl === undefined ? {} : { baseUrl: settings.push.expoUrl }),
        relay: yield* RelayPublisher
      })
    })
  )

  /**
   * The gateway's one APNs client: PORTICO_APNS_URL for both environments when set (test setups),
   * Apple's hosts otherwise; its connections close with the gateway.
   */
  static readonly ApnsLive = Layer.unwrapEffect(
    Effect.map(PorticoConfig, (settings) =>
      ApnsClient.layer(settings.push.apnsUrl === undefined ? {} : { productionUrl: settings.push.apnsUrl, sandboxUrl: settings.push.apnsUrl })
    )
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    PushSender.Live.pipe(Layer.provide(Layer.mergeAll(ApnsClient.Test, PorticoConfig.Test, PushStore.Test, RelayPublisherTest, Membership.Test)))
  )
}
