/**
 * Migration 26: real-time media's per-namespace settings (spec §4.9; docs/webrtc.md). One row per
 * namespace that has ever enabled it: `enabled` and `stealth` (0 or 1), `require_admission` (the
 * `/v1/webrtc/config` setting), and `relay_secret_sealed`, the namespace's relay secret (32 random
 * bytes, sealed for purpose `webrtc-relay` and owner the namespace), which keys what its media
 * server signs (spec §6.4); NULL once disabled. `updated_at` is Unix seconds.
 */
import type { Migration } from "./migrations.js"

export const webRtcMigration: Migration = {
  id: 26,
  name: "webrtc_settings",
  statements: [
    `CREATE TABLE IF NOT EXISTS webrtc_settings (
      namespace TEXT PRIMARY KEY,
      enabled INTEGER NOT NULL,
      stealth INTEGER NOT NULL DEFAULT 0,
      require_admission INTEGER NOT NULL DEFAULT 0,
      relay_secret_sealed TEXT,
      updated_at INTEGER NOT NULL
    )`
  ]
}
