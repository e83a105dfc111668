/**
 * `portico deploy`'s command line (spec §4.8): the rules checked before any build or upload, the
 * type detection, the progress line and the streamed form's bytes.
 */
import { Chunk, Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { CliError, commandHelp, parseCommand } from "../../../src/cli/Cli.js"
import { commands } from "../../../src/cli/commands.js"
import { detectAppType } from "../../../src/cli/deploy/AppType.js"
import { appUrl, describeUploadFailure, waitingLine } from "../../../src/cli/deploy/deploy.js"
import { readDeployFlags } from "../../../src/cli/deploy/DeployFlags.js"
import { progressLine, startProgress } from "../../../src/cli/deploy/Progress.js"
import { encodeDeploymentForm } from "../../../src/api/DeploymentUploadForm.js"

const command = commands.find((c) => c.words.join(" ") === "deploy")!
const env = { PORTICO_TOKEN: "portico_key_test" }

const read = (args: ReadonlyArray<string>, files: Readonly<Record<string, string>> = {}, processEnv: Readonly<Record<string, string>> = env) => {
  const parsed = parseCommand(command, args)
  if (parsed === "help") throw new Error("help")
  return readDeployFlags(parsed, processEnv, (file) => {
    const text = files[file]
    if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${file}'`)
    return text
  })
}

const usage = (args: ReadonlyArray<string>, files: Readonly<Record<string, string>> = {}, processEnv: Readonly<Record<string, string>> = env): string => {
  try {
    read(args, files, processEnv)
  } catch (error) {
    expect(error).toBeInstanceOf(CliError)
    expect((error as CliError).exitCode).toBe(2)
    return (error as CliError).message
  }
  throw new Error("not refused")
}

describe("deploy flags", () => {
  it("reads a first deploy: env file merged under --env (split on the first '='), subdomain lowercased, defaults", () => {
    const request = read(["./site", "--name", "blog", "--env-file", "f.env", "--env", "A=x=y", "--env", "B=", "--subdomain", "Blog"], {
      "f.env": "# c\nA=from-file\nC='quoted value'\n"
    })
    expect(request.dir).toBe(path.resolve("./site"))
    expect(request.name).toBe("blog")
    expect(request.type).toBeUndefined()
    expect(request.subdomain).toBe("blog")
    expect(request.env).toEqual({ A: "x=y", B: "", C: "quoted value" })
    expect(request.url.href).toBe("http://127.0.0.1:6001/")
    expect(request.token).toBe("portico_key_test")
    expect(request.update).toBe(false)
  })

  it("takes --url and --token over PORTICO_URL and PORTICO_TOKEN", () => {
    const fromEnv = read(["d", "--name", "a"], {}, { PORTICO_URL: "http://10.0.0.1:7000", PORTICO_TOKEN: "t1" })
    expect([fromEnv.url.origin, fromEnv.token]).toEqual(["http://10.0.0.1:7000", "t1"])
    const fromFlags = read(["d", "--name", "a", "--url", "https://gw.example", "--token", "t2"], {}, { PORTICO_URL: "http://x", PORTICO_TOKEN: "t1" })
    expect([fromFlags.url.origin, fromFlags.token]).toEqual(["https://gw.example", "t2"])
  })

  it.each([
    [["d", "--name", "a", "--update", "--env", "A=1"], /--env and --env-file are for a first deploy only/],
    [["d", "--name", "a", "--update", "--env-file", "f.env"], /--env and --env-file are for a first deploy only/],
    [["d", "--name", "a", "--update", "--subdomain", "x"], /--subdomain is chosen at the first deploy/],
    [["d", "--name", "b@d"], /^--name: 1-56 characters of letters, digits/],
    [["d", "--name=-bad"], /^--name: 1-56 characters/],
    [["d", "--name", "a".repeat(57)], /^--name: 1-56/],
    [["d"], /deploy needs --name NAME/],
    [["--name", "a"], /deploy needs the app's directory/],
    [["d", "--name", "a", "--type", "php"], /--type must be one of static, nextjs, go, nodejs/],
    [["d", "--name", "a", "--subdomain", "www"], /^--subdomain: 'www' is a platform host/],
    [["d", "--name", "ns-shop"], /^--name ns-shop: the host of a name beginning 'ns-' would be a namespace gateway's .* with --subdomain$/],
    [["d", "--name", "a", "--env", "PORT=1"], /env.PORT: set by the platform/],
    [["d", "--name", "a", "--env", "NOEQUALS"], /--env: 'NOEQUALS' is not KEY=VALUE/],
    [["d", "--name", "a", "--env-file", "missing.env"], /--env-file missing.env: no such file/],
    [["d", "--name", "a", "--health-check", "health"], /--health-check is a path on the app, starting with '\/'/],
    [["d", "--name", "a", "--type", "static", "--health-check", "/h"], /--health-check is for apps that run a process/],
    [["d", "--name", "a", "--type", "go", "--ssr"], /--ssr is for Next.js apps/],
    [["d", "--name", "a", "--type", "go", "--skip-install"], /--skip-install is for Node.js apps/],
    [["d", "--name", "a", "--url", "ftp://x"], /--url must be an http\(s\) URL/]
  ])("refuses %j before anything is built or sent", (args, message) => {
    expect(usage(args, { "f.env": "A=1\n" })).toMatch(message)
  })

  it("takes a name beginning 'ns-' with a subdomain, and on an update (the host is kept)", () => {
    expect(read(["d", "--name", "ns-shop", "--subdomain", "shop"]).subdomain).toBe("shop")
    expect(read(["d", "--name", "ns-shop", "--update"]).name).toBe("ns-shop")
  })

  it("refuses a bad env-file line naming it", () => {
    expect(usage(["d", "--name", "a", "--env-file", "f.env"], { "f.env": "A=1\nexport B=2\n" })).toMatch(/env-file:2/)
  })

  it("needs a credential", () => {
    expect(usage(["d", "--name", "a"], {}, {})).toMatch(/deploy needs a credential: --token T or PORTICO_TOKEN/)
  })

  it("has help naming every flag", () => {
    const help = commandHelp(command)
    for (const flag of ["--name", "--type", "--subdomain", "--update", "--env K=V", "--env-file", "--health-check", "--ssr", "--skip-install", "--url", "--token"]) {
      expect(help).toContain(flag)
    }
  })
})

describe("type detection", () => {
  let dir: string
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-detect-"))
  })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))
  const put = (name: string, text = "") => fs.writeFileSync(path.join(dir, name), text)

  it("is static for plain files", () => {
    put("index.html")
    expect(detectAppType(dir)).toBe("static")
  })
  it("is nodejs for a package.json", () => {
    put("package.json", JSON.stringify({ dependencies: { express: "4" } }))
    expect(detectAppType(dir)).toBe("nodejs")
  })
  it("is nextjs for a next dependency or a next.config", () => {
    put("package.json", JSON.stringify({ devDependencies: { next: "15" } }))
    expect(detectAppType(dir)).toBe("nextjs")
    fs.rmSync(path.join(dir, "package.json"))
    put("next.config.mjs", "export default {}")
    expect(detectAppType(dir)).toBe("nextjs")
  })
  it("is go for a go.mod, before anything else", () => {
    put("package.json", JSON.stringify({ dependencies: { next: "15" } }))
    put("go.mod", "module x\n")
    expect(detectAppType(dir)).toBe("go")
  })
  it("says which package.json is not JSON", () => {
    put("package.json", "{")
    expect(() => detectAppType(dir)).toThrow(/package.json is not valid JSON/)
  })
})

describe("output", () => {
  it("prints the app's URL with the scheme and port of --url", () => {
    expect(appUrl(new URL("http://127.0.0.1:6001"), "blog-abc123.localhost")).toBe("http://blog-abc123.localhost:6001")
    expect(appUrl(new URL("https://gw.example.com"), "blog.example.com")).toBe("https://blog.example.com")
  })

  it("describes a refusal in one line with the gateway's error, code and hint", () => {
    const line = describeUploadFailure({ _tag: "Conflict", error: "deployment exists", code: "DEPLOYMENT_EXISTS", hint: "use --update" }, new URL("http://x"))
    expect(line).toBe("the gateway refused the deploy: deployment exists (DEPLOYMENT_EXISTS): use --update")
  })

  it("draws in place on a terminal and five plain lines otherwise", () => {
    let clock = 0
    const tty: Array<string> = []
    const bar = startProgress("uploading", 1000, { isTTY: true, columns: 100, write: (t) => tty.push(t) }, () => clock)
    for (let i = 0; i < 10; i++) {
      clock += 200
      bar.advance(100)
    }
    bar.done()
    expect(tty.every((t) => t.startsWith("\r") || t === "\n")).toBe(true)
    expect(tty.at(-2)).toContain("100%")
    const plain: Array<string> = []
    const log = startProgress("uploading", 1000, { isTTY: false, write: (t) => plain.push(t) }, () => clock)
    for (let i = 0; i < 100; i++) log.advance(10)
    log.done()
    expect(plain).toHaveLength(5)
    expect(plain.at(-1)).toMatch(/100%/)
    expect(progressLine("up", 512 * 1024, 1024 * 1024, 1, 10)).toBe("up [#####-----]  50%  512.0 KiB / 1.0 MiB  512.0 KiB/s")
  })

  it("keeps the bar on a terminal of unknown width, and draws 100% once", () => {
    for (const columns of [undefined, 0]) {
      const out: Array<string> = []
      const bar = startProgress("uploading", 100, { isTTY: true, columns, write: (t) => out.push(t) }, () => 0)
      bar.advance(100)
      bar.done()
      expect(out.filter((t) => t.includes("100%")), String(columns)).toHaveLength(1)
      expect(out.find((t) => t.includes("100%"))).toContain(`[${"#".repeat(20)}]`)
      expect(out.at(-1)).toBe("\n")
    }
  })

  it("says what the gateway's events say it waits for", () => {
    expect(waitingLine("starting", { version: 2, health_path: "/ready", timeout_seconds: 60 })).toBe(
      "the gateway started version 2: waiting for it to answer 200 on /ready (up to 60 s)"
    )
    expect(waitingLine("installing", { version: 1, timeout_seconds: 240 })).toBe(
      "the gateway is installing the dependencies of version 1 (npm, registry packages only) (up to 240 s)"
    )
    expect(waitingLine("health_check_failed", { phase: "start", reason: "the app exited with code 1 before answering 200 on /health" })).toBe(
      "health check: the app exited with code 1 before answering 200 on /health"
    )
    expect(waitingLine("updated", {})).toBeUndefined()
  })

  it("encodes the form with the fields first, the archive last, and its exact length", async () => {
    const archive = new Uint8Array([1, 2, 3, 4])
    const form = encodeDeploymentForm(
      { fields: { name: "blog", env: { A: "1" }, skip_install: true }, archive: { stream: Stream.make(archive), size: archive.length } },
      "B"
    )
    const bytes = Buffer.concat(Chunk.toReadonlyArray(await Effect.runPromise(Stream.runCollect(form.body))))
    expect(bytes.length).toBe(form.contentLength)
    expect(form.contentType).toBe("multipart/form-data; boundary=B")
    const text = bytes.toString("latin1")
    expect(text.indexOf('name="name"')).toBeLessThan(text.indexOf('name="env"'))
    expect(text).toContain('name="env"\r\n\r\n{"A":"1"}\r\n')
    expect(text).toContain('name="skip_install"\r\n\r\ntrue\r\n')
    expect(text).toMatch(/name="archive"; filename="app.tar.gz"\r\nContent-Type: application\/gzip\r\n\r\n\x01\x02\x03\x04\r\n--B--\r\n$/)
  })
})
