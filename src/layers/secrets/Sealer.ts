/**
 * Secrets at rest: AES-256-GCM under keys derived per purpose from one root secret (HKDF), bound
 * to their owner as associated data, and keyed hashes for credentials that are only ever compared.
 */
import { Context, Data, Effect, Layer, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { PorticoConfig } from "../config/PorticoConfig.js"

export class SealError extends Data.TaggedError("SealError")<{ readonly detail: string }> {}

/** Purposes are fixed strings so that a key derived for one use can never open another's data. */
export type Purpose =
  | "signing-keys"
  | "api-key-hash"
  | "refresh-token-hash"
  | "refresh-successor"
  | "push-credentials"
  | "deployment-env"
  | "function-env"
  | "function-secret"
  | "fetch-cap-hash"
  | "coordination-mac"
  | "coordination-mac-v2"
  | "namespace-restore-key"
  | "namespace-backup-attest"
  | "node-invite"

export interface SealerService {
  /** Encrypts `plaintext` for `purpose`, bound to `owner` (e.g. `namespace/id`). */
  readonly seal: (purpose: Purpose, owner: string, plaintext: Uint8Array) => string
  /** Decrypts what `seal` produced for the same purpose and owner; fails on any mismatch. */
  readonly open: (purpose: Purpose, owner: string, sealed: string) => Effect.Effect<Uint8Array, SealError>
  /** Keyed hash (HMAC-SHA-256, base64url) of a credential; store this, never the credential. */
  readonly hash: (purpose: Purpose, value: string) => string
}

const VERSION = "v1"

export const makeSealer = (root: Uint8Array): SealerService => {
  const keys = new Map<Purpose, Buffer>()
  const keyFor = (purpose: Purpose): Buffer => {
    const known = keys.get(purpose)
    if (known !== undefined) return known
    const derived = Buffer.from(crypto.hkdfSync("sha256", root, Buffer.alloc(0), "portico/" + purpose, 32))
    keys.set(purpose, derived)
    return derived
  }
  const aadOf = (purpose: Purpose, owner: string) => Buffer.from(purpose + "\n" + owner, "utf8")
  return {
    seal: (purpose, owner, plaintext) => {
      const nonce = crypto.randomBytes(12)
      const cipher = crypto.createCipheriv("aes-256-gcm", keyFor(purpose), nonce)
      cipher.setAAD(aadOf(purpose, owner))
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
      return VERSION + "." + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64url")
    },
    open: (purpose, owner, sealed) =>
      Effect.try({
        try: () => {
          const [version, data] = sealed.split(".")
          if (version !== VERSION || data === undefined) throw new Error("unknown seal version")
          const raw = Buffer.from(data, "base64url")
          if (raw.length < 28) throw new Error("sealed value too short")
          const decipher = crypto.createDecipheriv("aes-256-gcm", keyFor(purpose), raw.subarray(0, 12))
          decipher.setAAD(aadOf(purpose, owner))
          decipher.setAuthTag(raw.subarray(raw.length - 16))
          return new Uint8Array(Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]))
        },
        catch: (e) => new SealError({ detail: e instanceof Error ? e.message : "open failed" })
      }),
    hash: (purpose, value) => crypto.createHmac("sha256", keyFor(purpose)).update(value, "utf8").digest("base64url")
  }
}

/** Constant-time comparison of two strings (equal length required to be equal). */
export const safeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a, "utf8")
  const y = Buffer.from(b, "utf8")
  return x.length === y.length && crypto.timingSafeEqual(x, y)
}

/**
 * Reads the root secret from config, else from `<dataDir>/secret.key`, creating it once with mode
 * 0600. Creation uses an exclusive open so a CLI and a server starting together agree on one key.
 */
export const loadRoot = (configured: Redacted.Redacted | undefined, dataDir: string) =>
  Effect.try({
    try: () => {
      if (configured !== undefined) {
        const text = Redacted.value(configured).trim()
        const bytes = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, "hex") : Buffer.from(text, "base64")
        if (bytes.length !== 32) throw new Error("PORTICO_SECRET must be 32 bytes, hex or base64")
        return new Uint8Array(bytes)
      }
      const file = path.join(dataDir, "secret.key")
      fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
      try {
        const fd = fs.openSync(file, "wx", 0o600)
        try {
          fs.writeSync(fd, crypto.randomBytes(32).toString("base64") + "\n")
          fs.fsyncSync(fd)
        } finally {
          fs.closeSync(fd)
        }
      } catch (e) {
        if (!(e instanceof Error && "code" in e && e.code === "EEXIST")) throw e
      }
      const bytes = Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64")
      if (bytes.length !== 32) throw new Error("secret.key is damaged: expected 32 bytes base64")
      return new Uint8Array(bytes)
    },
    catch: (e) => new SealError({ detail: e instanceof Error ? e.message : "cannot load root secret" })
  })

export class Sealer extends Context.Tag("portico/Sealer")<Sealer, SealerService>() {
  static readonly Live = Layer.effect(
    Sealer,
    Effect.flatMap(PorticoConfig, (config) => Effect.map(loadRoot(config.secret, config.dataDir), makeSealer))
  )
  /** A sealer with a fixed root, for unit tests. */
  static readonly Test = Layer.succeed(Sealer, makeSealer(new Uint8Array(32).fill(7)))
}
