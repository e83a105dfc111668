/**
 * The vault in the fast lane (src/api/FastLane.ts; docs/vault.md, "Speed"): the public push and
 * pull, and the guardian's share put and get that a push or pull calls on every other node.
 *
 * Why: a push through the HttpApi app paid for the request's path twice over, once on the front
 * and once per share on every other node, around work (a signature check, a split, a write)
 * that is the same either way. What stays the same: the gate (the lane's, the very same decision
 * in the same order), PeerGate's checks for the share routes (made by the lane: source, headers,
 * the MAC, the nonce spent), the endpoints' own schemas, the vault's and the guardian's rules
 * (the same calls the handlers make), the refusal encoder, and every answer's bytes: the
 * handlers (VaultHandlers.ts, InternalHandlers.ts) build theirs with the functions here.
 * test/e2e/vault.lane.test.ts sends the same calls to a gateway with the lane and one without
 * and compares the answers.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Exit, Option, type Runtime, Schema } from "effect"
import { fromRefusal, refusal } from "../../domain/Errors.js"
import type { GetOutcome, Guardian, PutOutcome, StoreFailed } from "../../layers/vault/Guardian.js"
import type { VaultService } from "../../layers/vault/Vault.js"
import type { Refused } from "../../layers/Refused.js"
import {
  Pulled,
  PullRequest,
  Pushed,
  PushRequest,
  SHARE_BYTES_TYPE,
  SHARE_ENVELOPE_HEADER,
  SHARE_FOUND_HEADER,
  ShareFound,
  ShareGetAnswer,
  ShareGetOrder,
  SharePutAnswer,
  SharePutHeaders
} from "../groups/VaultWire.js"
import { pulledWire, pushedWire } from "../handlers/VaultHandlers.js"
import type { LaneName } from "../RouteFacts.js"
import { type Answer, internalError, jsonPayload, ok, payloadDecoder, type PeerRoute, refused, type Route } from "./LaneAnswer.js"

/** A guardian whose store failed (a full disk): 503, which the calling node counts as this one failing. */
export const storeFailed = () => refusal("UNAVAILABLE", "this node's vault store failed", "retry shortly", 5)

const encodeFound = Schema.encodeSync(ShareFound)
const encodePutAnswer = Schema.encodeSync(SharePutAnswer)
const encodeGetAnswer = Schema.encodeSync(ShareGetAnswer)

/** A share found, as the get route answers it: its bytes, its facts in a header. */
const foundHeaders = (found: Extract<GetOutcome, { outcome: "found" }>) => ({
  "content-type": SHARE_BYTES_TYPE,
  [SHARE_FOUND_HEADER]: JSON.stringify(encodeFound({ version: found.version, threshold: found.threshold, digest: found.digest }))
})

/** The get route's answer through the app: the found share's bytes, or the outcome as the endpoint encodes it. */
export const shareGetResponse = (answer: GetOutcome): HttpServerResponse.HttpServerResponse | Exclude<GetOutcome, { outcome: "found" }> => {
  if (answer.outcome !== "found") return answer
  const { "content-type": contentType, ...headers } = foundHeaders(answer)
  return HttpServerResponse.uint8Array(answer.share, { contentType, headers })
}

/** A put's outcome once its write committed, or its store's failure, as the app answers either. */
const putAnswer = (outcome: PutOutcome | StoreFailed): Answer =>
  outcome.outcome === "store failed" ? refused(storeFailed()) : ok(JSON.stringify(encodePutAnswer(outcome)))

/** The guardian's share routes, for calls from the other nodes (PeerGate's checks made by the lane). */
export const vaultPeerRoutes = (guardian: Guardian, maxBodyBytes: number): Partial<Record<LaneName, PeerRoute>> => {
  const putOrder = payloadDecoder(SharePutHeaders)
  const getOrder = jsonPayload(maxBodyBytes)(ShareGetOrder)
  return {
    "internal.vault.share.put": {
      signs: "envelope",
      prepare: (envelope, body) => {
        const headers = putOrder({ [SHARE_ENVELOPE_HEADER]: envelope })
        if (headers === undefined) return undefined
        const offer = { ...headers[SHARE_ENVELOPE_HEADER], share: body }
        return () => (done) => guardian.putSoon(offer, false, (outcome) => done(putAnswer(outcome)))
      }
    },
    "internal.vault.share.get": {
      signs: "body",
      prepare: (text) => {
        const ask = getOrder(text)
        if (ask === undefined) return undefined
        return () => {
          let answer: GetOutcome
          try {
            answer = guardian.get(ask)
          } catch {
            return refused(storeFailed())
          }
          return answer.outcome === "found" ? { status: 200, body: answer.share, headers: foundHeaders(answer) } : ok(JSON.stringify(encodeGetAnswer(answer)))
        }
      }
    }
  }
}

/** The public push and pull: the vault's own calls, run in the gateway's runtime, answered once they end. */
export const vaultRoutes = (vault: VaultService, maxBodyBytes: number, runCallback: ReturnType<typeof Runtime.runCallback<never>>): Partial<Record<LaneName, Route>> => {
  const json = jsonPayload(maxBodyBytes)
  const pushPayload = json(PushRequest)
  const pullPayload = json(PullRequest)
  const encodePushed = Schema.encodeSync(Pushed)
  const encodePulled = Schema.encodeSync(Pulled)
  /** The vault's outcome as the app writes it: its JSON answer, its refusal, or a logged defect as 500. */
  const answerOf =
    <A,>(done: (answer: Answer) => void, text: (a: A) => string) =>
    (exit: Exit.Exit<A, Refused>): void => {
      if (Exit.isSuccess(exit)) return done(ok(text(exit.value)))
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure)) return done(refused(fromRefusal(failure.value)))
      runCallback(Effect.logError("request failed", Cause.squash(exit.cause)))
      done(internalError)
    }
  return {
    "vault.push": (text) => {
      const payload = pushPayload(text)
      if (payload === undefined) return undefined
      return (caller, _now, client) => (done) =>
        runCallback(vault.push(caller.namespace, client, payload), { onExit: answerOf(done, (pushed) => JSON.stringify(encodePushed(pushedWire(payload, pushed)))) })
    },
    "vault.pull": (text) => {
      const payload = pullPayload(text)
      if (payload === undefined) return undefined
      return (caller, _now, client) => (done) =>
        runCallback(vault.pull(caller.namespace, client, payload), {
          onExit: answerOf(done, (pulled) => JSON.stringify(encodePulled(pulledWire(payload, pulled))))
        })
    }
  }
}
