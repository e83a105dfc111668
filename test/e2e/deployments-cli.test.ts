/**
 * `portico deployments …` and what `portico deploy` does before and after its upload, as a new
 * user meets them (issue 34): the built command (bin/portico.mjs on dist/) against a real gateway.
 * A taken or missing name refused before anything is built or packed; list, get, versions,
 * rollback, env, logs, domains (verified over the DNS stand-in) and delete through the typed
 * client; a Node.js app without /health that says what it waits for, fails with a hint naming
 * --health-check, and is fixed by `--update --health-check /`; a gateway without the sandbox
 * helpers naming the command that installs them.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DnsStandIn, startDnsStandIn } from "../support/dnsStandIn.js"
import { ensureDist, errorLines, type Ran, runPortico } from "../support/cli.js"
import { type Gateway, getOnHost, startGateway, testTmp } from "../support/gateway.js"

const BASE = "apps.test"

const appDir = (files: Readonly<Record<string, string>>): string => {
  const dir = fs.mkdtempSync(path.join(testTmp(), "deployments-cli-"))
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), text)
  }
  return dir
}

/** A `portico: …` failure line (the last of stderr) with its exit code. */
const failure = (ran: Ran) => ({ code: ran.code, line: errorLines(ran).at(-1) ?? "" })

beforeAll(() => ensureDist(), 180_000)

describe("portico deployments, and deploy's checks before its upload", () => {
  let gw: Gateway
  let dns: DnsStandIn
  let admin: string
  const portico = (args: ReadonlyArray<string>) => runPortico(args, { env: { PORTICO_URL: gw.url, PORTICO_TOKEN: admin } })
  const ok = async (args: ReadonlyArray<string>): Promise<Ran> => {
    const ran = await portico(args)
    expect(ran.code, `${args.join(" ")}: ${ran.stderr}`).toBe(0)
    return ran
  }

  beforeAll(async () => {
    dns = await startDnsStandIn()
    gw = await startGateway({ env: { PORTICO_BASE_DOMAIN: BASE, PORTICO_DNS_SERVERS: dns.server, PORTICO_APP_START_TIMEOUT_MS: "6000" } })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    await dns?.close()
  })

  it("refuses a taken name, an update of a missing one and an update of another type before building or packing", async () => {
    await ok(["deploy", appDir({ "index.html": "<p>v1</p>" }), "--name", "blog"])

    const taken = await portico(["deploy", appDir({ "index.html": "x" }), "--name", "blog"])
    expect(failure(taken)).toEqual({
      code: 1,
      line: "portico: the gateway refused the deploy: deployment blog exists in this namespace (DEPLOYMENT_EXISTS): add --update to deploy a new version of it, or choose another --name"
    })
    expect(taken.stderr).not.toMatch(/^(packed|uploading)/m)
    // a Go app of a taken name is not compiled (no go.mod build line, and no Go toolchain needed)
    const goTaken = await portico(["deploy", appDir({ "go.mod": "module x\n", "main.go": "package main\n" }), "--name", "blog"])
    expect(failure(goTaken).line).toMatch(/\(DEPLOYMENT_EXISTS\)/)
    expect(goTaken.stderr).not.toMatch(/^building:/m)

    const missing = await portico(["deploy", appDir({ "index.html": "x" }), "--name", "nothere", "--update"])
    expect(failure(missing)).toEqual({
      code: 1,
      line: "portico: the gateway refused the deploy: no deployment nothere in this namespace (NOT_FOUND): deploy it first, without --update"
    })
    expect(missing.stderr).not.toMatch(/^packed/m)

    const otherType = await portico(["deploy", appDir({ "go.mod": "module x\n", "main.go": "package main\n" }), "--name", "blog", "--update"])
    expect(failure(otherType)).toEqual({ code: 1, line: "portico: deployment blog is static; this directory deploys as go (--type sets it)" })
    expect(otherType.stderr).not.toMatch(/^building:/m)
  }, 90_000)

  it("lists and gets deployments, lists versions, rolls back, as lines or --json", async () => {
    await ok(["deploy", appDir({ "index.html": "<p>v2</p>" }), "--name", "blog", "--update"])
    const listed = await ok(["deployments", "list"])
    expect(listed.stdout).toMatch(new RegExp(`^blog version 2 \\(static, active\\): http://blog-[a-z0-9]{6}\\.apps\\.test:${gw.port}\n$`))
    const record = JSON.parse((await ok(["deployments", "get", "blog", "--json"])).stdout)
    expect(record).toMatchObject({ name: "blog", type: "static", version: 2, health_check: null })
    const got = await ok(["deployments", "get", "blog"])
    expect(got.stdout.split("\n")[0]).toBe(`blog version 2 (static, active): http://${record.domain}:${gw.port}`)

    const versions = (await ok(["deployments", "versions", "blog"])).stdout.trimEnd().split("\n")
    expect(versions).toHaveLength(2)
    expect(versions[0]).toMatch(/^\*   2  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  update$/)
    expect(versions[1]).toMatch(/^    1  .+  upload$/)

    const rolled = await ok(["deployments", "rollback", "blog", "--to", "1"])
    expect(rolled.stdout).toBe(`blog version 3 (static, active): http://${record.domain}:${gw.port}\n`)
    expect((await getOnHost(gw.port, record.domain, "/")).body).toBe("<p>v1</p>")
    expect((await ok(["deployments", "versions", "blog"])).stdout.split("\n")[0]).toMatch(/^\*   3  .+  rollback to 1$/)
    const json = JSON.parse((await ok(["deployments", "versions", "blog", "--json"])).stdout)
    expect(json).toMatchObject({ name: "blog", current: 3 })

    const unknown = await portico(["deployments", "rollback", "blog", "--to", "9"])
    expect(failure(unknown).code).toBe(1)
    expect(failure(unknown).line).toMatch(/^portico: the gateway refused the rollback: .+ \(NOT_FOUND\)/)
  }, 90_000)

  it("lists, sets and unsets the environment without printing a value", async () => {
    const envFile = path.join(testTmp(), `deployments-cli-${process.pid}.env`)
    fs.writeFileSync(envFile, "FROM_FILE=secret-one\nB=two\n")
    const set = await ok(["deployments", "env", "blog", "--set", "A=secret-a", "--env-file", envFile])
    expect(set.stdout).toBe("A\nB\nFROM_FILE\n")
    expect(errorLines(set)).toEqual(["blog: environment recorded (nothing runs to restart)"])
    const unset = await ok(["deployments", "env", "blog", "--unset", "B"])
    expect(unset.stdout).toBe("A\nFROM_FILE\n")
    const listed = await ok(["deployments", "env", "blog"])
    expect(listed.stdout).toBe("A\nFROM_FILE\n")
    expect(listed.stdout + set.stdout + unset.stdout).not.toContain("secret")
    expect(JSON.parse((await ok(["deployments", "env", "blog", "--json"])).stdout)).toMatchObject({ name: "blog", names: ["A", "FROM_FILE"] })

    const platform = await portico(["deployments", "env", "blog", "--set", "PORT=1"])
    expect(failure(platform)).toEqual({ code: 2, line: "portico: environment: env.PORT: set by the platform; it cannot be set or removed" })
  }, 90_000)

  it("adds a custom domain, prints its TXT record, verifies it over DNS, lists and removes it", async () => {
    const added = await ok(["deployments", "domains", "blog", "--add", "www.example.com"])
    const match = /^www\.example\.com: publish the TXT record _portico-verify\.www\.example\.com "(portico-verify-[A-Za-z0-9_-]{22})", then: portico deployments domains blog --verify www\.example\.com\n$/.exec(added.stdout)
    expect(match, added.stdout).not.toBeNull()
    const token = match![1]!

    const early = await portico(["deployments", "domains", "blog", "--verify", "www.example.com"])
    expect(failure(early).code).toBe(1)
    expect(failure(early).line).toMatch(/^portico: the gateway refused the verification: .+ \(DOMAIN_NOT_VERIFIED\)/)
    expect((await ok(["deployments", "domains", "blog"])).stdout).toBe(`www.example.com  not verified: TXT _portico-verify.www.example.com "${token}"\n`)

    dns.setTxt("_portico-verify.www.example.com", [token])
    expect((await ok(["deployments", "domains", "blog", "--verify", "www.example.com"])).stdout).toBe("www.example.com serves blog\n")
    expect((await getOnHost(gw.port, "www.example.com", "/")).body).toBe("<p>v1</p>")
    expect((await ok(["deployments", "domains", "blog"])).stdout).toMatch(/^www\.example\.com  verified \d{4}-\d\d-\d\dT.+Z\n$/)
    expect((await ok(["deployments", "domains", "blog", "--remove", "www.example.com"])).stdout).toBe("removed www.example.com\n")
    expect((await ok(["deployments", "domains", "blog"])).stdout).toBe("")
  }, 90_000)

  it("deletes a deployment; then every command says it is not there", async () => {
    expect((await ok(["deployments", "delete", "blog"])).stdout).toBe("deleted blog\n")
    const gone = await portico(["deployments", "get", "blog"])
    expect(failure(gone).code).toBe(1)
    expect(failure(gone).line).toMatch(/^portico: the gateway refused the request: .+ \(NOT_FOUND\)/)
    expect((await ok(["deployments", "list"])).stdout).toBe("")
  }, 90_000)

  it("refuses usage mistakes before any request (exit 2), and lists its commands", async () => {
    const nowhere = { PORTICO_URL: "http://127.0.0.1:1", PORTICO_TOKEN: "x" }
    const noTo = await runPortico(["deployments", "rollback", "blog"], { env: nowhere })
    expect(failure(noTo)).toEqual({ code: 2, line: "portico: deployments rollback needs --to N, the version to serve again (see `portico deployments versions NAME`)" })
    const noName = await runPortico(["deployments", "logs"], { env: nowhere })
    expect(failure(noName)).toEqual({ code: 2, line: "portico: deployments logs needs the deployment's name: portico deployments logs NAME" })
    const notPair = await runPortico(["deployments", "env", "blog", "--set", "novalue"], { env: nowhere })
    expect(failure(notPair)).toEqual({ code: 2, line: "portico: --set: 'novalue' is not KEY=VALUE" })
    const two = await runPortico(["deployments", "domains", "blog", "--add", "a.example", "--remove", "b.example"], { env: nowhere })
    expect(failure(two)).toEqual({ code: 2, line: "portico: give one of --add, --verify and --remove" })
    const help = await runPortico(["deployments", "--help"])
    expect(help.code).toBe(0)
    for (const command of ["list", "get", "logs", "env", "versions", "rollback", "delete", "domains"]) expect(help.stdout).toContain(`portico deployments ${command}`)
    const deployHelp = await runPortico(["deploy", "--help"])
    expect(deployHelp.stdout).toMatch(/^usage: portico deploy .*\[--json\]$/m)
  }, 90_000)

  it("a Node.js app without /health: deploy says what it waits for, fails naming --health-check, and `--update --health-check /` fixes it", async () => {
    const dir = appDir({
      "package.json": JSON.stringify({ name: "nohealth", version: "1.0.0", main: "server.js" }),
      "server.js": 'require("node:http").createServer((q, s) => { s.writeHead(q.url === "/" ? 200 : 404); s.end("root " + q.url) }).listen(process.env.PORT)\n'
    })
    const failed = await portico(["deploy", dir, "--name", "api"])
    expect(failed.code, failed.stderr).toBe(1)
    const lines = errorLines(failed)
    expect(lines).toContain("uploaded; the gateway is unpacking and preparing the app")
    expect(lines).toContain("the gateway started version 1: waiting for it to answer 200 on /health (up to 6 s)")
    expect(lines.at(-1)).toBe(
      `portico: the gateway refused the deploy: the app did not start: the app did not answer 200 on /health within 6 s (APP_START_FAILED): ` +
        `its output: \`portico deployments logs api\`; an app that answers 200 on another path than /health: \`portico deploy ${dir} --name api --update --health-check PATH\``
    )
    expect((await ok(["deployments", "get", "api"])).stdout).toMatch(/^api version 1 \(nodejs, failed\): /)

    const fixed = await ok(["deploy", dir, "--name", "api", "--update", "--health-check", "/"])
    expect(fixed.stdout).toMatch(/^api version 2 \(nodejs, active\): http:\/\/api-[a-z0-9]{6}\.apps\.test:\d+\n$/)
    const record = JSON.parse((await ok(["deployments", "get", "api", "--json"])).stdout)
    expect(record).toMatchObject({ status: "active", version: 2, health_check: "/" })
    expect(await getOnHost(gw.port, record.domain, "/")).toEqual({ status: 200, body: "root /" })

    // the gateway's own lines about the starts are in the app's log
    const logs = await ok(["deployments", "logs", "api", "--lines", "50"])
    expect(logs.stdout).toMatch(/\[portico\]/)
    await ok(["deployments", "delete", "api"])
  }, 120_000)
})

describe("a gateway without the sandbox helpers", () => {
  let gw: Gateway
  let admin: string

  beforeAll(async () => {
    // no helper in this engines directory: the gateway serves static sites only
    gw = await startGateway({ env: { PORTICO_BASE_DOMAIN: BASE, PORTICO_ENGINES_DIR: fs.mkdtempSync(path.join(testTmp(), "no-engines-")) } })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
  })

  it("refuses a dynamic deploy with 503 naming the command that installs the sandbox, and deploys a static site", async () => {
    const env = { PORTICO_URL: gw.url, PORTICO_TOKEN: admin }
    const dynamic = await runPortico(["deploy", appDir({ "index.js": "" }), "--name", "api", "--type", "nodejs"], { env })
    expect(failure(dynamic).code).toBe(1)
    expect(failure(dynamic).line).toMatch(
      /^portico: the gateway refused the deploy: this gateway cannot run apps: portico-sandbox-\w+ is not installed \(UNAVAILABLE\): on the gateway's machine, as root: `bash scripts\/engines\.sh sandbox`/
    )
    const site = await runPortico(["deploy", appDir({ "index.html": "ok" }), "--name", "site"], { env })
    expect(site.code, site.stderr).toBe(0)
  }, 90_000)
})
