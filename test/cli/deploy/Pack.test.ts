/**
 * The deploy command's archive: what goes in (files, modes, directories, links inside the tree,
 * sources placed under a path), what stays out (.git) and what is refused before any upload
 * (links leaving the tree by text or through a chain, absolute links, fifos). Each archive is read
 * back by GNU tar and unpacked by the gateway's own extractArchive, so client and server agree.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { CliError } from "../../../src/cli/Cli.js"
import { packArchive } from "../../../src/cli/deploy/Pack.js"
import { extractArchive } from "../../../src/layers/deployments/Archive.js"

let dir: string
let app: string
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-pack-"))
  app = path.join(dir, "app")
  fs.mkdirSync(app)
})
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

const write = (rel: string, text: string, mode = 0o644): void => {
  fs.mkdirSync(path.dirname(path.join(app, rel)), { recursive: true })
  fs.writeFileSync(path.join(app, rel), text, { mode })
}

const listing = (archive: string): Array<string> => execFileSync("tar", ["-tzf", archive], { encoding: "utf8" }).split("\n").filter((l) => l !== "")

const unpack = async (archive: string): Promise<string> => {
  const target = path.join(dir, "unpacked")
  await Effect.runPromise(extractArchive(fs.createReadStream(archive), target))
  return target
}

const refusal = async (promise: Promise<unknown>): Promise<string> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e
  )
  expect(error).toBeInstanceOf(CliError)
  return (error as CliError).message
}

describe("packArchive", () => {
  it("packs files, directories and inner links in name order, keeps the execute bit, leaves .git out", async () => {
    write("index.html", "<h1>hi</h1>")
    write("js/app.js", "console.log(1)")
    write("bin/run", "#!/bin/sh\necho run\n", 0o755)
    write(".git/HEAD", "ref: refs/heads/main")
    write("vendor/.git", "gitdir: ../.git/modules/vendor")
    write("vendor/lib.js", "x")
    fs.symlinkSync("js/app.js", path.join(app, "latest.js"))
    fs.symlinkSync("../js", path.join(app, "bin", "js"))
    const out = path.join(dir, "app.tar.gz")
    const packed = await packArchive([{ from: app, as: "" }], out)
    expect(packed.files).toBe(4)
    expect(packed.bytes).toBe(fs.statSync(out).size)
    expect(listing(out)).toEqual(["bin/", "bin/js", "bin/run", "index.html", "js/", "js/app.js", "latest.js", "vendor/", "vendor/lib.js"])
    const target = await unpack(out)
    expect(fs.readFileSync(path.join(target, "latest.js"), "utf8")).toBe("console.log(1)")
    expect(fs.readlinkSync(path.join(target, "bin", "js"))).toBe("../js")
    expect(fs.statSync(path.join(target, "bin", "run")).mode & 0o777).toBe(0o755)
    expect(fs.statSync(path.join(target, "index.html")).mode & 0o777).toBe(0o644)
    expect(fs.existsSync(path.join(target, ".git"))).toBe(false)
  })

  it("places several sources: a file under a name and directories under a path (parents made first)", async () => {
    write("server.js", "s")
    const extra = path.join(dir, "static")
    fs.mkdirSync(extra)
    fs.writeFileSync(path.join(extra, "a.css"), "a")
    const binary = path.join(dir, "built")
    fs.writeFileSync(binary, "\x7fELF", { mode: 0o755 })
    const out = path.join(dir, "app.tar.gz")
    await packArchive(
      [
        { from: app, as: "" },
        { from: extra, as: ".next/static" },
        { from: binary, as: "app" }
      ],
      out
    )
    expect(listing(out)).toEqual(["server.js", ".next/", ".next/static/", ".next/static/a.css", "app"])
    const target = await unpack(out)
    expect(fs.readFileSync(path.join(target, ".next/static/a.css"), "utf8")).toBe("a")
    expect(fs.statSync(path.join(target, "app")).mode & 0o777).toBe(0o755)
  })

  it("refuses a link leaving the tree, naming it, and leaves no archive behind", async () => {
    write("a.txt", "a")
    fs.symlinkSync("../../etc/passwd", path.join(app, "passwd"))
    const out = path.join(dir, "app.tar.gz")
    expect(await refusal(packArchive([{ from: app, as: "" }], out))).toMatch(/passwd is a link to "..\/..\/etc\/passwd", outside the app's directory/)
    expect(fs.existsSync(out)).toBe(false)
  })

  it("refuses an absolute link, even one pointing inside", async () => {
    write("a.txt", "a")
    fs.symlinkSync(path.join(app, "a.txt"), path.join(app, "abs"))
    expect(await refusal(packArchive([{ from: app, as: "" }], path.join(dir, "x.tar.gz")))).toMatch(/abs is a link to the absolute path/)
  })

  it("refuses a chain of links that each look inside by their text but resolve outside", async () => {
    // sub/up -> .. is the app itself; x -> sub/up/.. reads as "sub", but resolves to the app's parent.
    fs.mkdirSync(path.join(app, "sub"))
    fs.symlinkSync("..", path.join(app, "sub", "up"))
    fs.symlinkSync("sub/up/..", path.join(app, "x"))
    const message = await refusal(packArchive([{ from: app, as: "" }], path.join(dir, "x.tar.gz")))
    expect(message).toContain(`x is a link that resolves (through other links) to ${dir}, outside the app's directory`)
  })

  it("refuses a fifo", async () => {
    write("a.txt", "a")
    execFileSync("mkfifo", [path.join(app, "pipe")])
    expect(await refusal(packArchive([{ from: app, as: "" }], path.join(dir, "x.tar.gz")))).toMatch(/pipe is not a regular file, directory or link/)
  })

  it("streams a large file without holding it (32 MiB packs and unpacks byte for byte)", async () => {
    const big = Buffer.alloc(32 * 1024 * 1024, 7)
    fs.writeFileSync(path.join(app, "big.bin"), big)
    const out = path.join(dir, "app.tar.gz")
    await packArchive([{ from: app, as: "" }], out)
    const target = await unpack(out)
    expect(fs.statSync(path.join(target, "big.bin")).size).toBe(big.length)
  })
})
