/**
 * Expo's push API (`legacy_push`): `POST <base>/--/api/v2/push/send` with a JSON array of at most
 * 100 messages and `Authorization: Bearer <access token>` when the project requires one; the
 * answer's `data` holds one ticket per message, in order. A ticket with
 * `details.error: DeviceNotRegistered` is `unregistered`; any other ticket error, a refused
 * request (`errors`), a timeout or a 5xx fails the messages of that batch only.
 *
 * Takes a fetch function like the ntfy client; PORTICO_EXPO_URL overrides the base for tests.
 */
import { Effect, Either, Schema } from "effect"
import { type DeliveryOutcome, type FetchLike, Reasons, delivered, failed, reasonOfThrown, unregistered } from "./Delivery.js"
import { stringifyExactJson } from "../../domain/ExactJson.js"

export const EXPO_URL = "https://exp.host"
/** Expo takes at most 100 messages per request. */
export const EXPO_MAX_BATCH = 100
/** Expo asks senders to keep at most six requests open at once. */
const EXPO_CONCURRENCY = 6

export interface ExpoMessage {
  /** `ExponentPushToken[...]` or `ExpoPushToken[...]`. */
  readonly to: string
  readonly title?: string
  readonly body?: string
  readonly data?: Readonly<Record<string, unknown>>
  /** `default` or the name of a sound bundled with the app. */
  readonly sound?: string
  readonly badge?: number
  readonly priority?: "default" | "normal" | "high"
  readonly channelId?: string
}

export interface ExpoClientOptions {
  readonly fetch?: FetchLike
  readonly baseUrl?: string
  /** Per request; default 10 s. */
  readonly timeoutMs?: number
}

export interface ExpoClientService {
  /** One outcome per message, in order; never fails. */
  readonly send: (accessToken: string | undefined, messages: ReadonlyArray<ExpoMessage>) => Effect.Effect<ReadonlyArray<DeliveryOutcome>>
}

const Ticket = Schema.Union(
  Schema.Struct({ status: Schema.Literal("ok"), id: Schema.String }),
  Schema.Struct({
    status: Schema.Literal("error"),
    message: Schema.optional(Schema.String),
    details: Schema.optional(Schema.Struct({ error: Schema.optional(Schema.String) }))
  })
)
const ExpoAnswer = Schema.parseJson(Schema.Struct({
  data: Schema.optional(Schema.Array(Ticket)),
  errors: Schema.optional(Schema.Array(Schema.Struct({ code: Schema.String, message: Schema.optional(Schema.String) })))
}))
const decodeAnswer = Schema.decodeUnknownEither(ExpoAnswer)

export const makeExpoClient = (options: ExpoClientOptions = {}): ExpoClientService => {
  const fetchFn: FetchLike = options.fetch ?? ((input, init) => fetch(input, init))
  const url = (options.baseUrl ?? EXPO_URL).replace(/\/+$/, "") + "/--/api/v2/push/send"
  const timeoutMs = options.timeoutMs ?? 10_000

  const sendBatch = async (accessToken: string | undefined, batch: ReadonlyArray<ExpoMessage>): Promise<ReadonlyArray<DeliveryOutcome>> => {
    const all = (outcome: DeliveryOutcome) => batch.map(() => outcome)
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" }
    if (accessToken !== undefined && accessToken !== "") headers["authorization"] = "Bearer " + accessToken
    const signal = AbortSignal.timeout(timeoutMs)
    try {
      const response = await fetchFn(url, { method: "POST", headers, body: stringifyExactJson(batch), redirect: "manual", signal })
      const answer = decodeAnswer(await response.text())
      if (Either.isLeft(answer)) return all(failed(response.status, response.status === 200 ? Reasons.badAnswer : "HTTP" + response.status))
      const { data, errors } = answer.right
      if (response.status !== 200 || data === undefined) {
        // a 200 without tickets is an answer we cannot read, not a refusal
        return all(failed(response.status, errors?.[0]?.code ?? (response.status === 200 ? Reasons.badAnswer : "HTTP" + response.status)))
      }
      if (data.length !== batch.length) return all(failed(response.status, Reasons.badAnswer))
      return data.map((ticket) => {
        if (ticket.status === "ok") return delivered(200, ticket.id)
        const reason = ticket.details?.error ?? "TicketError"
        return reason === "DeviceNotRegistered" ? unregistered(200, reason) : failed(200, reason)
      })
    } catch (error) {
      return all(failed(0, reasonOfThrown(error, signal)))
    }
  }

  return {
    send: (accessToken, messages) => {
      const batches: Array<ReadonlyArray<ExpoMessage>> = []
      for (let i = 0; i < messages.length; i += EXPO_MAX_BATCH) batches.push(messages.slice(i, i + EXPO_MAX_BATCH))
      return Effect.forEach(batches, (batch) => Effect.promise(() => sendBatch(accessToken, batch)), { concurrency: EXPO_CONCURRENCY }).pipe(
        Effect.map((outcomes) => outcomes.flat())
      )
    }
  }
}
