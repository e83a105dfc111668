/** Names and identifiers that cross the wire, each a checked Schema. */
import { Schema } from "effect"
import { hasValidChecksum } from "./Siwe.js"
import { PlainText } from "./Text.js"

/**
 * A namespace name: it becomes a DNS label (`ns-<name>.<domain>`) and a directory name, so it is
 * lowercase letters, digits and inner hyphens, 3-63 characters.
 */
export const NamespaceName = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/, {
    message: () => "namespace names are 3-63 characters of a-z, 0-9 and inner hyphens"
  }),
  Schema.brand("NamespaceName")
).annotations({ identifier: "NamespaceName" })
export type NamespaceName = typeof NamespaceName.Type

/**
 * The platform's own names inside a namespace: pub/sub topics (read-only to tenants) and cache
 * maps (functions' own, out of every HTTP grant's reach) under it are never a tenant's to write.
 */
export const PLATFORM_PREFIX = "_portico/"

/** Reserved namespace names: platform hosts and the lobby. */
export const reservedNamespaces: ReadonlySet<string> = new Set(["lobby", "cluster", "portico", "www", "api", "admin", "internal"])

/**
 * An EVM wallet address, stored lowercase so lookups never depend on checksum casing. Mixed case
 * is an EIP-55 checksum and must be right, as sign-in requires: a mistyped address would
 * otherwise be added as a member no wallet can ever sign in as.
 */
export const Wallet = Schema.transform(
  Schema.String.pipe(
    Schema.pattern(/^0x[0-9a-fA-F]{40}$/, { message: () => "a wallet is 0x followed by 40 hex characters" }),
    Schema.filter(hasValidChecksum, { message: () => "the wallet's mixed-case checksum (EIP-55) is wrong: check the address" })
  ),
  Schema.String,
  { strict: true, decode: (s) => s.toLowerCase(), encode: (s) => s }
).annotations({
  identifier: "Wallet",
  // a pattern cannot check a checksum: the format names the rule, the description says it
  jsonSchema: {
    type: "string",
    pattern: "^0x[0-9a-fA-F]{40}$",
    format: "evm-address",
    description:
      "an EVM address: 0x and 40 hex characters, all lowercase, all uppercase, or mixed case that is its exact EIP-55 checksum (a wrong checksum is 400)"
  }
})

/** An API key id as shown on the wire (`key_` + 16 base32 characters). */
export const KeyId = Schema.String.pipe(
  Schema.pattern(/^key_[a-z2-7]{16}$/, { message: () => "a key id is key_ followed by 16 characters" })
).annotations({ identifier: "KeyId" })

/** A short human label (keys, devices): plain text, at most 128 UTF-16 units. */
export const Label = PlainText.pipe(Schema.maxLength(128))
