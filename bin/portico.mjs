#!/usr/bin/env node
// The `portico` command: runs the compiled JavaScript in dist/, compiling src/ first when dist/ is
// missing or older than the sources (scripts/build.mjs), so a start costs no TypeScript compile.
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
await import("../dist/main.js")
