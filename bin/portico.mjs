#!/usr/bin/env node
// The `portico` command: runs the bundled JavaScript in dist/bundle/, compiling and bundling src/
// first when dist/ is missing or older than the sources (scripts/build.mjs), so a start costs no
// TypeScript compile and no loading of a thousand separate modules.
import { ensureBuilt } from "../scripts/build.mjs"

// Tests build once before they start and set PORTICO_SKIP_BUILD=1, so an edit made while they run
// does not put a compile inside a test.
if (process.env.PORTICO_SKIP_BUILD !== "1") {
  try {
    ensureBuilt()
  } catch (error) {
    process.stderr.write(`portico: cannot compile src/ to dist/: ${error.message}\n`)
    process.exit(1)
  }
}
await import("../dist/bundle/main.js")
