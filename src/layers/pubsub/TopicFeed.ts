/**
 * One topic of one socket: what reaches the client, in offset order, with nothing skipped silently
 * (docs/pubsub.md "Delivery"). Deliveries come from the engine; the feed sends each exactly once,
 * and when it sees a hole (an offset past the next one, a new epoch, the engine's word that it may
 * have lost messages) it asks history for what is missing before sending anything newer. What
 * history cannot fill is told to the client as a `gap` frame, then delivery goes on.
 *
 * Until `open` the feed only queues (the socket is subscribed before its 101, so nothing published
 * after the open is missed, and the client hears it after the `subscribed` frame).
 */
import type { Delivery, HistoryAnswer, Position } from "./PubSubEngine.js"

export interface FeedOutput {
  /** Sends a frame (text, or its UTF-8 bytes) to the client. */
  readonly send: (frame: string | Buffer) => void
  /** Asks history for what follows `after`; undefined when the engine did not answer. */
  readonly history: (after: Position) => Promise<HistoryAnswer | undefined>
}

/**
 * A delivery's frame as bytes, made once for every socket it goes to: the engine hands each
 * delivery to all its listeners in turn, so remembering the last one is enough.
 */
let lastDelivery: Delivery | undefined
let lastBytes: Buffer = Buffer.alloc(0)
const bytesOf = (delivery: Delivery): Buffer => {
  if (delivery !== lastDelivery) {
    lastDelivery = delivery
    lastBytes = Buffer.from(delivery.frame)
  }
  return lastBytes
}

export type GapReason = "history-exceeded" | "epoch-changed" | "engine-interrupted"

const gapHints: Readonly<Record<GapReason, string>> = {
  "history-exceeded": "messages before the next one are older than the topic's history keeps; read the state you need again",
  "epoch-changed": "the topic's sequence started again (its state expired or the engine lost it); offsets restart at 1",
  "engine-interrupted": "the engine was unreachable; messages published meanwhile may not reach this socket"
}

export const gapFrame = (topic: string, reason: GapReason, position: Position | undefined): string =>
  JSON.stringify({
    type: "gap",
    topic,
    reason,
    hint: gapHints[reason],
    ...(position === undefined ? {} : { epoch: position.epoch, offset: position.offset })
  })

export class TopicFeed {
  /** The last delivery sent to the client; the subscription's position until one is. */
  private at: Position
  private queue: Array<Delivery> = []
  private filling = false
  private opened = false

  constructor(
    readonly topic: string,
    start: Position,
    private readonly out: FeedOutput
  ) {
    this.at = start
  }

  /** Where the client stands on this topic. */
  get position(): Position {
    return this.at
  }

  /** Resumes from where a reconnecting client stood: history fills from there before anything newer. */
  resumeFrom(point: Position): void {
    this.at = point
  }

  /** Starts sending: first what history holds after the position (when resuming), then the queue. */
  open(resuming: boolean): void {
    this.opened = true
    if (resuming) void this.fill(undefined)
    else this.drain()
  }

  deliver(delivery: Delivery): void {
    if (!this.opened || this.filling) {
      this.queue.push(delivery)
      return
    }
    this.offer(delivery)
  }

  /** The engine may have lost messages: the client is told, and the next delivery checks history. */
  interrupted(): void {
    if (!this.opened) return
    this.out.send(gapFrame(this.topic, "engine-interrupted", this.at))
  }

  private offer(delivery: Delivery): void {
    const sameEpoch = delivery.epoch === this.at.epoch
    if (sameEpoch && delivery.offset <= this.at.offset) return
    if (sameEpoch && delivery.offset === this.at.offset + 1) {
      this.sendOne(delivery)
      return
    }
    // a hole: hold this and what follows until history has filled what it can
    this.queue.unshift(delivery)
    void this.fill(delivery)
  }

  private sendOne(delivery: Delivery): void {
    this.at = { epoch: delivery.epoch, offset: delivery.offset }
    this.out.send(bytesOf(delivery))
  }

  private async fill(next: Delivery | undefined): Promise<void> {
    this.filling = true
    try {
      const answer = await this.out.history(this.at)
      if (answer !== undefined && answer.complete) {
        for (const d of answer.deliveries) if (d.epoch === this.at.epoch && d.offset === this.at.offset + 1) this.sendOne(d)
      } else {
        const reason: GapReason =
          answer === undefined ? "engine-interrupted" : answer.position.epoch !== this.at.epoch ? "epoch-changed" : "history-exceeded"
        // the client learns where the topic stands; delivery goes on from the first message it can have
        const from = next ?? this.queue[0]
        this.out.send(gapFrame(this.topic, reason, answer?.position))
        if (from !== undefined) this.at = { epoch: from.epoch, offset: from.offset - 1 }
        else if (answer !== undefined) this.at = answer.position
      }
    } finally {
      this.filling = false
      this.drain()
    }
  }

  private drain(): void {
    const queued = this.queue
    this.queue = []
    for (let i = 0; i < queued.length; i++) {
      if (this.filling) {
        // a hole in the queue started another fill: keep the rest behind it
        this.queue.push(...queued.slice(i))
        return
      }
      this.offer(queued[i]!)
    }
  }
}
