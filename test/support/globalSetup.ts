/**
 * One temp root per test run: gateways and fixtures make their dirs under it, and it goes when
 * the run ends (test processes are stopped without running their exit hooks).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"

export default function setup(): () => void {
  const root = mkdtempSync(path.join(tmpdir(), "portico-test-run-"))
  process.env["PORTICO_TEST_TMP"] = root
  return () => rmSync(root, { recursive: true, force: true })
}
