/**
 * How a process of our own (the SQLite worker, the function runner) is started from this checkout.
 *
 * A TypeScript checkout runs through tsx, which `portico` may have registered in-process (not
 * through flags a child inherits), so the child is given tsx's loader by absolute location. It is
 * resolved when a child starts, not on import.
 */
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"

const tsxLoader = (): string =>
  typeof import.meta.resolve === "function"
    ? import.meta.resolve("tsx")
    : // vitest's module runner (tests that start a pool in-process): tsx's one export by require
      pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

/** Node's arguments before the child's entry file: tsx's loader when the entry is TypeScript. */
export const loaderArgv = (typescript: boolean): Array<string> => (typescript ? ["--import", tsxLoader()] : [])
