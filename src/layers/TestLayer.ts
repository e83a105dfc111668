/**
 * What the services' test doubles share (docs/architecture.md, "Test doubles").
 *
 * Every capability Tag has a `Test` layer beside it: the service itself over in-memory or
 * temp-directory engines (the registry's SQLite file, the memory cache store, the embedded block
 * store, the SQLite worker code run in-process), with a fixed root secret, and nothing on the
 * network. Built under `it.layer` from @effect/vitest they read the TestClock.
 *
 * `makeTestLayer` is for the other case: a test that wants one collaborator to answer a certain
 * way gives just the members it needs, and any other member it touches fails the test, naming
 * itself, instead of quietly answering something.
 */
import { type Context, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"

/** Members a caller may probe for without using the service (a thenable check, printing). */
const PROBES = new Set<PropertyKey>(["then", "toJSON", "constructor", "asymmetricMatch", "$$typeof", "nodeType"])

const missingMember = (service: string, member: string) => {
  const message = `${service}.${member} is not part of this test double; give it to makeTestLayer`
  return () => {
    throw new Error(message)
  }
}

/**
 * A layer for `tag` made of the members given. Calling any other method throws with its name
 * (inside `Effect.gen` that is a defect naming it). A member that is an Effect rather than a
 * method must be given. An optional member the code checks for (`store.queryNow ===
 * undefined`) reads as present unless it is given, as undefined.
 */
export const makeTestLayer =
  <I, S extends object>(tag: Context.Tag<I, S>) =>
  (members: Partial<S>): Layer.Layer<I> =>
    Layer.succeed(
      tag,
      new Proxy({ ...members } as S, {
        get: (target, member) => {
          if (member in target) return target[member as keyof S]
          if (typeof member === "symbol" || PROBES.has(member)) return undefined
          return missingMember(tag.key, member)
        }
      })
    )

/** A directory of its own for a test layer, removed with the layer's scope. */
export const testDirectory = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), `portico-${prefix}-`))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

