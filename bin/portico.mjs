#!/usr/bin/env node
// The `portico` command: runs the compiled JavaScript in dist/, compiling src/ first when dist/ is
// missing or older than the sources (scripts/build.mjs), so a start costs no TypeScript compile.
import { ensureBuilt } from "../scripts/build.mjs"

ensureBuilt()
await import("../dist/main.js")
