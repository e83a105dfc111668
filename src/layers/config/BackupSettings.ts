/**
 * Caps of namespace backups (spec §8: 256 MiB, 50,000 pins), read from `PORTICO_BACKUP_*` so tests
 * can use small ones (docs/namespaces.md "Backup and restore").
 */
import { Config, Effect } from "effect"

export interface BackupSettings {
  /**
   * Bytes of an archive's content before sealing: databases, cluster SQL store, registry rows and
   * pin list together (`PORTICO_BACKUP_MAX_BYTES`, default 256 MiB). A backup over it is 413; a
   * restore body over its sealed size is 413 before it is read.
   */
  readonly maxBytes: number
  /** Pins in one archive (`PORTICO_BACKUP_MAX_PINS`, default 50,000); a backup over it is 413. */
  readonly maxPins: number
}

export const defaultBackupSettings: BackupSettings = { maxBytes: 256 * 1024 * 1024, maxPins: 50_000 }

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "expected a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

export const backupConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const settings: BackupSettings = {
    maxBytes: yield* env(positive("BACKUP_MAX_BYTES", defaultBackupSettings.maxBytes)),
    maxPins: yield* env(positive("BACKUP_MAX_PINS", defaultBackupSettings.maxPins))
  }
  return settings
})
