/**
 * `portico deploy` as a developer runs it: the built command (bin/portico.mjs on dist/) against a
 * real gateway on both registry engines. A static site deployed (progress on stderr, the URL on
 * stdout), served on its host; --update makes version 2; a first deploy's environment lands
 * (names listed); --subdomain; a Go server compiled here, a Next.js app built here (--ssr) and a
 * Node.js app, each run sandboxed by the gateway;
 * mistakes refused before any request (exit 2); the gateway's refusals printed as one line
 * (exit 1, no stack).
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureDist, errorLines, type Ran, repoRoot, runPortico } from "../support/cli.js"
import { type Gateway, startGateway, testTmp, getOnHost } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const BASE = "apps.test"


const siteDir = (files: Readonly<Record<string, string>>): string => {
  const dir = fs.mkdtempSync(path.join(testTmp(), "deploy-cli-site-"))
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), text)
  }
  return dir
}

/** `NAME version N (TYPE, STATUS): URL` → its parts. */
const deployedLine = (ran: Ran) => {
  const match = /^(\S+) version (\d+) \((\w+), (\w+)\): (https?):\/\/([^:/]+):(\d+)\n$/.exec(ran.stdout)
  expect(match, `${ran.stdout}\n${ran.stderr}`).not.toBeNull()
  const [, name, version, type, status, scheme, host, port] = match!
  return { name, version: Number(version), type, status, scheme, host: host!, port: Number(port) }
}

beforeAll(() => ensureDist(), 180_000)

describe.each(["sqlite", "rqlite"] as const)("portico deploy, registry on %s", (engine) => {
  let gw: Gateway
  let rqlited: RqlitedServer | undefined
  let admin: string
  const deploy = (args: ReadonlyArray<string>, token?: string) =>
    runPortico(["deploy", ...args], { env: { PORTICO_URL: gw.url, PORTICO_TOKEN: token ?? admin } })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: { PORTICO_BASE_DOMAIN: BASE, ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url }) } })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("deploys a static site (detected), shows progress on stderr, prints its URL, and it is served on its host", async () => {
    const dir = siteDir({ "index.html": "<h1>v1</h1>", "css/site.css": "body{}", ".git/HEAD": "ref: refs/heads/main" })
    fs.symlinkSync("css/site.css", path.join(dir, "style.css"))
    const ran = await deploy([dir, "--name", "blog", "--env", "GREETING=hi=there"])
    expect(ran.code, ran.stderr).toBe(0)
    const line = deployedLine(ran)
    expect(line).toMatchObject({ name: "blog", version: 1, type: "static", status: "active", scheme: "http", port: gw.port })
    expect(line.host).toMatch(/^blog-[a-z0-9]{6}\.apps\.test$/)
    const stderr = errorLines(ran)
    expect(stderr[0]).toBe("type: static (detected; --type sets it)")
    expect(stderr[1]).toMatch(/^packed 2 files into \d+(\.\d)? (B|KiB)$/)
    // Not a terminal: plain lines, the last at 100%.
    expect(stderr.slice(2).every((l) => l.startsWith("uploading "))).toBe(true)
    expect(stderr.at(-1)).toMatch(/100%/)
    expect((await getOnHost(gw.port, line.host, "/")).body).toBe("<h1>v1</h1>")
    expect((await getOnHost(gw.port, line.host, "/style.css")).body).toBe("body{}")
    // .git stayed home: the path falls back to index.html.
    expect((await getOnHost(gw.port, line.host, "/.git/HEAD")).body).toBe("<h1>v1</h1>")
    const env = await gw.request("GET", "/v1/deployments/env?name=blog", { token: admin })
    expect(env.body.names).toEqual(["GREETING"])
  })

  it("--update makes version 2 on the same host", async () => {
    const first = (await gw.request("GET", "/v1/deployments/get?name=blog", { token: admin })).body
    const ran = await deploy([siteDir({ "index.html": "<h1>v2</h1>" }), "--name", "blog", "--update"])
    expect(ran.code, ran.stderr).toBe(0)
    expect(deployedLine(ran)).toMatchObject({ version: 2, host: first.domain })
    expect(errorLines(ran).some((l) => l.startsWith("updating "))).toBe(true)
    expect((await getOnHost(gw.port, first.domain, "/")).body).toBe("<h1>v2</h1>")
  })

  it("a first deploy takes --env-file under --env, and --subdomain; --json prints the record", async () => {
    const dir = siteDir({ "index.html": "<p>docs</p>" })
    const envFile = path.join(testTmp(), `deploy-cli-${engine}.env`)
    fs.writeFileSync(envFile, "# settings\nA=from-file\nB='quoted'\n")
    const ran = await deploy([dir, "--name", "docs", "--type", "static", "--subdomain", "Docs", "--env-file", envFile, "--env", "A=flag", "--json"])
    expect(ran.code, ran.stderr).toBe(0)
    // --json: the whole Deployment record instead of the URL line
    expect(JSON.parse(ran.stdout)).toMatchObject({ name: "docs", namespace: "shop", type: "static", version: 1, domain: "docs.apps.test" })
    expect((await getOnHost(gw.port, "docs.apps.test", "/")).body).toBe("<p>docs</p>")
    expect((await gw.request("GET", "/v1/deployments/env?name=docs", { token: admin })).body.names).toEqual(["A", "B"])
  })

  it("prints the gateway's refusal as one line with its code and hint, exit 1", async () => {
    const taken = await deploy([siteDir({ "index.html": "x" }), "--name", "blog"])
    expect(taken.code).toBe(1)
    const lines = errorLines(taken).filter((l) => !l.startsWith("uploading") && !l.startsWith("type:") && !l.startsWith("packed"))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^portico: the gateway refused the deploy: .+ \(DEPLOYMENT_EXISTS\)/)
    expect(taken.stderr).not.toMatch(/\n\s+at /)
    const badToken = await deploy([siteDir({ "index.html": "x" }), "--name", "other"], "portico_key_nope")
    expect(badToken.code).toBe(1)
    expect(errorLines(badToken).at(-1)).toMatch(/^portico: the gateway refused the deploy: .+ \((INVALID_API_KEY|UNAUTHORIZED|INVALID_TOKEN)\)/)
  })

  it("says when the gateway cannot be reached", async () => {
    const ran = await runPortico(["deploy", siteDir({ "index.html": "x" }), "--name", "x", "--url", "http://127.0.0.1:1", "--token", admin])
    expect(ran.code).toBe(1)
    expect(errorLines(ran).at(-1)).toMatch(/^portico: cannot reach the gateway at http:\/\/127\.0\.0\.1:1 \(/)
  })

  it("compiles a Go server here, uploads the binary, and the gateway runs it sandboxed on its host", async () => {
    const dir = siteDir({
      "go.mod": "module example.com/hello\n\ngo 1.21\n",
      "main.go": [
        "package main",
        'import ("fmt"; "net/http"; "os")',
        "func main() {",
        '  http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })',
        '  http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { b, _ := os.ReadFile("static/hi.txt"); fmt.Fprintf(w, "go says %s", b) })',
        '  http.ListenAndServe(":"+os.Getenv("PORT"), nil)',
        "}",
        ""
      ].join("\n"),
      "static/hi.txt": "hi"
    })
    const ran = await runPortico(["deploy", dir, "--name", "goapp", "--health-check", "/healthz"], {
      env: { PORTICO_URL: gw.url, PORTICO_TOKEN: admin, GOTOOLCHAIN: "local" }
    })
    expect(ran.code, ran.stderr).toBe(0)
    const line = deployedLine(ran)
    expect(line).toMatchObject({ name: "goapp", version: 1, type: "go", status: "active" })
    expect(errorLines(ran)).toContain("building: go build (CGO_ENABLED=0 GOOS=linux GOARCH=amd64)")
    expect(errorLines(ran)).toContain("type: go (detected; --type sets it)")
    expect(await getOnHost(gw.port, line.host, "/")).toEqual({ status: 200, body: "go says hi" })
    const record = (await gw.request("GET", "/v1/deployments/get?name=goapp", { token: admin })).body
    expect(record.health_check).toBe("/healthz")
  }, 120_000)

  // The builds are the command's, not the registry's: one engine is enough for these two.
  if (engine === "sqlite") it("builds a Next.js app with --ssr here; the gateway runs its standalone server", async () => {
    const dir = siteDir({
      "package.json": JSON.stringify({ name: "web", private: true, dependencies: { next: "15", react: "19", "react-dom": "19" } }),
      "next.config.mjs": 'export default { output: "standalone", eslint: { ignoreDuringBuilds: true } }\n',
      "app/layout.js": "export default function Layout({ children }) { return <html><body>{children}</body></html> }\n",
      "app/page.js": 'export const dynamic = "force-dynamic"\nexport default function Page() { return <h1>hello from next ssr</h1> }\n',
      "app/health/route.js": 'export const dynamic = "force-dynamic"\nexport async function GET() { return new Response("ok") }\n',
      "public/robots.txt": "User-agent: *\n"
    })
    // This project's next (a devDependency), as hard links: real files inside the app's tree (the
    // real directory: a worktree's node_modules may be a link to the main checkout's).
    execFileSync("cp", ["-al", fs.realpathSync(path.join(repoRoot, "node_modules")), path.join(dir, "node_modules")])
    const ran = await deploy([dir, "--name", "web", "--ssr"])
    expect(ran.code, ran.stderr.slice(-2000)).toBe(0)
    const line = deployedLine(ran)
    expect(line).toMatchObject({ name: "web", type: "nextjs", status: "active" })
    const page = await getOnHost(gw.port, line.host, "/")
    expect(page.status).toBe(200)
    expect(page.body).toContain("hello from next ssr")
    expect((await getOnHost(gw.port, line.host, "/robots.txt")).body).toBe("User-agent: *\n")
  }, 300_000)

  if (engine === "sqlite") it("uploads a Node.js app as it is and the gateway starts it with its environment", async () => {
    const dir = siteDir({
      "package.json": JSON.stringify({ name: "api", version: "1.0.0", scripts: { start: "node server.js" } }),
      "server.js": 'require("node:http").createServer((q, s) => s.end(q.url === "/health" ? "ok" : "node says " + process.env.GREETING)).listen(process.env.PORT)\n'
    })
    const ran = await deploy([dir, "--name", "api", "--env", "GREETING=hey"])
    expect(ran.code, ran.stderr).toBe(0)
    const line = deployedLine(ran)
    expect(line).toMatchObject({ type: "nodejs", status: "active" })
    expect(await getOnHost(gw.port, line.host, "/")).toEqual({ status: 200, body: "node says hey" })
  }, 300_000)

  it("refuses --env with --update and a bad name before any request (exit 2)", async () => {
    // A gateway URL where nothing listens: a request would fail as "cannot reach", not as these.
    const nowhere = { PORTICO_URL: "http://127.0.0.1:1", PORTICO_TOKEN: admin }
    const withEnv = await runPortico(["deploy", siteDir({ "index.html": "x" }), "--name", "blog", "--update", "--env", "A=1"], { env: nowhere })
    expect(withEnv.code).toBe(2)
    expect(errorLines(withEnv)).toEqual(["portico: --env and --env-file are for a first deploy only; change a deployed app's environment with the env/set route"])
    const badName = await runPortico(["deploy", siteDir({ "index.html": "x" }), "--name", "no spaces"], { env: nowhere })
    expect(badName.code).toBe(2)
    expect(errorLines(badName)).toEqual(["portico: --name: 1-56 characters of letters, digits, '-' and '_', the first a letter or digit"])
    const platformName = await runPortico(["deploy", siteDir({ "index.html": "x" }), "--name", "a", "--env", "PORT=80"], { env: nowhere })
    expect(platformName.code).toBe(2)
    expect(errorLines(platformName)).toEqual(["portico: environment: env.PORT: set by the platform; it cannot be set or removed"])
  })
})
