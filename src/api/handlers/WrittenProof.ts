/**
 * A request's `device_proof` with the source text of its `iat` (DeviceProof.WrittenProof): the
 * decoded payload has lost how the number was written, the body's text has not. The body was
 * read and parsed strictly before the handler ran, so its text is at hand.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { WrittenProof } from "../../domain/DeviceProof.js"
import { memberSource } from "../../domain/StrictJson.js"

export const writtenProof = (proof: unknown): Effect.Effect<unknown, never, HttpServerRequest.HttpServerRequest> =>
  // no proof stays no proof: the services answer DEVICE_PROOF_REQUIRED for it
  proof === undefined || proof === null
    ? Effect.succeed(proof)
    : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(Effect.orElseSucceed(request.text, () => ""), (text) => {
          const source = memberSource(text, "device_proof")
          return new WrittenProof(proof, source === undefined ? undefined : memberSource(source, "iat"))
        })
      )
