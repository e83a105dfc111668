/** The bench's device tokens: 64 hex characters each, the same on both sides of bench/push. */
import * as crypto from "node:crypto"

export const deviceTokens = (count: number): ReadonlyArray<string> =>
  Array.from({ length: count }, (_, i) => crypto.createHash("sha256").update(`bench-device-${i}`).digest("hex"))
