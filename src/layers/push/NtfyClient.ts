/**
 * Publishing to an ntfy server (`relay_push`), as ntfy's publish API takes it: `POST <base>/<topic>`
 * with the message as the body, `Title`, `Priority` and `Tags` headers, and
 * `Authorization: Bearer <token>` when the relay needs one. A device's registered token is either
 * a bare topic (published under the relay's base URL) or a full endpoint URL, which is posted to
 * verbatim once its scheme and host match the relay's.
 *
 * The fetch function is the caller's: a tenant-chosen `base_url` goes through the guarded egress
 * client, the operator's relay through global fetch. Redirects are never followed.
 */
import { Effect, Either, Option, Schema } from "effect"
import { type DeliveryOutcome, type FetchLike, delivered, failed, reasonOfThrown } from "./Delivery.js"

/** One path segment of ntfy's topic alphabet, at most 64 characters (spec section 8). */
export const RELAY_TOPIC = /^[-_A-Za-z0-9]{1,64}$/

export interface NtfyMessage {
  readonly body: string
  readonly title?: string
  /** Our two priorities: `high` is ntfy's `high` (4), `normal` its `default` (3). */
  readonly priority?: "high" | "normal"
  readonly tags?: ReadonlyArray<string>
}

export interface NtfyClientOptions {
  readonly fetch?: FetchLike
  /** Per publish; default 10 s. */
  readonly timeoutMs?: number
}

export interface NtfyClientService {
  /** Publishes to `url` (from `relayPublishUrl`); never fails, the outcome says what happened. */
  readonly publish: (url: string, message: NtfyMessage, authToken?: string) => Effect.Effect<DeliveryOutcome>
}

const withoutTrailingSlash = (url: string) => url.replace(/\/+$/, "")

/**
 * Where a registered relay token is published, or why it cannot be: a bare topic goes under
 * `baseUrl`; an endpoint URL is used verbatim when its scheme and host (with port) are the relay's
 * and its last path segment is a topic.
 */
export const relayPublishUrl = (baseUrl: string, token: string): Either.Either<string, string> => {
  if (RELAY_TOPIC.test(token)) return Either.right(withoutTrailingSlash(baseUrl) + "/" + token)
  let endpoint: URL
  let base: URL
  try {
    endpoint = new URL(token)
    base = new URL(baseUrl)
  } catch {
    return Either.left("the relay token is neither a topic nor an endpoint URL")
  }
  if (endpoint.protocol !== base.protocol || endpoint.host !== base.host) {
    return Either.left("the endpoint URL's scheme and host are not the relay's")
  }
  const topic = endpoint.pathname.split("/").pop() ?? ""
  if (!RELAY_TOPIC.test(topic) || endpoint.search !== "" || endpoint.hash !== "" || endpoint.username !== "" || endpoint.password !== "") {
    return Either.left("the endpoint URL does not end in a relay topic")
  }
  return Either.right(token)
}

/** HTTP header values are Latin-1; ntfy decodes RFC 2047 encoded words for anything else. */
export const headerValue = (value: string): string =>
  /^[\x20-\x7e]*$/.test(value) ? value : "=?UTF-8?B?" + Buffer.from(value, "utf8").toString("base64") + "?="

/** ntfy's answers: the published message (`{id, ...}`) or an error (`{code, http, error}`). */
const NtfyAnswer = Schema.parseJson(Schema.Struct({ id: Schema.optional(Schema.String), error: Schema.optional(Schema.String) }))
const decodeAnswer = Schema.decodeUnknownOption(NtfyAnswer)

export const makeNtfyClient = (options: NtfyClientOptions = {}): NtfyClientService => {
  const fetchFn: FetchLike = options.fetch ?? ((input, init) => fetch(input, init))
  const timeoutMs = options.timeoutMs ?? 10_000
  return {
    publish: (url, message, authToken) =>
      Effect.promise(async (): Promise<DeliveryOutcome> => {
        const headers: Record<string, string> = { "content-type": "text/plain; charset=utf-8" }
        if (message.title !== undefined && message.title !== "") headers["Title"] = headerValue(message.title)
        if (message.priority !== undefined) headers["Priority"] = message.priority === "high" ? "high" : "default"
        if (message.tags !== undefined && message.tags.length > 0) headers["Tags"] = headerValue(message.tags.join(","))
        if (authToken !== undefined && authToken !== "") headers["Authorization"] = "Bearer " + authToken
        const signal = AbortSignal.timeout(timeoutMs)
        try {
          const response = await fetchFn(url, { method: "POST", headers, body: message.body, redirect: "manual", signal })
          const text = await response.text()
          const answer = decodeAnswer(text)
          if (response.status === 200) return delivered(200, Option.getOrUndefined(answer)?.id)
          return failed(response.status, Option.getOrUndefined(answer)?.error ?? "HTTP" + response.status)
        } catch (error) {
          return failed(0, reasonOfThrown(error, signal))
        }
      })
  }
}
