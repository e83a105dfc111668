/**
 * The vault's settings (docs/vault.md, "Settings"), read from `PORTICO_VAULT_*`. Every limit has a
 * default; a value the gateway could not work with is refused at start.
 */
import { Config, Effect } from "effect"
import { between } from "./IntegerSetting.js"

export interface VaultSettings {
  /** An envelope's decoded bytes (`PORTICO_VAULT_MAX_ENVELOPE_BYTES`, default 512 KiB); 413 past it. */
  readonly maxEnvelopeBytes: number
  /** Pushes a client network may make per minute, charged before the signature is checked (`PORTICO_VAULT_CLIENT_PUSHES_PER_MINUTE`, default 30). */
  readonly clientPushesPerMinute: number
  /** Pulls a client network may make per minute, before the signature (`PORTICO_VAULT_CLIENT_PULLS_PER_MINUTE`, default 60). */
  readonly clientPullsPerMinute: number
  /** Pushes of one identity per hour, charged once its signature holds (`PORTICO_VAULT_IDENTITY_PUSHES_PER_HOUR`, default 30). */
  readonly identityPushesPerHour: number
  /** Pulls of one identity per hour, once its signature holds (`PORTICO_VAULT_IDENTITY_PULLS_PER_HOUR`, default 120). */
  readonly identityPullsPerHour: number
  /**
   * How long one guardian's answer is waited for (`PORTICO_VAULT_GUARDIAN_TIMEOUT_MS`, default 5000).
   * The guardians are asked all at once, so this bounds a push's or a pull's whole fan-out too.
   */
  readonly guardianTimeoutMs: number
}

export const defaultVaultSettings: VaultSettings = {
  maxEnvelopeBytes: 512 * 1024,
  clientPushesPerMinute: 30,
  clientPullsPerMinute: 60,
  identityPushesPerHour: 30,
  identityPullsPerHour: 120,
  guardianTimeoutMs: 5_000
}

/** The settings from the environment, each defaulting to `defaultVaultSettings`. */
export const vaultConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const d = defaultVaultSettings
  const settings: VaultSettings = {
    maxEnvelopeBytes: yield* env(between("VAULT_MAX_ENVELOPE_BYTES", d.maxEnvelopeBytes, 1, 2 * 1024 * 1024)),
    clientPushesPerMinute: yield* env(between("VAULT_CLIENT_PUSHES_PER_MINUTE", d.clientPushesPerMinute, 1, 1_000_000)),
    clientPullsPerMinute: yield* env(between("VAULT_CLIENT_PULLS_PER_MINUTE", d.clientPullsPerMinute, 1, 1_000_000)),
    identityPushesPerHour: yield* env(between("VAULT_IDENTITY_PUSHES_PER_HOUR", d.identityPushesPerHour, 1, 1_000_000)),
    identityPullsPerHour: yield* env(between("VAULT_IDENTITY_PULLS_PER_HOUR", d.identityPullsPerHour, 1, 1_000_000)),
    guardianTimeoutMs: yield* env(between("VAULT_GUARDIAN_TIMEOUT_MS", d.guardianTimeoutMs, 100, 60_000))
  }
  return settings
})
