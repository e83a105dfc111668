#!/usr/bin/env node
// The `portico` command: runs the TypeScript sources through tsx so the checkout needs no build.
import { register } from "tsx/esm/api"

register()
await import("../src/main.ts")
