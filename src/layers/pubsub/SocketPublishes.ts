/**
 * A socket's own publishes (docs/pubsub.md "Publishing from a socket"): each text frame
 * `{"type":"publish","topic":..,"data_base64":..,"id"?:..}` is judged as `POST /v1/pubsub/publish`
 * judges a message (PubSub.ts), charged to the namespace's rate budget, and published in the order
 * the frames came; the client hears `ack` (with the message's position) or `error` for each, with
 * its `id`. A frame that is not one of these is an `error` frame; a client that keeps sending
 * them, or more publishes than can wait, is closed 1008.
 */
import { Effect, Either } from "effect"
import type { Principal } from "../../domain/Principal.js"
import type { PubSubRefused, PubSubService } from "./PubSub.js"

/** Refused frames a socket may send before it is closed. */
export const MAX_REFUSED_FRAMES = 100
/** Publishes of one socket waiting for the engine before it is closed. */
export const MAX_WAITING_PUBLISHES = 256

const ID_SHAPE = /^[\x21-\x7e]{1,64}$/

interface PublishFrame {
  readonly topic: string
  readonly data_base64: string
  readonly id: string | undefined
}

/** The frame as a publish, or why it is not one. */
const readFrame = (data: Buffer): Either.Either<PublishFrame, { readonly id: string | undefined; readonly error: string }> => {
  let value: unknown
  try {
    value = JSON.parse(data.toString("utf8"))
  } catch {
    return Either.left({ id: undefined, error: "a frame is a JSON object" })
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return Either.left({ id: undefined, error: "a frame is a JSON object" })
  const frame = value as Record<string, unknown>
  const id = typeof frame["id"] === "string" && ID_SHAPE.test(frame["id"]) ? frame["id"] : undefined
  if (frame["id"] !== undefined && id === undefined) return Either.left({ id: undefined, error: "id is 1-64 printable ASCII characters" })
  const unknown = Object.keys(frame).find((k) => k !== "type" && k !== "topic" && k !== "data_base64" && k !== "id")
  if (unknown !== undefined) return Either.left({ id, error: `unknown member ${JSON.stringify(unknown.slice(0, 40))}` })
  if (frame["type"] !== "publish") return Either.left({ id, error: 'type must be "publish" (subscriptions are fixed when the socket opens)' })
  if (typeof frame["topic"] !== "string" || typeof frame["data_base64"] !== "string") {
    return Either.left({ id, error: "topic and data_base64 are required strings" })
  }
  return Either.right({ topic: frame["topic"], data_base64: frame["data_base64"], id })
}

const errorFrame = (id: string | undefined, code: string, error: string, hint?: string) =>
  JSON.stringify({ type: "error", ...(id === undefined ? {} : { id }), code, error, ...(hint === undefined ? {} : { hint }) })

const refusedFrame = (id: string | undefined, refused: PubSubRefused) =>
  JSON.stringify({
    type: "error",
    ...(id === undefined ? {} : { id }),
    code: refused.code,
    error: refused.reason,
    ...(refused.hint === undefined ? {} : { hint: refused.hint }),
    ...(refused.retryAfterSeconds === undefined ? {} : { retry_after: refused.retryAfterSeconds })
  })

export const makeSocketPublisher = (socket: {
  readonly pubsub: PubSubService
  readonly caller: Principal
  readonly send: (frame: string) => void
  readonly close: (code: number, reason: string) => void
}) => {
  let refusedFrames = 0
  let waiting = 0
  let chain: Promise<void> = Promise.resolve()
  const refused = (text: string) => {
    socket.send(text)
    if (++refusedFrames > MAX_REFUSED_FRAMES) socket.close(1008, `more than ${MAX_REFUSED_FRAMES} refused frames`)
  }
  return (data: Buffer): void => {
    const frame = readFrame(data)
    if (Either.isLeft(frame)) return refused(errorFrame(frame.left.id, "VALIDATION_FAILED", frame.left.error))
    const { id, topic, data_base64 } = frame.right
    const rule = socket.pubsub.publishRefusal(socket.caller, { topic, data_base64 })
    if (rule !== undefined) return refused(refusedFrame(id, rule))
    if (++waiting > MAX_WAITING_PUBLISHES) return socket.close(1008, `more than ${MAX_WAITING_PUBLISHES} publishes waiting; wait for their acks`)
    const publish = socket.pubsub
      .charge(socket.caller.namespace, 1)
      .pipe(Effect.zipRight(socket.pubsub.publish(socket.caller, { topic, data_base64 })), Effect.either)
    // one after another, so the socket's publishes reach the topic in the order they were sent
    chain = chain.then(async () => {
      const result = await Effect.runPromise(publish)
      waiting--
      if (Either.isLeft(result)) return refused(refusedFrame(id, result.left))
      socket.send(JSON.stringify({ type: "ack", ...(id === undefined ? {} : { id }), topic, epoch: result.right.epoch, offset: result.right.offset }))
    })
  }
}
