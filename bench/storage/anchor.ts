/**
 * The anchors of bench/storage/run.ts, each run as its own process pinned to CPU 0 like the
 * gateway:
 *
 *   import <warm-up-file> <warm-up-dir>
 *       Imports <warm-up-file> into <warm-up-dir> (JIT warm-up, not timed, dir removed after) and
 *       prints READY. Then, for every line `<file>\t<blocks-dir>` on stdin, imports <file> into an
 *       empty `FsBlockstore(<blocks-dir>)` with the same importer options as the gateway's
 *       embedded engine (unixfs-v1-2025 profile), reading the file with fs.createReadStream, and
 *       prints one JSON line {cid, size, ms, cpuMs, rssBase, rssPeak}: `ms` from opening the file
 *       to the importer's last entry, `cpuMs` the process's CPU time (user + system, all threads)
 *       over the same span, RSS sampled every 20 ms by this process. Exits when stdin ends. (One
 *       process takes several imports, as the gateway takes several uploads, and the driver
 *       syncs the disks between them.)
 *   serve <port> <file>
 *       node:http server answering every GET with the file (Content-Length, createReadStream
 *       piped into the response). Prints READY when listening.
 */
import { FsBlockstore } from "blockstore-fs"
import { importer } from "ipfs-unixfs-importer"
import { fixedSize } from "ipfs-unixfs-importer/chunker"
import { balanced } from "ipfs-unixfs-importer/layout"
import * as fs from "node:fs"
import * as http from "node:http"

const importFile = async (file: string, dir: string) => {
  const store = new FsBlockstore(dir)
  await store.open()
  const started = performance.now()
  let size = 0
  let last: { readonly cid: { toString(): string } } | undefined
  const content = (async function* () {
    for await (const chunk of fs.createReadStream(file, { highWaterMark: 1024 * 1024 })) {
      const bytes = chunk as Buffer
      size += bytes.length
      yield bytes
    }
  })()
  for await (const entry of importer([{ content }], store, {
    cidVersion: 1,
    rawLeaves: true,
    chunker: fixedSize({ chunkSize: 1048576 }),
    layout: balanced({ maxChildrenPerNode: 1024 }),
    reduceSingleLeafToSelf: true
  })) {
    last = entry
  }
  const ms = performance.now() - started
  await store.close()
  if (last === undefined) throw new Error("the importer produced no root")
  return { cid: last.cid.toString(), size, ms }
}

const measuredImport = async (file: string, dir: string) => {
  const rssBase = process.memoryUsage.rss()
  let rssPeak = rssBase
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
  }, 20)
  const cpu = process.cpuUsage()
  const result = await importFile(file, dir)
  const used = process.cpuUsage(cpu)
  clearInterval(sampler)
  rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
  process.stdout.write(JSON.stringify({ ...result, cpuMs: (used.user + used.system) / 1000, rssBase, rssPeak }) + "\n")
}

const runImports = async (warmupFile: string, warmupDir: string) => {
  await importFile(warmupFile, warmupDir)
  fs.rmSync(warmupDir, { recursive: true, force: true })
  process.stdout.write("READY\n")
  let pending = ""
  for await (const chunk of process.stdin) {
    pending += String(chunk)
    let end: number
    while ((end = pending.indexOf("\n")) >= 0) {
      const [file, dir] = pending.slice(0, end).split("\t")
      pending = pending.slice(end + 1)
      if (file === undefined || dir === undefined) throw new Error("expected <file>\\t<blocks-dir>")
      await measuredImport(file, dir)
    }
  }
}

const serve = (port: number, file: string) => {
  const server = http.createServer((req, res) => {
    req.resume()
    let size: number
    try {
      size = fs.statSync(file).size
    } catch {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(size) })
    fs.createReadStream(file).pipe(res)
  })
  server.listen(port, "127.0.0.1", () => process.stdout.write("READY\n"))
}

const [mode, ...args] = process.argv.slice(2)
if (mode === "import" && args.length === 2) {
  const [warmupFile, warmupDir] = args as [string, string]
  runImports(warmupFile, warmupDir).catch((e: unknown) => {
    process.stderr.write((e instanceof Error ? (e.stack ?? e.message) : String(e)) + "\n")
    process.exit(1)
  })
} else if (mode === "serve" && args.length === 2) {
  serve(Number(args[0]), args[1] as string)
} else {
  process.stderr.write("usage: anchor.ts import <warm-up-file> <warm-up-dir> (then <file>\\t<blocks-dir> lines on stdin) | serve <port> <file>\n")
  process.exit(2)
}
