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

/**
 * Migration 27: admissions to rooms (docs/webrtc.md, "Admission"), written by a function's
 * `webrtc_admit` host call and read at each join of a namespace that requires admission. A row
 * lets `user` join `room` until `expires_at` (Unix seconds); `revoked_at` is set by a kick, so a
 * kicked user does not join again on the same admission.
 */
export const webRtcAdmissionsMigration: Migration = {
  id: 27,
  name: "webrtc_admissions",
  statements: [
    `CREATE TABLE IF NOT EXISTS webrtc_admissions (
      namespace TEXT NOT NULL,
      room TEXT NOT NULL,
      user_id TEXT NOT NULL,
      muted INTEGER NOT NULL DEFAULT 0,
      expires_at INTEGER NOT NULL,
      revoked_at INTEGER,
      PRIMARY KEY (namespace, room, user_id)
    )`
  ]
}
