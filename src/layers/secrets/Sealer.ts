/**
 * Secrets at rest: AES-256-GCM under keys derived per purpose from a root secret (HKDF), bound to
 * their owner as associated data, and keyed hashes for credentials that are only ever compared.
 *
 * Roots carry a generation (docs/cluster.md, "Root-secret rotation"). Generation 0 is the root the
 * node started with (PORTICO_SECRET or `<dataDir>/secret.key`); later ones, adopted through
 * rotate-secrets, are kept in `<dataDir>/secret.keys` (RootFile.ts). `seal` uses the newest
 * generation (`v2.<generation>.<data>`; while it is 0, `v1.<data>` as before any rotation) and
 * `open` any generation held. Keyed hashes stay on generation 0: a stored hash cannot be
 * recomputed under a new root, so rotating them would void every API key and refresh token.
 */
import { Context, Data, Effect, Layer, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { readLaterRootsSync, writeLaterRoots } from "./RootFile.js"

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
  | "peer-channel"
  | "namespace-restore-key"
  | "namespace-backup-attest"
  | "node-invite"
  | "root-secret"
  | "tls-store"
  | "webrtc-relay"

export interface SealerService {
  /** Encrypts `plaintext` for `purpose`, bound to `owner` (e.g. `namespace/id`). */
  readonly seal: (purpose: Purpose, owner: string, plaintext: Uint8Array) => string
  /** Decrypts what `seal` produced for the same purpose and owner; fails on any mismatch. */
  readonly open: (purpose: Purpose, owner: string, sealed: string) => Effect.Effect<Uint8Array, SealError>
  /**
   * Keyed hash (HMAC-SHA-256, base64url) of a credential; store this, never the credential. Always
   * generation 0's derivation: stored hashes stay comparable across rotations.
   */
  readonly hash: (purpose: Purpose, value: string) => string
  /** The newest root generation this node holds (0 before any rotation). */
  readonly generation: () => number
  /** `hash` under generation `generation`'s root (the coordination MAC); undefined when not held. */
  readonly hashAt: (generation: number, purpose: Purpose, value: string) => string | undefined
  /** The generation a sealed value was sealed under; undefined when it is not a sealed value. */
  readonly generationOf: (sealed: string) => number | undefined
  /**
   * Takes `root` as generation `generation`, the newest + 1: kept (the Live sealer writes it to
   * `<dataDir>/secret.keys` first) and sealed with from then on. A generation already held is a
   * no-op; one further ahead fails (the ones between are missing).
   */
  readonly adopt: (generation: number, root: Uint8Array) => Effect.Effect<void, SealError>
}

/**
 * A sealer over `roots` (index = generation; at least generation 0). `persist` is given every root
 * past generation 0 before an adoption takes effect (throwing refuses it).
 */
export const makeSealer = (
  root: Uint8Array | ReadonlyArray<Uint8Array>,
  persist?: (later: ReadonlyArray<Uint8Array>) => void
): SealerService => {
  const roots: Array<Uint8Array> = root instanceof Uint8Array ? [root] : [...root]
  if (roots.length === 0) throw new Error("a sealer needs generation 0's root")
  const keys = new Map<string, Buffer>()
  const keyAt = (generation: number, purpose: Purpose): Buffer | undefined => {
    const known = keys.get(generation + "/" + purpose)
    if (known !== undefined) return known
    const base = roots[generation]
    if (base === undefined) return undefined
    const derived = Buffer.from(crypto.hkdfSync("sha256", base, Buffer.alloc(0), "portico/" + purpose, 32))
    keys.set(generation + "/" + purpose, derived)
    return derived
  }
  const keyFor = (purpose: Purpose): Buffer => keyAt(0, purpose)!
  const aadOf = (purpose: Purpose, owner: string) => Buffer.from(purpose + "\n" + owner, "utf8")
  /** [generation, data] of a sealed value: `v1.<data>` is generation 0, `v2.<n>.<data>` generation n. */
  const parse = (sealed: string): readonly [number, string] | undefined => {
    const parts = sealed.split(".")
    if (parts[0] === "v1" && parts.length === 2) return [0, parts[1]!]
    if (parts[0] === "v2" && parts.length === 3 && /^(0|[1-9]\d{0,8})$/.test(parts[1]!)) return [Number(parts[1]), parts[2]!]
    return undefined
  }
  return {
    seal: (purpose, owner, plaintext) => {
      const generation = roots.length - 1
      const nonce = crypto.randomBytes(12)
      const cipher = crypto.createCipheriv("aes-256-gcm", keyAt(generation, purpose)!, nonce)
      cipher.setAAD(aadOf(purpose, owner))
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
      const data = Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64url")
      // generation 0 keeps v1's envelope: a gateway that predates rotation still reads it
      return generation === 0 ? "v1." + data : `v2.${generation}.${data}`
    },
    open: (purpose, owner, sealed) =>
      Effect.try({
        try: () => {
          const parsed = parse(sealed)
          if (parsed === undefined) throw new Error("unknown seal version")
          const key = keyAt(parsed[0], purpose)
          if (key === undefined) throw new Error(`sealed under root generation ${parsed[0]}, which this node does not hold`)
          const raw = Buffer.from(parsed[1], "base64url")
          if (raw.length < 28) throw new Error("sealed value too short")
          const decipher = crypto.createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
          decipher.setAAD(aadOf(purpose, owner))
          decipher.setAuthTag(raw.subarray(raw.length - 16))
          return new Uint8Array(Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]))
        },
        catch: (e) => new SealError({ detail: e instanceof Error ? e.message : "open failed" })
      }),
    hash: (purpose, value) => crypto.createHmac("sha256", keyFor(purpose)).update(value, "utf8").digest("base64url"),
    generation: () => roots.length - 1,
    hashAt: (generation, purpose, value) => {
      const key = keyAt(generation, purpose)
      return key === undefined ? undefined : crypto.createHmac("sha256", key).update(value, "utf8").digest("base64url")
    },
    generationOf: (sealed) => parse(sealed)?.[0],
    adopt: (generation, root) =>
      Effect.try({
        try: () => {
          if (generation < roots.length) return
          if (generation !== roots.length) throw new Error(`root generation ${generation} cannot follow ${roots.length - 1}`)
          if (root.length !== 32) throw new Error("a root secret is 32 bytes")
          persist?.([...roots.slice(1), root])
          roots.push(new Uint8Array(root))
        },
        catch: (e) => new SealError({ detail: e instanceof Error ? e.message : "adopt failed" })
      })
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
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const root = yield* loadRoot(config.secret, config.dataDir)
      const later = yield* Effect.try({
        try: () => readLaterRootsSync(config.dataDir),
        catch: (e) => new SealError({ detail: e instanceof Error ? e.message : "cannot read secret.keys" })
      })
      return makeSealer([root, ...later], (roots) => writeLaterRoots(config.dataDir, roots))
    })
  )
  /** A sealer with a fixed root, for unit tests: each build its own (an adoption stays in its test). */
  static readonly Test = Layer.sync(Sealer, () => makeSealer(new Uint8Array(32).fill(7)))
}
