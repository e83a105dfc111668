/**
 * Content storage's rules (spec §2.4, §4.4): uploads streamed into the engine under a size cap and
 * a namespace quota, reads only of content the namespace holds, one pin per CID cluster-wide kept
 * by a reference count, unpins that release then count, privacy deletes that evict on every node,
 * and the periodic sweep that reclaims what no pin reaches.
 */
import { Context, Duration, Effect, Exit, Layer, Option, Schedule } from "effect"
import { canonicalCid } from "../../domain/ContentId.js"
import { Code } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { isPlainText, withoutControls } from "../../domain/Text.js"
import { Audit } from "../audit/Audit.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { Refused } from "../Refused.js"
import type { Statement } from "../registry/RegistryStore.js"
import { ContentEngine, ContentEngineError, type PinState } from "./ContentEngine.js"
import { ContentIndex, type RefKind } from "./ContentIndex.js"
import { Evictor } from "./Evictor.js"
import { heldElsewhere, noContent, notCanonical, refuse, storeDown, type StorageRefused } from "./StorageRefused.js"
import { type FormEvent, FormRefused, formEvents } from "./UploadForm.js"
import { EmbeddedContentEngine } from "./EmbeddedContentEngine.js"

export interface Stored {
  readonly cid: string
  readonly size: number
  readonly name: string
}

export type Evicted = "true" | "partial" | "shared" | "skipped"

export interface PinStatusAnswer extends PinState {
  readonly cid: string
  readonly name: string
}

export interface StorageService {
  /**
   * Reads a multipart/form-data body (field `file`, optional `name`) into the engine and pins
   * it; nothing is recorded unless the whole form is good.
   */
  readonly upload: (caller: Principal, contentType: string, body: AsyncIterable<Uint8Array>) => Effect.Effect<Stored, StorageRefused>
  /**
   * Stores bytes as content of a namespace under a reference (a database backup), with `extra`
   * statements recorded in the same batch (conditional on the reference row).
   */
  readonly store: (
    namespace: string,
    kind: RefKind,
    ref: string,
    name: string,
    bytes: AsyncIterable<Uint8Array>,
    extra: (cid: string, size: number) => ReadonlyArray<Statement>
  ) => Effect.Effect<{ readonly cid: string; readonly size: number }, Refused<"BAD_REQUEST" | "PAYLOAD_TOO_LARGE" | "UNAVAILABLE">>
  /** Checks that `namespace` holds `cid` and answers its byte size. */
  readonly open: (namespace: string, cidText: string) => Effect.Effect<{ readonly cid: string; readonly size: number }, StorageRefused>
  readonly read: (cid: string, offset: number, length: number) => AsyncIterable<Uint8Array>
  /** Without a name, a CID the namespace holds keeps the name it has. */
  readonly pin: (caller: Principal, cidText: string, name: string | undefined) => Effect.Effect<Stored, StorageRefused>
  readonly status: (caller: Principal, cidText: string) => Effect.Effect<PinStatusAnswer, StorageRefused>
  readonly unpin: (caller: Principal, cidText: string, immediate: boolean) => Effect.Effect<{ readonly cid: string; readonly evicted: Evicted }, StorageRefused>
  /** This node's part of a privacy delete; false when the CID is pinned again or a block stayed. */
  readonly evictHere: (cidText: string) => Effect.Effect<boolean, StorageRefused>
  /** One sweep now (the periodic one calls this). */
  readonly sweep: Effect.Effect<{ readonly removed: number }, StorageRefused>
}

/** Thrown out of the byte source to stop an import that crossed a limit. */
class OverLimit extends Error {
  constructor(readonly what: "upload" | "quota", readonly limit: number) {
    super(`over the ${what} limit`)
  }
}

const NAME_MAX = 255

const engineDown = (e: ContentEngineError) =>
  e.reason === "missing" ? noContent() : storeDown("the content store is unavailable")

const checkCid = (text: string) => {
  const cid = canonicalCid(text)
  return cid === undefined ? Effect.fail(notCanonical(text)) : Effect.succeed(cid)
}

/** Counts bytes as they pass and throws `OverLimit` past `limit`. */
async function* limited(source: AsyncIterable<Uint8Array>, limit: number, what: "upload" | "quota") {
  let seen = 0
  for await (const chunk of source) {
    seen += chunk.length
    if (seen > limit) throw new OverLimit(what, limit)
    yield chunk
  }
}

/**
 * The current file part's bytes, pulled from the form as the importer asks. Defined once, not
 * per upload: a generator function made per upload gives its generators a map of their own, and
 * the optimized code that reads them (`limited`, the chunker) was thrown away at every upload.
 */
async function* fileBytes(events: AsyncIterator<FormEvent>) {
  for (;;) {
    const event = await events.next()
    if (event.done === true) throw new FormRefused("the multipart body ended inside the file")
    if (event.value.kind === "end-file") return
    if (event.value.kind === "chunk") yield event.value.bytes
  }
}

const tooLarge = (e: OverLimit) =>
  e.what === "upload"
    ? refuse(Code.PAYLOAD_TOO_LARGE, `the file is over the upload limit of ${e.limit} bytes`, "split it, or ask the operator to raise PORTICO_STORAGE_MAX_UPLOAD_BYTES")
    : refuse(Code.PAYLOAD_TOO_LARGE, "the namespace's storage quota would be passed", "unpin content the namespace no longer needs")

export class Storage extends Context.Tag("portico/Storage")<Storage, StorageService>() {
  static readonly Live = Layer.scoped(
    Storage,
    Effect.gen(function* () {
      const engine = yield* ContentEngine
      const index = yield* ContentIndex
      const evictor = yield* Evictor
      const audit = yield* Audit
      const config = yield* PorticoConfig
      const limits = config.storage

      /** Takes back a reference just recorded, and the pin row if nothing else keeps it. */
      const undo = (r: { namespace: string; cid: string; kind: RefKind; ref: string }) =>
        Effect.ignore(Effect.zipRight(index.release(r), index.dropPinIfUnreferenced(r.cid)))

      /**
       * Imports `bytes`. The engine keeps the new blocks from the sweep until the caller's scope
       * closes, which is after it has recorded the reference.
       */
      const importBytes = (bytes: AsyncIterable<Uint8Array>) =>
        engine.add(limited(bytes, limits.maxUploadBytes, "upload")).pipe(
          Effect.mapError((e) => {
            if (e.cause instanceof OverLimit) return tooLarge(e.cause)
            if (e.cause instanceof FormRefused) return refuse(Code.BAD_REQUEST, e.cause.reason, FORM_HINT)
            return storeDown("the content store could not take the upload")
          })
        )

      /**
       * Records the reference (the quota is checked there, where content the namespace already
       * holds is free) and pins the content.
       */
      const record = (
        namespace: string,
        kind: RefKind,
        ref: string,
        name: string,
        imported: { readonly cid: string; readonly size: number },
        extra: ReadonlyArray<Statement>
      ) =>
        Effect.gen(function* () {
          // a pin the namespace had before this upload must survive the engine failing now
          const existed = kind === "pin" && (yield* Effect.mapError(index.pinName(namespace, imported.cid), () => storeDown())) !== undefined
          // whole once sent: a write cut in flight has an unknown outcome (rqlite may still apply
          // it), and a caller undoing after an interruption would miss the reference it made
          const recorded = yield* Effect.mapError(
            Effect.uninterruptible(index.add({ namespace, cid: imported.cid, kind, ref, name, size: imported.size }, limits.quotaBytes, extra)),
            () => storeDown()
          )
          if (!recorded) return yield* Effect.fail(tooLarge(new OverLimit("quota", limits.quotaBytes)))
          yield* engine.pin(imported.cid, name).pipe(
            Effect.tapError(() => (existed ? Effect.void : undo({ namespace, cid: imported.cid, kind, ref }))),
            Effect.mapError(() => storeDown("the content store could not pin the upload"))
          )
        })

      const service: StorageService = {
        upload: (caller, contentType, body) =>
          Effect.scoped(
            Effect.gen(function* () {
              const events = formEvents(contentType, body, FORM_LIMITS)[Symbol.asyncIterator]()
              const next = Effect.tryPromise({
                try: () => events.next(),
                catch: (e) => refuse(Code.BAD_REQUEST, e instanceof FormRefused ? e.reason : "the upload could not be read", FORM_HINT)
              })
              let fieldName: string | undefined
              let file: { readonly cid: string; readonly size: number; readonly fileName: string } | undefined
              for (;;) {
                const event = yield* next
                if (event.done) break
                const part = event.value
                if (part.kind === "chunk" || part.kind === "end-file") continue
                if (part.name === "name" && part.kind === "field") {
                  // given twice, one of them would be dropped: refused, not last-wins
                  if (fieldName !== undefined) return yield* Effect.fail(refuse(Code.BAD_REQUEST, "name: is given twice", FORM_HINT))
                  if (characters(part.value) > NAME_MAX) return yield* Effect.fail(nameTooLong())
                  // the rule the pin route's schema applies to a name
                  if (!isPlainText(part.value)) return yield* Effect.fail(nameNotPlain())
                  fieldName = part.value
                  continue
                }
                if (part.name !== "file") return yield* Effect.fail(unknownField(part.name))
                if (file !== undefined) return yield* Effect.fail(refuse(Code.BAD_REQUEST, "only one file per upload"))
                // the blocks are written now and recorded only once the whole form has been read
                const bytes = part.kind === "field" ? single(Buffer.from(part.value, "utf8")) : fileBytes(events)
                const imported = yield* importBytes(bytes)
                file = { ...imported, fileName: part.kind === "file" ? [...withoutControls(part.filename)].slice(0, NAME_MAX).join("") : "" }
              }
              if (file === undefined) {
                return yield* Effect.fail(refuse(Code.BAD_REQUEST, "no file in the upload", "send the bytes in a multipart field named file"))
              }
              const name = fieldName ?? file.fileName
              yield* record(caller.namespace, "pin", "", name, file, [])
              yield* audit.record(caller.namespace, "storage.upload", caller.subject, file.cid, { size: file.size })
              return { cid: file.cid, size: file.size, name }
            })
          ),

        store: (namespace, kind, ref, name, bytes, extra) =>
          Effect.scoped(
            Effect.gen(function* () {
              const imported = yield* importBytes(bytes)
              yield* record(namespace, kind, ref, name, imported, extra(imported.cid, imported.size))
              return imported
            })
          ),

        open: (namespace, cidText) =>
          Effect.gen(function* () {
            const cid = yield* checkCid(cidText)
            const held = yield* Effect.mapError(index.holds(namespace, cid), () => storeDown())
            if (!held) return yield* Effect.fail(noContent())
            const size = yield* Effect.mapError(engine.size(cid), engineDown)
            if (size === undefined) {
              return yield* Effect.fail(
                engine.kind === "embedded" ? heldElsewhere() : storeDown("the content is not reachable on this node")
              )
            }
            return { cid, size }
          }),

        read: engine.read,

        pin: (caller, cidText, requestedName) =>
          Effect.gen(function* () {
            const cid = yield* checkCid(cidText)
            if (requestedName !== undefined && characters(requestedName) > NAME_MAX) return yield* Effect.fail(nameTooLong())
            const [mine, anyone] = yield* Effect.mapError(
              Effect.all([index.holds(caller.namespace, cid), index.heldByAnyone(cid)]),
              () => storeDown()
            )
            // Content another namespace holds is not handed over by knowing its CID. Nor is content
            // nobody holds on the embedded engine: it cannot fetch, so such blocks are leftovers
            // (a refused upload, an unpin, an evicted file's shared chunk) waiting for the sweep.
            if (!mine && (anyone || engine.kind === "embedded")) return yield* Effect.fail(noContent())
            const name = requestedName ?? (mine ? ((yield* Effect.mapError(index.pinName(caller.namespace, cid), () => storeDown())) ?? "") : "")
            const size = yield* Effect.mapError(engine.size(cid), engineDown)
            if (size === undefined) return yield* Effect.fail(noContent())
            const recorded = yield* Effect.mapError(
              index.add({ namespace: caller.namespace, cid, kind: "pin", ref: "", name, size }, limits.quotaBytes),
              () => storeDown()
            )
            if (!recorded) return yield* Effect.fail(tooLarge(new OverLimit("quota", limits.quotaBytes)))
            yield* engine.pin(cid, name).pipe(
              Effect.tapError(() => (mine ? Effect.void : undo({ namespace: caller.namespace, cid, kind: "pin", ref: "" }))),
              Effect.mapError(engineDown)
            )
            yield* audit.record(caller.namespace, "storage.pin", caller.subject, cid, { name })
            return { cid, size, name }
          }),

        status: (caller, cidText) =>
          Effect.gen(function* () {
            const cid = yield* checkCid(cidText)
            const name = yield* Effect.mapError(index.pinName(caller.namespace, cid), () => storeDown())
            // a CID this namespace did not pin is unpinned as far as it may know
            if (name === undefined) {
              return { cid, name: "", status: "unpinned", replicationMin: 0, replicationMax: 0, replicationFactor: 0, peers: [], error: "" } as const
            }
            const state = yield* Effect.mapError(engine.status(cid), engineDown)
            return { cid, name, ...state }
          }),

        unpin: (caller, cidText, immediate) =>
          Effect.gen(function* () {
            const cid = yield* checkCid(cidText)
            // release first, then count: of two concurrent unpins, the later count sees zero
            const released = yield* Effect.mapError(
              index.release({ namespace: caller.namespace, cid, kind: "pin", ref: "" }),
              () => storeDown()
            )
            if (!released) return yield* Effect.fail(refuse(Code.NOT_FOUND, "this namespace has no pin of that CID"))
            yield* audit.record(caller.namespace, "storage.unpin", caller.subject, cid, { immediate })
            const left = yield* Effect.option(index.count(cid))
            // the count could not run: the pin stays for now; the sweep drops it if nothing holds it
            if (Option.isNone(left)) return { cid, evicted: "skipped" as const }
            if (left.value > 0) return { cid, evicted: immediate ? ("shared" as const) : ("skipped" as const) }
            const dropped = yield* Effect.option(index.dropPinIfUnreferenced(cid))
            if (Option.isNone(dropped)) return { cid, evicted: "skipped" as const }
            // somebody pinned it between the count and the drop: theirs now
            if (!dropped.value) return { cid, evicted: immediate ? ("shared" as const) : ("skipped" as const) }
            const unpinned = yield* Effect.exit(engine.unpin(cid))
            if (Exit.isFailure(unpinned)) yield* Effect.logWarning("engine unpin failed; the sweep will retry", cid)
            if (!immediate) return { cid, evicted: "skipped" as const }
            const everywhere = yield* evictor.evictEverywhere(cid, (keep) => engine.evict(cid, keep))
            // a reference that landed while the eviction waited for an upload kept the blocks
            if (everywhere === "partial" && (yield* Effect.orElseSucceed(index.heldByAnyone(cid), () => false))) {
              return { cid, evicted: "shared" as const }
            }
            return { cid, evicted: everywhere }
          }),

        evictHere: (cidText) =>
          Effect.gen(function* () {
            const cid = yield* checkCid(cidText)
            return yield* engine.evict(cid, Effect.mapError(index.pinned, () => storeDown())).pipe(
              // imports in progress held this node past the wait: not confirmed, the sweep follows
              Effect.catchTag("ReclaimBusy", () => Effect.succeed(false)),
              Effect.catchIf(
                (e): e is ContentEngineError => e instanceof ContentEngineError,
                () => Effect.fail(storeDown("the content store is unavailable"))
              )
            )
          }),

        sweep: Effect.gen(function* () {
          // pins an unpin left behind when its count could not run: their last reference is gone
          for (const cid of yield* Effect.orElseSucceed(index.orphans, () => [])) {
            if (yield* Effect.orElseSucceed(index.dropPinIfUnreferenced(cid), () => false)) yield* Effect.ignore(engine.unpin(cid))
          }
          return yield* engine.sweep(Effect.mapError(index.pinned, () => storeDown())).pipe(
            Effect.catchIf(
              (e): e is ContentEngineError => e instanceof ContentEngineError,
              () => Effect.fail(storeDown("the content store is unavailable"))
            )
          )
        })
      }

      // The sweep reclaims blocks of plain unpins and of uploads that never finished: each node its
      // own blocks on the embedded engine; a shared content store once for the cluster (ClusterWorker.ts)
      if (config.storage.cluster !== undefined) return service
      yield* service.sweep.pipe(
        Effect.tap(({ removed }) => (removed > 0 ? Effect.logInfo(`storage sweep removed ${removed} blocks`) : Effect.void)),
        Effect.catchAll((e) => Effect.logWarning(`storage sweep failed: ${e.reason}`)),
        Effect.schedule(Schedule.spaced(Duration.millis(limits.sweepIntervalMs))),
        Effect.delay(Duration.millis(limits.sweepIntervalMs)),
        Effect.forkScoped
      )
      return service
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Storage.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          EmbeddedContentEngine.Test,
          ContentIndex.Test,
          Evictor.Test,
          Audit.Test,
          PorticoConfig.Test
        )
      )
    )
  )
}

/** Names are counted in characters (code points), not UTF-16 units. */
const characters = (text: string): number => [...text].length

const nameTooLong = () => refuse(Code.VALIDATION_FAILED, `name is longer than ${NAME_MAX} characters`)
const nameNotPlain = () => refuse(Code.VALIDATION_FAILED, "name: no control characters (U+0000-U+001F, U+007F)")

const FORM_HINT = "send multipart/form-data with the bytes in a field named file (curl -F file=@path)"
/** A file and its name; a few more parts are parsed only to be refused by name. */
const FORM_LIMITS = { maxParts: 8, maxFieldSize: 64 * 1024 }

const unknownField = (key: string) =>
  key === ""
    ? refuse(Code.BAD_REQUEST, "a form part has no name its headers could give (a Content-Disposition with name=, in valid UTF-8)", "send the bytes as field file and optionally a field name")
    : refuse(Code.BAD_REQUEST, `unexpected multipart field "${key.slice(0, 64)}"`, "send the bytes as field file and optionally a field name")

async function* single(bytes: Uint8Array) {
  yield bytes
}
