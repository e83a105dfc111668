import { Effect, Exit, Fiber } from "effect"
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"
import * as zlib from "node:zlib"
import * as tar from "tar-stream"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { type ArchiveLimits, ArchiveRefused, DEFAULT_ARCHIVE_LIMITS, extractArchive } from "../../../src/layers/deployments/Archive.js"

let dir: string
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "portico-archive-"))
})
afterEach(async () => {
  await fs.rm(dir, { recursive: true, force: true })
})

type Entry = Partial<tar.Header> & { name: string; body?: string | Buffer }

/** A tar.gz built entry by entry with tar-stream's packer, so hostile headers can be written. */
const pack = async (entries: ReadonlyArray<Entry>): Promise<Buffer> => {
  const packer = tar.pack()
  const gzipped = Readable.from(packer).pipe(zlib.createGzip())
  const chunks: Array<Buffer> = []
  const done = (async () => {
    for await (const chunk of gzipped) chunks.push(chunk as Buffer)
  })()
  for (const { body, ...header } of entries) {
    await new Promise<void>((resolve, reject) => {
      packer.entry(header, body ?? "", (error) => (error ? reject(error) : resolve()))
    })
  }
  packer.finalize()
  await done
  return Buffer.concat(chunks)
}

const chunked = async function* (bytes: Buffer, size = 4096) {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}

const run = (bytes: Buffer, target: string, limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS) => Effect.runPromiseExit(extractArchive(chunked(bytes), target, limits))

const refusal = async (bytes: Buffer, limits?: ArchiveLimits) => {
  const target = path.join(dir, "out")
  const exit = await run(bytes, target, limits)
  if (Exit.isSuccess(exit)) throw new Error("the archive was taken")
  // nothing left: neither the target nor a partial directory beside it
  expect(await fs.readdir(dir)).toEqual([])
  const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  expect(error).toBeInstanceOf(ArchiveRefused)
  return error as ArchiveRefused
}

describe("archive: what is taken", () => {
  it("unpacks a tar.gz made by GNU tar, read as a stream", async () => {
    const site = path.join(dir, "site")
    await fs.mkdir(path.join(site, "assets", "img"), { recursive: true })
    await fs.writeFile(path.join(site, "index.html"), "<h1>hi</h1>")
    await fs.writeFile(path.join(site, "assets", "app.js"), "console.log(1)")
    await fs.writeFile(path.join(site, "run.sh"), "#!/bin/sh\n", { mode: 0o4775 })
    await fs.writeFile(path.join(site, "assets", "img", "big.bin"), Buffer.alloc(300_000, 7))
    await fs.symlink("assets/app.js", path.join(site, "latest.js"))
    await fs.symlink("../app.js", path.join(site, "assets", "img", "up.js"))
    await fs.link(path.join(site, "index.html"), path.join(site, "home.html"))
    const archive = path.join(dir, "site.tar.gz")
    execFileSync("tar", ["-czf", archive, "-C", site, "."])
    const target = path.join(dir, "deploy", "v1")
    const summary = await Effect.runPromise(extractArchive(fsSync.createReadStream(archive, { highWaterMark: 1024 }), target))
    // home.html is a hard link to index.html, not a file of its own
    expect(summary.files).toBe(4)
    expect(summary.unpackedBytes).toBe(11 + 14 + 10 + 300_000)
    expect(summary.compressedBytes).toBe((await fs.stat(archive)).size)
    expect(await fs.readFile(path.join(target, "index.html"), "utf8")).toBe("<h1>hi</h1>")
    expect(await fs.readFile(path.join(target, "home.html"), "utf8")).toBe("<h1>hi</h1>")
    expect(await fs.readFile(path.join(target, "latest.js"), "utf8")).toBe("console.log(1)")
    expect(await fs.readFile(path.join(target, "assets", "img", "up.js"), "utf8")).toBe("console.log(1)")
    expect((await fs.readFile(path.join(target, "assets", "img", "big.bin"))).equals(Buffer.alloc(300_000, 7))).toBe(true)
    // executable kept, setuid and group/other write dropped
    expect((await fs.stat(path.join(target, "run.sh"))).mode & 0o7777).toBe(0o755)
    expect((await fs.stat(path.join(target, "index.html"))).mode & 0o7777).toBe(0o644)
    expect((await fs.stat(target)).mode & 0o777).toBe(0o755)
    expect(await fs.readdir(path.join(dir, "deploy"))).toEqual(["v1"])
  })
  it("takes long names (pax/GNU headers) and a directory entry for the root", async () => {
    const long = `${"d".repeat(120)}/${"f".repeat(150)}.txt`
    const target = path.join(dir, "out")
    const exit = await run(await pack([{ name: "./", type: "directory" }, { name: long, body: "deep" }]), target)
    expect(Exit.isSuccess(exit)).toBe(true)
    expect(await fs.readFile(path.join(target, long), "utf8")).toBe("deep")
  })
  it("refuses a target that exists, touching nothing in it", async () => {
    const target = path.join(dir, "taken")
    await fs.mkdir(target)
    await fs.writeFile(path.join(target, "keep"), "x")
    const exit = await run(await pack([{ name: "a.txt", body: "a" }]), target)
    expect(Exit.isFailure(exit)).toBe(true)
    expect(await fs.readdir(dir)).toEqual(["taken"])
    expect(await fs.readdir(target)).toEqual(["keep"])
  })
})

describe("archive: hostile entries are refused whole", () => {
  it("an absolute path", async () => {
    const error = await refusal(await pack([{ name: "ok.txt", body: "fine" }, { name: "/etc/evil", body: "x" }]))
    expect(error).toMatchObject({ reason: "absolute_path", path: "/etc/evil" })
    expect(error.overCap).toBe(false)
  })
  it("a '..' segment, anywhere in the path", async () => {
    for (const name of ["../evil", "a/../../evil", "a/b/.."]) {
      expect(await refusal(await pack([{ name: "a/", type: "directory" }, { name, body: "x" }]))).toMatchObject({ reason: "parent_segment", path: name })
    }
  })
  it("a symlink whose target leaves the tree", async () => {
    for (const linkname of ["/etc/passwd", "../outside", "a/../../outside", ""]) {
      expect(await refusal(await pack([{ name: "link", type: "symlink", linkname }]))).toMatchObject({ reason: "link_escapes", path: "link" })
    }
  })
  it("a chain of links that leaves the tree though each link alone stays in", async () => {
    const error = await refusal(
      await pack([
        { name: "sub/", type: "directory" },
        { name: "sub/up", type: "symlink", linkname: ".." },
        { name: "x", type: "symlink", linkname: "sub/up/.." }
      ])
    )
    expect(error).toMatchObject({ reason: "link_escapes", path: "x" })
  })
  it("a file written through a symlink, even one pointing inside", async () => {
    const error = await refusal(
      await pack([
        { name: "real/", type: "directory" },
        { name: "alias", type: "symlink", linkname: "real" },
        { name: "alias/file", body: "x" }
      ])
    )
    expect(error).toMatchObject({ reason: "through_link", path: "alias/file" })
  })
  it("a file over a planted symlink of the same name", async () => {
    const error = await refusal(await pack([{ name: "f", type: "symlink", linkname: "g" }, { name: "f", body: "x" }]))
    expect(error).toMatchObject({ reason: "duplicate_entry", path: "f" })
  })
  it("a hard link out of the tree or to nothing", async () => {
    expect(await refusal(await pack([{ name: "h", type: "link", linkname: "/etc/passwd" }]))).toMatchObject({ reason: "link_escapes", path: "h" })
    expect(await refusal(await pack([{ name: "h", type: "link", linkname: "../x" }]))).toMatchObject({ reason: "link_escapes", path: "h" })
    expect(await refusal(await pack([{ name: "h", type: "link", linkname: "missing" }]))).toMatchObject({ reason: "malformed", path: "h" })
    // to a symlink rather than a file
    expect(await refusal(await pack([{ name: "s", type: "symlink", linkname: "t" }, { name: "h", type: "link", linkname: "s" }]))).toMatchObject({ path: "h" })
  })
  it("devices and fifos", async () => {
    for (const type of ["character-device", "block-device", "fifo"] as const) {
      expect(await refusal(await pack([{ name: "ok", body: "x" }, { name: "dev", type, devmajor: 1, devminor: 3 }]))).toMatchObject({ reason: "special_file", path: "dev" })
    }
  })
  it("a fifo made by GNU tar from a real one", async () => {
    const src = path.join(dir, "src")
    await fs.mkdir(src)
    execFileSync("mkfifo", [path.join(src, "pipe")])
    const archive = execFileSync("tar", ["-cz", "-C", src, "."])
    await fs.rm(src, { recursive: true })
    expect(await refusal(archive)).toMatchObject({ reason: "special_file", path: "./pipe" })
  })
  it("control characters and backslashes in names", async () => {
    expect(await refusal(await pack([{ name: "a\nb", body: "x" }]))).toMatchObject({ reason: "bad_name" })
    expect(await refusal(await pack([{ name: "..\\evil", body: "x" }]))).toMatchObject({ reason: "bad_name" })
  })
  it("what is not a tar.gz, or is cut short", async () => {
    expect(await refusal(Buffer.from("plainly not gzip"))).toMatchObject({ reason: "malformed" })
    const whole = await pack([{ name: "a", body: "x".repeat(100_000) }])
    expect(await refusal(whole.subarray(0, Math.floor(whole.length / 2)))).toMatchObject({ reason: "malformed" })
    const raw = zlib.gzipSync(Buffer.from("x".repeat(2048)))
    expect(await refusal(raw)).toMatchObject({ reason: "malformed" })
  })
})

describe("archive: caps", () => {
  const small: ArchiveLimits = { maxCompressedBytes: 64 * 1024, maxUnpackedBytes: 256 * 1024, maxEntries: 10 }
  it("on the uploaded size, counted as it streams", async () => {
    const noise = randomBytes(100_000)
    const error = await refusal(await pack([{ name: "noise", body: noise }]), { ...small, maxUnpackedBytes: 1024 * 1024 })
    expect(error).toMatchObject({ reason: "compressed_too_large" })
    expect(error.overCap).toBe(true)
  })
  it("on the unpacked size, from the header before writing", async () => {
    expect(await refusal(await pack([{ name: "a", body: Buffer.alloc(200 * 1024) }, { name: "b", body: Buffer.alloc(100 * 1024) }]), small)).toMatchObject({ reason: "unpacked_too_large", path: "b" })
  })
  it("on a gzip bomb of zeros after the archive's end", async () => {
    const archive = zlib.gunzipSync(await pack([{ name: "a", body: "x" }]))
    const bomb = zlib.gzipSync(Buffer.concat([archive, Buffer.alloc(8 * 1024 * 1024)]))
    expect(bomb.length).toBeLessThan(small.maxCompressedBytes)
    expect(await refusal(bomb, small)).toMatchObject({ reason: "unpacked_too_large" })
  })
  it("on the entry count", async () => {
    const entries = Array.from({ length: 11 }, (_, i) => ({ name: `f${i}`, body: "x" }))
    expect(await refusal(await pack(entries), small)).toMatchObject({ reason: "too_many_entries" })
    const target = path.join(dir, "ten")
    expect(Exit.isSuccess(await run(await pack(entries.slice(0, 10)), target, small))).toBe(true)
  })
})

describe("archive: interruption", () => {
  it("ends only once the unpacking has stopped and removed its partial directory, the source stalled mid-entry", async () => {
    // half of a large entry, then a source that never sends more (a client gone quiet)
    const bytes = await pack([{ name: "first.txt", body: "one" }, { name: "big.bin", body: randomBytes(512 * 1024) }])
    let sent = 0
    const stalled = async function* () {
      for await (const chunk of chunked(bytes.subarray(0, Math.floor(bytes.length / 2)))) {
        sent += chunk.byteLength
        yield chunk
      }
      await new Promise(() => {})
    }
    const target = path.join(dir, "out")
    const fiber = Effect.runFork(extractArchive(stalled(), target))
    // the partial directory holds the first file: the unpacking is under way
    for (let i = 0; i < 500; i++) {
      const partial = (await fs.readdir(dir)).find((name) => name.startsWith(".out.partial-"))
      if (partial !== undefined && fsSync.existsSync(path.join(dir, partial, "first.txt"))) break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    expect(sent).toBeGreaterThan(0)
    expect((await fs.readdir(dir)).length).toBe(1)
    const exit = await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    // at once, not some turns later: nothing is left beside the target, nor the target
    expect(fsSync.readdirSync(dir)).toEqual([])
  })
})
