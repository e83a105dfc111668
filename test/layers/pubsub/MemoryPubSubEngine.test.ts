import { Effect, Layer } from "effect"
import { MemoryPubSubEngine } from "../../../src/layers/pubsub/MemoryPubSubEngine.js"
import { pubSubEngineSuite } from "./PubSubEngine.suite.js"

pubSubEngineSuite("MemoryPubSubEngine", {
  // one gateway: both "gateways" of the suite are the same engine, built once
  pair: Effect.map(
    Layer.build(MemoryPubSubEngine.layer({ history: { size: 5, maxAgeMs: 60_000 }, historyBytesPerNamespace: 1024 * 1024 })),
    (context) => [Layer.succeedContext(context), Layer.succeedContext(context)] as const
  )
})
