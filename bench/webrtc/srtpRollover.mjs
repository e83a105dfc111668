/**
 * Preloaded (`--import`) into bench/webrtc's werift peers: SRTP's rollover counter as RFC 3711
 * §3.3.1 (Appendix A) estimates it, in place of werift's own.
 *
 * werift (0.24) counts a wrap of the 16-bit RTP sequence number only when a packet numbered below
 * 100 follows one numbered above 65435. A receiver that loses those 100 packets around the wrap,
 * as the media row's receiver does when the sender outruns it, keeps the old counter: every packet
 * after fails authentication and the peer hears nothing more while its connection stays up (at
 * about 20,000 packets a second, a wrap comes every 3 s). The estimate here takes the counter that
 * puts a packet's index nearest the highest index authenticated so far, as libsrtp and pion do, so
 * losses of up to half the sequence space are survived; a reordered packet from before a wrap is
 * decrypted with the previous counter without moving the state back.
 *
 * Only the bench's peers load it (the SFU side's through NODE_OPTIONS when bench/webrtc/run.ts
 * forks test/support/mediaPeerChild.ts, the direct side's through directPeer.ts's execArgv), so
 * both sides of the comparison run the same receiver. Plain JavaScript: NODE_OPTIONS' imports run
 * before tsx is registered.
 */
// the ES module build (lib/index.mjs), the one `import ... from "werift"` loads in the peers (the
// CommonJS build is another copy, which they do not load)
import { SrtpSession } from "werift"

const HALF = 0x8000

// werift does not export its SRTP context class (its export of that name is DTLS's): a session
// made with throwaway keys holds one (AES-128-CM / HMAC-SHA1-80, profile 1)
const key = { localMasterKey: Buffer.alloc(16), localMasterSalt: Buffer.alloc(14), remoteMasterKey: Buffer.alloc(16), remoteMasterSalt: Buffer.alloc(14) }
const context = Object.getPrototypeOf(new SrtpSession({ keys: key, profile: 1 }).localContext)
if (typeof context.updateRolloverCount !== "function") throw new Error("srtpRollover.mjs: werift's SRTP context has no updateRolloverCount to replace")

// on the SRTP context's own prototype, ahead of the one it inherits (SRTCP's context does not use it)
context.updateRolloverCount = function updateRolloverCountRfc3711(sequenceNumber, s) {
  // the highest index seen, kept beside werift's fields (which stay the packet's own: werift
  // decrypts with s.rolloverCounter and keeps the state only once the packet authenticated)
  if (s.highestRoc === undefined) {
    s.highestRoc = s.rolloverCounter
    s.highestSeq = s.rolloverHasProcessed ? s.lastSequenceNumber : sequenceNumber
    s.rolloverHasProcessed = true
  }
  let roc = s.highestRoc
  if (s.highestSeq < HALF) {
    if (sequenceNumber - s.highestSeq > HALF && roc > 0) roc -= 1
  } else if (s.highestSeq - HALF > sequenceNumber) {
    roc += 1
  }
  s.rolloverCounter = roc
  s.lastSequenceNumber = sequenceNumber
  if (roc > s.highestRoc || (roc === s.highestRoc && sequenceNumber > s.highestSeq)) {
    s.highestRoc = roc
    s.highestSeq = sequenceNumber
  }
}
