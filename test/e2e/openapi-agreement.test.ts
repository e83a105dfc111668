/**
 * The served document and the server agree (issue 19): for a sample of the rules the document
 * now carries, an input the document accepts is not refused with 400, and an input the document
 * refuses is a 400. Each input is first checked against the document itself (JSON Schema 2020-12,
 * the dialect of OpenAPI 3.1), so the table cannot drift from what the document says.
 */
import { Ajv2020 } from "ajv/dist/2020.js"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, startGateway } from "../support/gateway.js"

interface Case {
  readonly name: string
  readonly method: string
  readonly path: string
  /** The document's path template and method, to find the schema. */
  readonly operation: readonly [string, string]
  readonly json?: unknown
  readonly query?: Record<string, string>
  /** A rule the document names as a format (a checksum no pattern can check): the pattern admits it. */
  readonly format?: string
  /** Sent with an operator's session rather than the namespace's key. */
  readonly operator?: true
}

const pointer = (...parts: ReadonlyArray<string>) => parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/")

describe("the served OpenAPI document and the server agree", () => {
  let gw: Gateway
  let key: string
  let operatorToken: string
  let ajv: InstanceType<typeof Ajv2020>
  let doc: any

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_RATE_LIMIT_NAMESPACE_RPS: "500", PORTICO_RATE_LIMIT_NAMESPACE_BURST: "900" } })
    key = (await gw.cli(["namespace", "create", "agree"])).api_key
    const operator = Wallet.createRandom()
    await gw.cli(["operator", "add", operator.address])
    const challenged = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
    const signature = await operator.signMessage(challenged.body.message)
    operatorToken = (await gw.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature } })).body.access_token
    doc = (await gw.request("GET", "/v1/openapi.json")).body
    ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true })
    ajv.addSchema(doc, "doc")
  })
  afterAll(async () => {
    await gw?.stop()
  })

  /** Whether the document accepts the case's body or query. */
  const documentAccepts = (c: Case): boolean => {
    const [method, path] = c.operation
    const base = `doc#/${pointer("paths", path, method)}`
    if (c.json !== undefined) {
      return ajv.validate({ $ref: `${base}/requestBody/content/${pointer("application/json")}/schema` }, c.json) as boolean
    }
    const parameters: Array<any> = doc.paths[path][method].parameters
    return Object.entries(c.query ?? {}).every(([name, raw]) => {
      const index = parameters.findIndex((p) => p.name === name)
      const schema = parameters[index].schema
      // a query value is text on the wire: an integer parameter takes decimal digits
      const value = schema.type === "integer" ? (/^-?[0-9]+$/.test(raw) ? Number(raw) : raw) : raw
      return ajv.validate({ $ref: `${base}/parameters/${index}/schema` }, value) as boolean
    })
  }

  const send = (c: Case) =>
    gw.request(c.method, c.path + (c.query === undefined ? "" : "?" + new URLSearchParams(c.query).toString()), {
      token: c.operator === true ? operatorToken : key,
      ...(c.json === undefined ? {} : { json: c.json })
    })

  const wallet = Wallet.createRandom().address // EIP-55 mixed case
  const flipped = wallet.slice(0, 2) + [...wallet.slice(2)].map((ch) => (/[a-f]/.test(ch) ? ch.toUpperCase() : /[A-F]/.test(ch) ? ch.toLowerCase() : ch)).join("")
  const members = ["post", "/v1/namespace/members"] as const
  const put = ["post", "/v1/cache/put"] as const
  const mint = ["post", "/v1/namespace/keys"] as const
  const limit = ["put", "/v1/namespace/rate-limit"] as const
  const audit = ["get", "/v1/audit"] as const
  const challenge = ["post", "/v1/auth/challenge"] as const
  /** `PUT /v1/operator/settings/<name>` with `{value}`, as an operator. */
  const setting = (name: string, value: unknown, label: string): Case => ({
    name: `${name} ${label}`,
    method: "PUT",
    path: `/v1/operator/settings/${name}`,
    operation: ["put", `/v1/operator/settings/${name}`],
    json: { value },
    operator: true
  })

  const conforming: ReadonlyArray<Case> = [
    { name: "an EIP-55 wallet", method: "POST", path: "/v1/namespace/members", operation: members, json: { wallet, role: "reader" } },
    { name: "a lowercase wallet", method: "POST", path: "/v1/namespace/members", operation: members, json: { wallet: wallet.toLowerCase(), role: "reader" } },
    { name: "a cache value and a ttl", method: "POST", path: "/v1/cache/put", operation: put, json: { dmap: "m", key: "k", value: 0, ttl: "1h30m" } },
    { name: "scopes alone", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { scopes: ["cache", "cache:key=m/*"] } },
    { name: "a profile alone", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { profile: "runtime" } },
    { name: "the rate ceiling", method: "PUT", path: "/v1/namespace/rate-limit", operation: limit, json: { requests_per_second: 500, burst: 900 } },
    { name: "a null rate", method: "PUT", path: "/v1/namespace/rate-limit", operation: limit, json: { requests_per_second: null } },
    { name: "audit bounds", method: "GET", path: "/v1/audit", operation: audit, query: { limit: "200", since: "999999999999999" } },
    {
      name: "a thumbprint-shaped device id",
      method: "POST",
      path: "/v1/auth/challenge",
      operation: challenge,
      json: { wallet, namespace: "agree", device_id: "A".repeat(42) + "w" }
    },
    {
      name: "a well-formed fetch-cap id",
      method: "DELETE",
      path: "/v1/storage/fetch-caps/" + "0".repeat(32),
      operation: ["delete", "/v1/storage/fetch-caps/{id}"]
    },
    setting("max-namespaces-per-wallet", 10000, "as a JSON integer (spec §4.9)"),
    setting("max-namespaces-per-wallet", 1, "at its least"),
    setting("max-namespaces-per-wallet", "10000", "as decimal digits"),
    setting("namespace-creation", "allowlist", "one of its three"),
    setting("auto-update", "notify", "one of its three"),
    setting("update-channel", "beta-2", "of a-z, 0-9 and -"),
    setting("update-window", "22-04", "across midnight"),
    setting("update-window", "", "empty"),
    setting("release-repo", "https://example.test/portico", "an https URL"),
    setting("release-repo", "", "empty"),
    { name: "a health page of 1000", method: "GET", path: "/v1/operator/health", operation: ["get", "/v1/operator/health"], query: { limit: "1000" }, operator: true }
  ]

  const violating: ReadonlyArray<Case> = [
    {
      name: "a wrong checksum",
      method: "POST",
      path: "/v1/namespace/members",
      operation: members,
      json: { wallet: flipped, role: "reader" },
      format: "evm-address"
    },
    { name: "a null cache value", method: "POST", path: "/v1/cache/put", operation: put, json: { dmap: "m", key: "k", value: null } },
    { name: "a ttl in years", method: "POST", path: "/v1/cache/put", operation: put, json: { dmap: "m", key: "k", value: 1, ttl: "1y" } },
    { name: "an empty scope", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { scopes: [""] } },
    { name: "a narrowing that reaches nothing", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { scopes: ["cache:key=x"] } },
    { name: "scopes and a profile", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { scopes: ["cache"], profile: "runtime" } },
    { name: "neither scopes nor profile", method: "POST", path: "/v1/namespace/keys", operation: mint, json: { label: "x" } },
    { name: "a burst past the ceiling", method: "PUT", path: "/v1/namespace/rate-limit", operation: limit, json: { requests_per_second: 1, burst: 901 } },
    { name: "a rate past the ceiling", method: "PUT", path: "/v1/namespace/rate-limit", operation: limit, json: { requests_per_second: 501 } },
    { name: "a burst with a null rate", method: "PUT", path: "/v1/namespace/rate-limit", operation: limit, json: { requests_per_second: null, burst: 5 } },
    { name: "an audit limit past 200", method: "GET", path: "/v1/audit", operation: audit, query: { limit: "201" } },
    { name: "a 16-digit since", method: "GET", path: "/v1/audit", operation: audit, query: { since: "1000000000000000" } },
    {
      name: "the zero address as the new owner",
      method: "POST",
      path: "/v1/namespace/members/transfer",
      operation: ["post", "/v1/namespace/members/transfer"],
      json: { wallet: "0x" + "0".repeat(40) }
    },
    {
      name: "a device id no SHA-256 gives",
      method: "POST",
      path: "/v1/auth/challenge",
      operation: challenge,
      json: { wallet, namespace: "agree", device_id: "A".repeat(42) + "B" }
    },
    setting("max-namespaces-per-wallet", 10001, "past 10000"),
    setting("max-namespaces-per-wallet", 0, "of 0"),
    setting("max-namespaces-per-wallet", 1.5, "not whole"),
    setting("max-namespaces-per-wallet", "010", "with a leading zero"),
    setting("max-namespaces-per-wallet", "10001", "past 10000 as digits"),
    setting("max-namespaces-per-wallet", true, "a boolean"),
    setting("max-namespaces-per-wallet", null, "null"),
    setting("namespace-creation", "everyone", "outside its three"),
    setting("auto-update", 1, "a number"),
    setting("update-channel", "Stable", "in capitals"),
    setting("update-channel", "x".repeat(33), "of 33 characters"),
    setting("update-window", "24-03", "past hour 23"),
    setting("update-window", "3-4", "in single digits"),
    setting("release-repo", "http://example.test/repo", "over plain http"),
    setting("release-repo", 5, "a number"),
    { name: "a health page past 1000", method: "GET", path: "/v1/operator/health", operation: ["get", "/v1/operator/health"], query: { limit: "1001" }, operator: true }
  ]

  it.each(conforming.map((c) => [c.name, c] as const))("accepts what the document accepts: %s", async (_, c) => {
    if (c.json !== undefined || c.query !== undefined) expect(documentAccepts(c), JSON.stringify(ajv.errors)).toBe(true)
    else expect(new RegExp(doc.paths[c.operation[1]][c.operation[0]].parameters[0].schema.pattern).test(c.path.split("/").pop()!)).toBe(true)
    const reply = await send(c)
    expect(reply.status, reply.text).not.toBe(400)
    expect(reply.status, reply.text).toBeLessThan(500)
  })

  it.each(violating.map((c) => [c.name, c] as const))("refuses with 400 what the document refuses: %s", async (_, c) => {
    if (c.format === undefined) expect(documentAccepts(c)).toBe(false)
    else expect(doc.components.schemas.AddMember.properties.wallet).toEqual({ $ref: "#/components/schemas/Wallet" })
    if (c.format !== undefined) expect(doc.components.schemas.Wallet.format).toBe(c.format)
    const reply = await send(c)
    expect(reply.status, reply.text).toBe(400)
    expect(reply.body.code).toBe("VALIDATION_FAILED")
  })

  it("names in Allow only the methods the document gives a fixed path, not a parametric sibling's", async () => {
    for (const path of ["/v1/namespace/members/transfer", "/v1/auth/devices/approve"]) {
      const documented = Object.keys(doc.paths[path]).map((m) => m.toUpperCase())
      const allowed = (documented.includes("GET") ? [...documented, "HEAD"] : documented).join(", ")
      expect(documented).not.toContain("DELETE")
      // PUT matches no route; DELETE matches a parametric sibling that cannot take the segment
      for (const method of ["PUT", "DELETE"]) {
        const reply = await gw.request(method, path, { token: key, json: {} })
        expect(reply.status, `${method} ${path}: ${reply.text}`).toBe(405)
        expect(reply.body.code).toBe("METHOD_NOT_ALLOWED")
        expect(reply.headers.get("allow")).toBe(allowed)
      }
    }
  })

  it("states each operator setting's values on its own route", async () => {
    const valueOf = (name: string) => {
      const body = doc.paths[`/v1/operator/settings/${name}`].put.requestBody.content["application/json"].schema
      const schema = body.$ref === undefined ? body : doc.components.schemas[body.$ref.split("/").pop()]
      expect(schema.required).toEqual(["value"])
      return JSON.stringify(schema.properties.value)
    }
    // spec §4.9: an integer 1 to 10000 (the digit string is kept beside it)
    expect(valueOf("max-namespaces-per-wallet")).toContain('"minimum":1')
    expect(valueOf("max-namespaces-per-wallet")).toContain('"maximum":10000')
    expect(valueOf("max-namespaces-per-wallet")).toMatch(/"type":"integer"|"\$ref":"#\/components\/schemas\/Int"/)
    expect(valueOf("namespace-creation")).toContain('"enum":["operators","allowlist","open"]')
    expect(valueOf("auto-update")).toContain('"enum":["off","notify","auto"]')
    expect(valueOf("update-channel")).toContain("a-z0-9-")
    expect(valueOf("update-window")).toContain('"pattern"')
    expect(valueOf("release-repo")).toContain("https://")
    // two hours alike: the pattern admits it, the description says why it is refused
    const same = setting("update-window", "03-03", "of one hour")
    expect(documentAccepts(same)).toBe(true)
    expect(valueOf("update-window")).toContain("two different")
    const reply = await send(same)
    expect(reply.status, reply.text).toBe(400)
    expect(reply.body).toEqual({
      error: "value: update-window is HH-HH (two different UTC hours 00-23) or empty",
      code: "VALIDATION_FAILED",
      hint: expect.any(String)
    })
    // the stored form is the digits, however the number was sent
    expect((await send(setting("max-namespaces-per-wallet", 25, "as an integer"))).body).toEqual({ name: "max-namespaces-per-wallet", value: "25" })
    const read = await gw.request("GET", "/v1/operator/settings/max-namespaces-per-wallet", { token: operatorToken })
    expect(read.body).toEqual({ name: "max-namespaces-per-wallet", value: "25" })
  })

  it("serves this gateway's rate-limit ceiling as the maximum", () => {
    const set = doc.components.schemas.SetRateLimit
    expect(set.properties.burst.maximum).toBe(900)
  })

  it("refuses an API key on every session-only route it lists with 403, never 400", async () => {
    const sessionOnly: Array<[string, string]> = []
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        if (operation["x-portico-credential"] === "session") sessionOnly.push([method.toUpperCase(), path])
      }
    }
    expect(sessionOnly.length).toBeGreaterThan(8)
    const fill: Record<string, string> = {
      "{cid}": "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
      "{id}": "ses_" + "0".repeat(32)
    }
    for (const [method, path] of sessionOnly) {
      const concrete = path.replace(/\{[^}]+\}/g, (m) => (path.startsWith("/v1/auth/devices") ? "A".repeat(43) : (fill[m] ?? "x")))
      const reply = await gw.request(method, concrete, {
        token: key,
        ...(method === "GET" || path === "/v1/storage/upload" ? {} : { json: path === "/v1/storage/fetch-caps" ? { cid: fill["{cid}"], count: 1, ttl_seconds: 3600 } : path === "/v1/storage/pin" ? { cid: fill["{cid}"] } : path === "/v1/auth/devices/approve" ? { user_code: "ABCD-EFGH", device_proof: {} } : {} })
      })
      expect(reply.status, `${method} ${path}: ${reply.text}`).toBe(403)
      expect(["SESSION_REQUIRED", "FETCH_CAP_DEVICE_REQUIRED", "NOT_AN_OPERATOR"], `${method} ${path}`).toContain(reply.body.code)
    }
  })
})
