/** A tar.gz of files made with the system's tar, as a developer's machine would pack an app. */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { testTmp } from "./gateway.js"

/** `files` maps paths inside the archive (subdirectories made as needed) to their contents. */
export const tarOf = (files: Readonly<Record<string, string | Uint8Array>>): Buffer => {
  const dir = fs.mkdtempSync(path.join(testTmp(), "tar-src-"))
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), content)
  }
  const out = `${dir}.tar.gz`
  execFileSync("tar", ["-czf", out, "-C", dir, "."])
  const bytes = fs.readFileSync(out)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.rmSync(out, { force: true })
  return bytes
}
