/**
 * The operator's telemetry stream (`GET /v1/operator/telemetry/stream`, spec §6.2): server-sent
 * events read with fetch, since EventSource cannot send `Authorization`. The typed client's method
 * for the route answers the whole body, which arrives only when the stream ends (100 s), so the
 * console reads the same route as a stream. Each `snapshot` is the cluster snapshot: this node's
 * figures (decoded with the route's NodeSnapshot schema) and each peer's, or why a peer is missing.
 * The stream ends after 100 s and is opened again, as the spec says a client does.
 */
import { Schema } from "effect"
import { NodeSnapshot } from "../src/api/groups/OperatorGroup.js"
import { type Refusal, RefusedError, refusalOf } from "./api.js"

export type Snapshot = typeof NodeSnapshot.Type

/** One snapshot of the cluster: each node's figures by node id, and the nodes that did not answer. */
export interface ClusterPoint {
  readonly at: number
  readonly nodes: ReadonlyMap<string, Snapshot>
  readonly unreachable: ReadonlyArray<{ readonly node: string; readonly error: string }>
}

const decodeNode = Schema.decodeUnknownSync(NodeSnapshot)

const pointOf = (json: string): ClusterPoint => {
  const body = JSON.parse(json) as { readonly peers?: ReadonlyArray<Record<string, unknown>> }
  const self = decodeNode(body)
  const nodes = new Map<string, Snapshot>([[self.node, self]])
  const unreachable: Array<{ node: string; error: string }> = []
  for (const peer of body.peers ?? []) {
    if (peer["reachable"] === true) {
      const snapshot = decodeNode(peer)
      nodes.set(snapshot.node, snapshot)
    } else unreachable.push({ node: String(peer["node"]), error: String(peer["error"]) })
  }
  return { at: self.at, nodes, unreachable }
}

/** Reads the stream until `signal` aborts, opening it again when it ends; each snapshot to `onPoint`. */
export const followTelemetry = async (
  token: string,
  intervalSeconds: number,
  signal: AbortSignal,
  onPoint: (point: ClusterPoint) => void,
  onTrouble: (refusal: Refusal | undefined) => void
) => {
  while (!signal.aborted) {
    try {
      const answer = await fetch(`/v1/operator/telemetry/stream?interval=${intervalSeconds}`, { headers: { authorization: `Bearer ${token}` }, signal })
      if (!answer.ok || answer.body === null) {
        const text = await answer.text()
        let refusal: Refusal = { error: `the telemetry stream was answered ${answer.status}`, code: "UNEXPECTED_ANSWER" }
        try {
          refusal = refusalOf(JSON.parse(text))
        } catch {
          // not the envelope
        }
        throw new RefusedError(refusal)
      }
      onTrouble(undefined)
      const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffered = ""
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buffered += value
        // events are separated by a blank line; comments (`: keepalive`) carry nothing
        let end = buffered.indexOf("\n\n")
        while (end >= 0) {
          const lines = buffered.slice(0, end).split("\n")
          buffered = buffered.slice(end + 2)
          end = buffered.indexOf("\n\n")
          const event = lines.find((l) => l.startsWith("event:"))?.slice(6).trim()
          const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n")
          if (event === "snapshot" && data !== "") onPoint(pointOf(data))
          if (event === "error") onTrouble({ error: "the gateway could not assemble a snapshot", code: "UNAVAILABLE", hint: data })
        }
      }
    } catch (failure) {
      if (signal.aborted) return
      onTrouble(refusalOf(failure))
      // a refused or broken stream is tried again, not hammered
      await new Promise((resolve) => setTimeout(resolve, 5_000))
    }
  }
}
