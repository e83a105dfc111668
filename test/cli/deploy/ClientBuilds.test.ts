/**
 * The deploy command's builds on the developer's machine, with the real tools: a Go server
 * compiled by `go build` into the archive as `app` (an ELF executable, beside its static/ and
 * without its sources), and a Next.js app built by `next` (this project's devDependency, offline)
 * both ways: exported (out/, uploaded as static) and standalone (server.js, .next/static and
 * public/ placed where server.js finds them; the packed archive is unpacked by the gateway's
 * extractArchive and served by `node server.js`).
 */
import { Effect } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildGo, buildNext, isElf } from "../../../src/cli/deploy/ClientBuilds.js"
import { packArchive } from "../../../src/cli/deploy/Pack.js"
import { extractArchive } from "../../../src/layers/deployments/Archive.js"
import { repoRoot } from "../../support/cli.js"

let dir: string
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-builds-"))
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const listing = (archive: string): Array<string> => execFileSync("tar", ["-tzf", archive], { encoding: "utf8" }).split("\n").filter((l) => l !== "")

const writeTree = (root: string, files: Readonly<Record<string, string>>): void => {
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true })
    fs.writeFileSync(path.join(root, rel), text)
  }
}

const freePort = async (): Promise<number> => {
  const net = await import("node:net")
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })
}

describe("Go", () => {
  it("compiles for linux/amd64 without cgo into `app`, ships static/ and templates/, not the sources", async () => {
    const app = path.join(dir, "go-app")
    writeTree(app, {
      "go.mod": "module example.com/hello\n\ngo 1.21\n",
      "main.go": [
        "package main",
        'import ("net/http"; "os")',
        "func main() {",
        '  http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })',
        '  http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil)',
        "}",
        ""
      ].join("\n"),
      "static/site.css": "body{}",
      "templates/page.html": "<p>{{.}}</p>",
      "notes.md": "not shipped"
    })
    const work = fs.mkdtempSync(path.join(dir, "work-"))
    process.env["GOTOOLCHAIN"] = "local"
    const prepared = await buildGo(app, work)
    expect(prepared.type).toBe("go")
    expect(isElf(path.join(work, "app"))).toBe(true)
    const out = path.join(dir, "go.tar.gz")
    await packArchive(prepared.sources, out)
    expect(listing(out)).toEqual(["app", "static/", "static/site.css", "templates/", "templates/page.html"])
    const target = path.join(dir, "go-unpacked")
    await Effect.runPromise(extractArchive(fs.createReadStream(out), target))
    expect(fs.statSync(path.join(target, "app")).mode & 0o111).not.toBe(0)
  }, 120_000)

  it("needs go.mod at the root, and says a failed build failed", async () => {
    const noMod = path.join(dir, "go-nomod")
    writeTree(noMod, { "main.go": "package main\nfunc main() {}\n" })
    await expect(buildGo(noMod, dir)).rejects.toThrow(/a Go app needs go.mod at its root/)
    const broken = path.join(dir, "go-broken")
    writeTree(broken, { "go.mod": "module x\n\ngo 1.21\n", "main.go": "package main\nfunc main() { nope }\n" })
    await expect(buildGo(broken, fs.mkdtempSync(path.join(dir, "work-")))).rejects.toThrow(/go build failed \(exit 1\); its output is above/)
  }, 120_000)
})

describe("Next.js", () => {
  /** A minimal app-router app whose node_modules is this project's (hard links: instant, real files, no links out of the tree). */
  const nextApp = (name: string, output: "export" | "standalone" | undefined): string => {
    const app = path.join(dir, name)
    writeTree(app, {
      "package.json": JSON.stringify({ name, private: true, dependencies: { next: "15", react: "19", "react-dom": "19" } }),
      "next.config.mjs": `export default { ${output === undefined ? "" : `output: "${output}", `}eslint: { ignoreDuringBuilds: true } }\n`,
      "app/layout.js": "export default function Layout({ children }) { return <html><body>{children}</body></html> }\n",
      "app/page.js": `${output === "standalone" ? 'export const dynamic = "force-dynamic"\n' : ""}export default function Page() { return <h1>hello from next</h1> }\n`,
      "public/robots.txt": "User-agent: *\n"
    })
    try {
      execFileSync("cp", ["-al", path.join(repoRoot, "node_modules"), path.join(app, "node_modules")])
    } catch {
      execFileSync("cp", ["-a", path.join(repoRoot, "node_modules"), path.join(app, "node_modules")])
    }
    return app
  }

  it("says what to add to next.config before building", async () => {
    const app = nextApp("next-plain", undefined)
    await expect(buildNext(app, false)).rejects.toThrow(/add output: "export" to next.config.mjs/)
    await expect(buildNext(app, true)).rejects.toThrow(/--ssr deploys Next.js's standalone server: add output: "standalone" to next.config.mjs/)
  })

  it("exports a static site without --ssr", async () => {
    const app = nextApp("next-export", "export")
    const prepared = await buildNext(app, false)
    expect(prepared.type).toBe("static")
    const out = path.join(dir, "export.tar.gz")
    await packArchive(prepared.sources, out)
    const names = listing(out)
    expect(names).toContain("index.html")
    expect(names).toContain("robots.txt")
    expect(names.some((n) => n.startsWith("_next/static/"))).toBe(true)
  }, 240_000)

  it("builds the standalone server with --ssr; the archive runs with `node server.js`", async () => {
    const app = nextApp("next-ssr", "standalone")
    const prepared = await buildNext(app, true)
    expect(prepared.type).toBe("nextjs")
    const out = path.join(dir, "ssr.tar.gz")
    await packArchive(prepared.sources, out)
    const names = listing(out)
    expect(names).toContain("server.js")
    expect(names).toContain("public/robots.txt")
    const asset = names.find((n) => n.startsWith(".next/static/chunks/") && n.endsWith(".js"))
    expect(asset).toBeDefined()
    const target = path.join(dir, "ssr-unpacked")
    await Effect.runPromise(extractArchive(fs.createReadStream(out), target))
    const port = await freePort()
    const server = spawn(process.execPath, ["server.js"], { cwd: target, env: { ...process.env, PORT: String(port), HOSTNAME: "127.0.0.1" }, stdio: "ignore" })
    try {
      let page: Response | undefined
      for (let i = 0; i < 100 && page === undefined; i++) {
        page = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined)
        if (page === undefined) await new Promise((r) => setTimeout(r, 100))
      }
      expect(page?.status).toBe(200)
      expect(await page?.text()).toContain("hello from next")
      // .next/static/x is served as /_next/static/x
      expect((await fetch(`http://127.0.0.1:${port}/_next/${asset?.slice(".next/".length)}`)).status).toBe(200)
      expect(await (await fetch(`http://127.0.0.1:${port}/robots.txt`)).text()).toBe("User-agent: *\n")
    } finally {
      server.kill()
    }
  }, 240_000)
})
