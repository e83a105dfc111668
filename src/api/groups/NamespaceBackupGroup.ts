/**
 * Namespace backup and restore (spec §4.9, docs/namespaces.md "Backup and restore"): the owner's
 * sealed archive of everything the namespace holds, the gateway's restore key, and a restore into
 * an empty namespace. Backup answers the sealed bytes; restore takes them streamed.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { wiresOf } from "../../domain/Errors.js"
import { BackupRefusals } from "../../domain/NamespaceBackup.js"
import { Authentication } from "../Gates.js"
import { streamedBody } from "../OpenApiFacts.js"
import { owner } from "../Policy.js"
import { BodyCap, RoutePolicy } from "../RouteFacts.js"
import { strict } from "../Wire.js"

export const BackupRequest = strict(
  Schema.Struct({
    public_key: Schema.String.pipe(Schema.maxLength(128)).annotations({
      description: "the X25519 public key the archive is sealed to: 64 hex characters, or 32 bytes in base64 or base64url"
    })
  })
).annotations({ identifier: "NamespaceBackupRequest" })

export const RestoreKey = Schema.Struct({
  algorithm: Schema.Literal("X25519"),
  public_key: Schema.String.annotations({ description: "32 bytes, base64" }),
  public_key_hex: Schema.String,
  format: Schema.Literal("portico-namespace-backup/1")
}).annotations({ identifier: "NamespaceRestoreKey" })

export const Restored = Schema.Struct({
  status: Schema.Literal("ok"),
  databases: Schema.Int,
  members: Schema.Int.annotations({ description: "members restored besides the namespace's owner" }),
  pins: Schema.Int,
  cluster_tables: Schema.Int
}).annotations({ identifier: "NamespaceRestored" })

export class NamespaceBackupGroup extends HttpApiGroup.make("namespaceBackup")
  .add(
    HttpApiEndpoint.post("backup", "/v1/namespace/backup")
      .setPayload(BackupRequest)
      .addSuccess(
        HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
          description: "the sealed archive (docs/namespaces.md, \"Backup and restore\")"
        })
      )
  )
  .add(HttpApiEndpoint.get("restoreKey", "/v1/namespace/restore-key").addSuccess(RestoreKey))
  .add(
    HttpApiEndpoint.post("restore", "/v1/namespace/restore")
      .addSuccess(Restored)
      .annotate(BodyCap, "namespaceRestore")
      // the sealed archive, opened as it arrives by the handler
      .annotateContext(
        streamedBody({
          contentType: "application/octet-stream",
          schema: { type: "string", format: "binary" },
          description: "an archive POST /v1/namespace/backup answered, sealed to GET /v1/namespace/restore-key's key"
        })
      )
  )
  .addError(wiresOf(BackupRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, owner) {}
