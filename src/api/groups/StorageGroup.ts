/**
 * Content storage (spec §2.4, §4.4). Field names the spec gives are kept as written (`Cid`,
 * `Status`, ... in the IPFS Cluster style; `evicted`, fetch-cap fields in snake case).
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { CidParam } from "../../domain/ContentId.js"
import { Wire } from "../../domain/Errors.js"
import { FETCH_CAP_LIMITS, PIN_STATUSES } from "../../domain/Limits.js"
import { PlainTextOfAtMost, strict, UnixSeconds } from "../Wire.js"

const CidPath = Schema.Struct({ cid: CidParam })

export const Uploaded = Schema.Struct({
  Cid: Schema.String,
  Size: Schema.Int.annotations({ description: "the file's bytes" }),
  Name: Schema.String
}).annotations({ identifier: "StorageUploaded" })

export const PinRequest = strict(
  Schema.Struct({
    cid: CidParam,
    name: Schema.optional(PlainTextOfAtMost(255))
  })
).annotations({ identifier: "StoragePin" })

export const PinStatus = Schema.Struct({
  Cid: Schema.String,
  Name: Schema.String,
  Status: Schema.Literal(...PIN_STATUSES),
  ReplicationMin: Schema.Int,
  ReplicationMax: Schema.Int,
  ReplicationFactor: Schema.Int.annotations({ description: "peers holding it pinned now" }),
  Peers: Schema.Array(Schema.String).annotations({ description: "peers the pin is allocated to" }),
  Error: Schema.String
}).annotations({ identifier: "StoragePinStatus" })

export const UnpinQuery = Schema.Struct({
  immediate: Schema.optional(Schema.Literal("true", "false")).annotations({
    description: "true: when no reference is left, evict the blocks on every node now (a privacy delete)"
  })
})

export const Unpinned = Schema.Struct({
  Cid: Schema.String,
  evicted: Schema.Literal("true", "partial", "shared", "skipped")
}).annotations({ identifier: "StorageUnpinned" })

export const MintRequest = strict(
  Schema.Struct({
    cid: CidParam,
    count: Schema.Int.pipe(Schema.between(FETCH_CAP_LIMITS.minCount, FETCH_CAP_LIMITS.maxCount)),
    ttl_seconds: Schema.Int.pipe(Schema.between(FETCH_CAP_LIMITS.minTtl, FETCH_CAP_LIMITS.maxTtl))
  })
).annotations({ identifier: "FetchCapMint" })

export const Minted = Schema.Struct({
  namespace: Schema.String,
  cid: Schema.String,
  caps: Schema.Array(
    Schema.Struct({
      id: Schema.String.annotations({ description: "32 hexadecimal characters" }),
      token: Schema.String.annotations({ description: "send as X-Portico-Fetch-Cap" }),
      revoke_key: Schema.String.annotations({ description: "send as X-Portico-Revoke-Key to revoke" }),
      expires_at: UnixSeconds
    })
  )
}).annotations({ identifier: "FetchCaps" })

export const Revoked = Schema.Struct({ revoked: Schema.String }).annotations({ identifier: "FetchCapRevoked" })

const Bytes = HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
  description: "the content's bytes; Range requests answer 206"
})

export class StorageGroup extends HttpApiGroup.make("storage")
  // the body is multipart, streamed into the blockstore by the handler, so it is not declared here
  .add(HttpApiEndpoint.post("upload", "/v1/storage/upload").addSuccess(Uploaded))
  .add(HttpApiEndpoint.get("get", "/v1/storage/get/:cid").setPath(CidPath).addSuccess(Bytes))
  .add(HttpApiEndpoint.post("pin", "/v1/storage/pin").setPayload(PinRequest).addSuccess(PinStatus))
  .add(HttpApiEndpoint.get("status", "/v1/storage/status/:cid").setPath(CidPath).addSuccess(PinStatus))
  .add(HttpApiEndpoint.del("unpin", "/v1/storage/unpin/:cid").setPath(CidPath).setUrlParams(strict(UnpinQuery)).addSuccess(Unpinned))
  .add(HttpApiEndpoint.post("mintFetchCaps", "/v1/storage/fetch-caps").setPayload(MintRequest).addSuccess(Minted))
  .add(
    HttpApiEndpoint.del("revokeFetchCap", "/v1/storage/fetch-caps/:id")
      .setPath(
        Schema.Struct({
          id: Schema.String.pipe(
            Schema.pattern(/^[0-9a-fA-F]{32}$/, { message: () => "a capability id is 32 hexadecimal characters" })
          ).annotations({ description: "the capability's id: 32 hexadecimal characters (case does not matter)" })
        })
      )
      .setHeaders(Schema.Struct({ "x-portico-revoke-key": Schema.optional(Schema.String) }))
      .addSuccess(Revoked)
  )
  .add(
    HttpApiEndpoint.get("relayed", "/v1/storage/relayed/:cid")
      .setPath(CidPath)
      .setHeaders(Schema.Struct({ "x-portico-fetch-cap": Schema.optional(Schema.String) }))
      .addSuccess(Bytes)
  )
  .addError(Wire.BadRequest)
  .addError(Wire.Unauthorized)
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(Wire.Conflict)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable) {}
