/**
 * Content storage over HTTP (spec §2.4, §4.4): uploads give the IPFS importer's CIDs with the
 * `unixfs-v1-2025` profile and round-trip byte for byte; reads, pins, reference-counted unpins,
 * privacy deletes, the sweep, fetch capabilities and database backups, as a client sees them.
 * The expected CIDs come from the importer run here in the test process, independently of the
 * gateway; the cluster engine suite (Kubo + IPFS Cluster) runs the same checks.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { Wallet } from "ethers"
import { importer } from "ipfs-unixfs-importer"
import { fixedSize } from "ipfs-unixfs-importer/chunker"
import { balanced } from "ipfs-unixfs-importer/layout"
import * as jose from "jose"
import { webcrypto } from "node:crypto"
import { NextToLast } from "blockstore-fs/sharding"
import { CID } from "multiformats/cid"
import { existsSync, readdirSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { type StorageEngine, storageEngines } from "../support/storageEngines.js"
import { bytesOf } from "../support/bytes.js"

const MiB = 1024 * 1024

const expectError = (reply: Reply, status: number, code?: string) => {
  expect(reply.status, reply.text).toBe(status)
  if (code !== undefined) expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
  expect(reply.text).not.toMatch(/\/tmp\/|\/work\/|at .*\.ts:\d+|node_modules/)
}

/** The CID the IPFS project's importer gives with the unixfs-v1-2025 profile. */
const expectedCid = async (bytes: Uint8Array): Promise<string> => {
  const blocks = { put: async (cid: unknown) => cid } as never
  let root = ""
  for await (const entry of importer([{ content: [bytes] }], blocks, {
    cidVersion: 1,
    rawLeaves: true,
    chunker: fixedSize({ chunkSize: MiB }),
    layout: balanced({ maxChildrenPerNode: 1024 }),
    reduceSingleLeafToSelf: true
  })) {
    root = entry.cid.toString()
  }
  return root
}

interface Device {
  readonly jwk: jose.JWK
  readonly id: string
  readonly sign: (text: string) => Promise<string>
}

const newDevice = async (): Promise<Device> => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = (await webcrypto.subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
  return {
    jwk,
    id: await jose.calculateJwkThumbprint(jwk),
    sign: async (text) =>
      Buffer.from(
        await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))
      ).toString("base64url")
  }
}

/** Signs a wallet in to a namespace; with a device, the session is device-bound. */
type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }

const signIn = async (gw: Gateway, namespace: string, wallet: Signer, device?: Device): Promise<string> => {
  const c = await gw.request("POST", "/v1/auth/challenge", {
    json: { wallet: wallet.address, namespace, ...(device === undefined ? {} : { device_id: device.id }) }
  })
  expect(c.status, c.text).toBe(200)
  const message: string = c.body.message
  const v = await gw.request("POST", "/v1/auth/verify", {
    json: {
      message,
      signature: await wallet.signMessage(message),
      ...(device === undefined ? {} : { device_key: device.jwk, device_signature: await device.sign(message) })
    }
  })
  expect(v.status, v.text).toBe(200)
  return v.body.access_token
}

const upload = async (gw: Gateway, token: string | undefined, bytes: Uint8Array, name?: string, fileName = "blob.bin") => {
  const form = new FormData()
  if (name !== undefined) form.append("name", name)
  form.append("file", new Blob([bytes]), fileName)
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` }
  const res = await fetch(gw.url + "/v1/storage/upload", { method: "POST", body: form, headers })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, text, body } as Reply
}

const getBytes = async (gw: Gateway, route: string, headers: Record<string, string>) => {
  const res = await fetch(gw.url + route, { headers })
  const buffer = new Uint8Array(await res.arrayBuffer())
  return { status: res.status, headers: res.headers, bytes: buffer, text: new TextDecoder().decode(buffer.slice(0, 2000)) }
}

/** Block files in the embedded engine's blockstore. */
const blockCount = (gw: Gateway): number => {
  let n = 0
  try {
    for (const shard of readdirSync(path.join(gw.dataDir, "blocks"))) {
      n += readdirSync(path.join(gw.dataDir, "blocks", shard)).filter((f) => f.endsWith(".data")).length
    }
  } catch {
    return 0
  }
  return n
}

const waitFor = async (check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return check()
}

describe.each(storageEngines())("content storage on the %s engine", (_name, engineFactory) => {
  let engine: StorageEngine
  let gw: Gateway
  let ownerKey: string
  let otherKey: string
  const owner = Wallet.createRandom()
  const other = Wallet.createRandom()
  const third = Wallet.createRandom()
  let token: string
  let otherToken: string
  let thirdToken: string
  let device: Device
  let deviceToken: string

  beforeAll(async () => {
    engine = await engineFactory()
    gw = await startGateway({ env: { ...engine.env, PORTICO_NODE_ID: "node-a" } })
    ownerKey = (await gw.cli(["namespace", "create", "media", "--owner", owner.address])).api_key
    otherKey = (await gw.cli(["namespace", "create", "press", "--owner", other.address])).api_key
    await gw.cli(["namespace", "create", "third", "--owner", third.address])
    token = await signIn(gw, "media", owner)
    otherToken = await signIn(gw, "press", other)
    thirdToken = await signIn(gw, "third", third)
    device = await newDevice()
    deviceToken = await signIn(gw, "media", owner, device)
  }, 120_000)
  afterAll(async () => {
    await gw?.stop()
    await engine?.stop()
  })

  it("gives the importer's CID for 0 B, 1 B, 1 MiB, 1 MiB + 1 and several MiB, and reads them back byte for byte", async () => {
    for (const [size, seed] of [
      [0, 1],
      [1, 2],
      [MiB, 3],
      [MiB + 1, 4],
      [5 * MiB + 12345, 5],
      // past the importer's batches of ten block writes: later leaves reuse written leaves' buffers
      [25 * MiB + 12345, 6]
    ] as const) {
      const bytes = bytesOf(size, seed)
      const up = await upload(gw, token, bytes, `file-${size}`)
      expect(up.status, up.text).toBe(200)
      expect(up.body).toEqual({ Cid: await expectedCid(bytes), Size: size, Name: `file-${size}` })
      const got = await getBytes(gw, `/v1/storage/get/${up.body.Cid}`, { authorization: `Bearer ${token}` })
      expect(got.status).toBe(200)
      expect(got.headers.get("content-length")).toBe(String(size))
      expect(got.headers.get("etag")).toBe(`"${up.body.Cid}"`)
      expect(got.headers.get("cache-control")).toContain("immutable")
      expect(Buffer.compare(Buffer.from(got.bytes), Buffer.from(bytes))).toBe(0)
    }
  })

  it("matches the CIDs Kubo gives these bytes with the unixfs-v1-2025 profile", async () => {
    // computed by `ipfs add --cid-version=1 --raw-leaves --chunker=size-1048576` (Kubo 0.40.1)
    const empty = await upload(gw, token, new Uint8Array(0))
    expect(empty.body.Cid).toBe("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    const a = await upload(gw, token, new TextEncoder().encode("a"))
    expect(a.body.Cid).toBe("bafkreigks6arfsq3xxfpvqrrwonchxcnu6do76auprhhfomao6c273sixm")
    const zeros = await upload(gw, token, new Uint8Array(3 * MiB))
    expect(zeros.body.Cid).toBe("bafybeigdsjup7aizxrrjn7yqtcmqg6ffksaugwr7is2ind3cf7esaqrz4m")
  })

  it("answers ranges, conditional gets and unsatisfiable ranges", async () => {
    const bytes = bytesOf(2 * MiB + 7, 11)
    const { body } = await upload(gw, token, bytes)
    const auth = { authorization: `Bearer ${token}` }
    const part = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: `bytes=${MiB - 3}-${MiB + 4}` })
    expect(part.status).toBe(206)
    expect(part.headers.get("content-range")).toBe(`bytes ${MiB - 3}-${MiB + 4}/${bytes.length}`)
    expect(part.headers.get("content-length")).toBe("8")
    expect(Buffer.from(part.bytes)).toEqual(Buffer.from(bytes.slice(MiB - 3, MiB + 5)))
    const tail = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: "bytes=-5" })
    expect(tail.status).toBe(206)
    expect(Buffer.from(tail.bytes)).toEqual(Buffer.from(bytes.slice(bytes.length - 5)))
    const open = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: `bytes=${bytes.length - 2}-` })
    expect(open.bytes.length).toBe(2)
    const beyond = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: `bytes=${bytes.length}-` })
    expect(beyond.status).toBe(416)
    expect(beyond.headers.get("content-range")).toBe(`bytes */${bytes.length}`)
    const cached = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, "if-none-match": `"${body.Cid}"` })
    expect(cached.status).toBe(304)
    expect(cached.bytes.length).toBe(0)
    // a Content-Length on every answer: on a 304, the length the 200 would carry
    expect(cached.headers.get("content-length")).toBe(String(bytes.length))
    // immutable, but never for a shared cache: reaching the bytes takes a credential
    expect(part.headers.get("cache-control")).toBe("private, max-age=31536000, immutable")
    // If-Range: the range only while the client's copy is this content
    const stale = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: "bytes=0-1", "if-range": '"other"' })
    expect(stale.status).toBe(200)
    expect(stale.bytes.length).toBe(bytes.length)
    const current = await getBytes(gw, `/v1/storage/get/${body.Cid}`, { ...auth, range: "bytes=0-1", "if-range": `"${body.Cid}"` })
    expect(current.status).toBe(206)
    // a path that does not decode is a bad CID, not a missing route; HEAD is listed where GET is
    expectError(await gw.request("GET", "/v1/storage/get/%ff", { token }), 400, "VALIDATION_FAILED")
    const wrong = await gw.request("POST", `/v1/storage/get/${body.Cid}`, { token })
    expectError(wrong, 405, "METHOD_NOT_ALLOWED")
    expect(wrong.headers.get("allow")).toBe("GET, HEAD")
    // a re-pin without a name keeps the name
    await gw.request("POST", "/v1/storage/pin", { token, json: { cid: body.Cid, name: "named" } })
    await gw.request("POST", "/v1/storage/pin", { token, json: { cid: body.Cid } })
    expect((await gw.request("GET", `/v1/storage/status/${body.Cid}`, { token })).body.Name).toBe("named")
    // names count characters, not UTF-16 units, and must be valid Unicode
    const emoji = "😀".repeat(200)
    expect((await gw.request("POST", "/v1/storage/pin", { token, json: { cid: body.Cid, name: emoji } })).status).toBe(200)
    expect((await gw.request("GET", `/v1/storage/status/${body.Cid}`, { token })).body.Name).toBe(emoji)
    expectError(await gw.request("POST", "/v1/storage/pin", { token, json: { cid: body.Cid, name: "😀".repeat(256) } }), 400, "VALIDATION_FAILED")
    const lone = await gw.request("POST", "/v1/storage/pin", { token, headers: { "content-type": "application/json" }, body: `{"cid":"${body.Cid}","name":"\\ud800"}` })
    expectError(lone, 400, "VALIDATION_FAILED")
    // and plain text: no NUL or other control character a listing or a log would carry
    for (const name of ["a\u0000b", "a\nb", "tab\there", "\u007f"]) {
      const refused = await gw.request("POST", "/v1/storage/pin", { token, json: { cid: body.Cid, name } })
      expectError(refused, 400, "VALIDATION_FAILED")
      expect(refused.body.error).toMatch(/^name: /)
    }
    expect((await gw.request("GET", `/v1/storage/status/${body.Cid}`, { token })).body.Name).toBe(emoji)
  })

  it("refuses CIDs that do not parse or are not canonical with 400 VALIDATION_FAILED", async () => {
    const { body } = await upload(gw, token, bytesOf(100, 12))
    const cid: string = body.Cid
    const upper = cid.toUpperCase()
    for (const bad of ["nope", upper, "b" + cid.slice(1).toUpperCase(), "zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA", "Qm123", "b".repeat(300)]) {
      for (const [method, route] of [
        ["GET", `/v1/storage/get/${bad}`],
        ["GET", `/v1/storage/status/${bad}`],
        ["DELETE", `/v1/storage/unpin/${bad}`],
        ["GET", `/v1/storage/relayed/${bad}`]
      ] as const) {
        if (route.startsWith("/v1/storage/relayed/")) {
          expectError(await gw.request(method, route, { headers: { "x-portico-fetch-cap": "pfc1.x.y" } }), 400, "VALIDATION_FAILED")
          continue
        }
        expectError(await gw.request(method, route, { token }), 400, "VALIDATION_FAILED")
      }
      expectError(await gw.request("POST", "/v1/storage/pin", { token, json: { cid: bad, name: "x" } }), 400, "VALIDATION_FAILED")
      expectError(
        await gw.request("POST", "/v1/storage/fetch-caps", { token: deviceToken, json: { cid: bad, count: 1, ttl_seconds: 3600 } }),
        400,
        "VALIDATION_FAILED"
      )
    }
    // a CIDv0 in base58btc is canonical: it parses, and this namespace holds no such content
    expectError(await gw.request("GET", "/v1/storage/get/QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n", { token }), 404, "NOT_FOUND")
    // so is a CIDv1 with a sha2-512 multihash (110 characters): it reaches its route
    const sha512 = "bafkrgqe3ohjcjplc6n4f3fwunlj6upltggn7xqujbsvnvyw764srszz4u4rshq6ztos4chl4plgg4ffyyxnayrtdi5oc4xb2332g645433aeg"
    expectError(await gw.request("GET", `/v1/storage/get/${sha512}`, { token }), 404, "NOT_FOUND")
    expect((await gw.request("GET", `/v1/storage/status/${sha512}`, { token })).body.Status).toBe("unpinned")
  })

  it("needs a signed-in user's token: an API key alone is refused", async () => {
    expectError(await upload(gw, ownerKey, bytesOf(10, 13)), 403, "SESSION_REQUIRED")
    expectError(await upload(gw, undefined, bytesOf(10, 13)), 401)
    expectError(await gw.request("GET", "/v1/storage/status/bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", { token: ownerKey }), 403, "SESSION_REQUIRED")
    const exchanged = await gw.request("POST", "/v1/auth/token", { token: ownerKey, json: {} })
    if (exchanged.status === 200) {
      expectError(await upload(gw, exchanged.body.access_token, bytesOf(10, 13)), 403, "SESSION_REQUIRED")
    }
    expectError(await gw.request("POST", "/v1/storage/upload", { token, body: "x", headers: { "content-type": "text/plain" } }), 400)
    const noFile = new FormData()
    noFile.append("name", "n")
    const res = await fetch(gw.url + "/v1/storage/upload", { method: "POST", body: noFile, headers: { authorization: `Bearer ${token}` } })
    expect(res.status).toBe(400)
  })

  it("answers hostile multipart bodies with 400 and records nothing", async () => {
    const post = (body: string, boundary = "xyz") =>
      gw.request("POST", "/v1/storage/upload", { token, body, headers: { "content-type": `multipart/form-data; boundary=${boundary}` } })
    const part = (name: string, value: string, filename?: string) =>
      `--xyz\r\nContent-Disposition: form-data; name="${name}"${filename === undefined ? "" : `; filename="${filename}"`}\r\n\r\n${value}\r\n`
    // cut short: no closing boundary
    expectError(await post(part("file", "abc", "a.bin").slice(0, -2)), 400)
    // not multipart at all behind a multipart header
    expectError(await post("garbage"), 400)
    // an unexpected field, two files, a name over 255 characters
    expectError(await post(part("other", "1") + part("file", "abc", "a.bin") + "--xyz--\r\n"), 400)
    expectError(await post(part("file", "first-of-two", "a.bin") + part("file", "def", "b.bin") + "--xyz--\r\n"), 400)
    // the first file was read, but a refused form records nothing of it
    const first = await expectedCid(new TextEncoder().encode("first-of-two"))
    expect((await gw.request("GET", `/v1/storage/status/${first}`, { token })).body.Status).toBe("unpinned")
    expectError(await gw.request("GET", `/v1/storage/get/${first}`, { token }), 404, "NOT_FOUND")
    expectError(await post(part("name", "n".repeat(256)) + part("file", "abc", "a.bin") + "--xyz--\r\n"), 400, "VALIDATION_FAILED")
    // the name field is held to the pin route's rule: plain text
    expectError(await post(part("name", "a\u0000b") + part("file", "abc", "a.bin") + "--xyz--\r\n"), 400, "VALIDATION_FAILED")
    expectError(await post(part("file", "abc", "a.bin") + part("name", "a\u001bb") + "--xyz--\r\n"), 400, "VALIDATION_FAILED")
    // a name taken from the file's name (here RFC 5987-encoded) keeps its text but no control characters
    const fromFile = await post(`--xyz\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''a%00b%01.txt\r\n\r\ncontrol\r\n--xyz--\r\n`)
    expect(fromFile.status, fromFile.text).toBe(200)
    expect(fromFile.body.Name).toBe("ab.txt")
    // a well-formed one, name after the file, is taken with that name
    const good = await post(part("file", "hello", "h.txt") + part("name", "greeting") + "--xyz--\r\n")
    expect(good.status, good.text).toBe(200)
    expect(good.body).toEqual({ Cid: await expectedCid(new TextEncoder().encode("hello")), Size: 5, Name: "greeting" })
    expect((await gw.request("GET", `/v1/storage/status/${good.body.Cid}`, { token })).body.Name).toBe("greeting")
  })

  it("answers a part name or filename holding a control character with 400, on a connection that stays usable", async () => {
    // a raw socket: what the server writes is seen as written, and so is a connection it drops
    const socket = net.connect(gw.port, "127.0.0.1")
    socket.on("error", () => undefined)
    let received = ""
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")))
    await new Promise((resolve) => socket.once("connect", resolve))
    const nextAnswer = async (): Promise<string> => {
      const until = Date.now() + 10_000
      for (;;) {
        const end = received.indexOf("\r\n\r\n")
        const length = end < 0 ? undefined : /content-length: (\d+)/i.exec(received.slice(0, end))
        if (end >= 0 && length != null && received.length >= end + 4 + Number(length[1])) {
          const answer = received.slice(0, end + 4 + Number(length[1]))
          received = received.slice(answer.length)
          return answer
        }
        if (socket.destroyed || Date.now() > until) return received
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
    for (const [name, filename] of [["file", "a\u001fb.bin"], ["file", "a\u0001.bin"], ["fi\u0001le", "a.bin"], ["fi\u001fle", "a.bin"]] as const) {
      const body = `--c\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\n\r\nabc\r\n--c--\r\n`
      socket.write(
        `POST /v1/storage/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=c\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      )
      const answer = await nextAnswer()
      expect(answer, JSON.stringify([name, filename])).toMatch(/^HTTP\/1\.1 400 /)
      const envelope = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))
      expect(envelope.code).toBe("BAD_REQUEST")
      expect(Object.keys(envelope).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
    }
    // the same connection still serves the next request
    socket.write(`GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n`)
    expect(await nextAnswer()).toMatch(/^HTTP\/1\.1 200 /)
    socket.destroy()
  })

  it("pins, reports status and keeps one pin per CID across namespaces, counted by references", async () => {
    const bytes = bytesOf(MiB + 100, 21)
    const mine = await upload(gw, token, bytes, "mine")
    const theirs = await upload(gw, otherToken, bytes, "theirs")
    expect(theirs.body.Cid).toBe(mine.body.Cid)
    const cid: string = mine.body.Cid
    const status = await gw.request("GET", `/v1/storage/status/${cid}`, { token })
    expect(status.status, status.text).toBe(200)
    expect(status.body).toMatchObject({ Cid: cid, Name: "mine", Status: "pinned", Error: "" })
    expect(Object.keys(status.body).sort()).toEqual(
      ["Cid", "Error", "Name", "Peers", "ReplicationFactor", "ReplicationMax", "ReplicationMin", "Status"].sort()
    )
    expect(status.body.Peers.length).toBeGreaterThan(0)
    // a namespace that holds nothing learns nothing: unpinned to it, unreadable, unpinnable
    expect((await gw.request("GET", `/v1/storage/status/${cid}`, { token: thirdToken })).body.Status).toBe("unpinned")
    expectError(await gw.request("GET", `/v1/storage/get/${cid}`, { token: thirdToken }), 404, "NOT_FOUND")
    expectError(await gw.request("POST", "/v1/storage/pin", { token: thirdToken, json: { cid, name: "grab" } }), 404, "NOT_FOUND")
    // a re-pin renames
    const renamed = await gw.request("POST", "/v1/storage/pin", { token, json: { cid, name: "renamed" } })
    expect(renamed.status, renamed.text).toBe(200)
    expect(renamed.body.Name).toBe("renamed")

    // the first namespace lets go: shared, nothing removed, the other still reads it
    expect((await gw.request("DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token })).body).toEqual({ Cid: cid, evicted: "shared" })
    expectError(await gw.request("GET", `/v1/storage/get/${cid}`, { token }), 404, "NOT_FOUND")
    expectError(await gw.request("DELETE", `/v1/storage/unpin/${cid}`, { token }), 404, "NOT_FOUND")
    const still = await getBytes(gw, `/v1/storage/get/${cid}`, { authorization: `Bearer ${otherToken}` })
    expect(Buffer.compare(Buffer.from(still.bytes), Buffer.from(bytes))).toBe(0)
    // the last one lets go with a privacy delete: every node confirmed
    expect((await gw.request("DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token: otherToken })).body).toEqual({ Cid: cid, evicted: "true" })
    expect(await engine.holds(gw, cid)).toBe(false)
    expect((await gw.request("GET", `/v1/storage/status/${cid}`, { token: otherToken })).body.Status).toBe("unpinned")
    expectError(await gw.request("DELETE", `/v1/storage/unpin/${cid}?immediate=yes`, { token: otherToken }), 400)
  })

  it("never lets two concurrent unpins both miss the last reference", async () => {
    for (let round = 0; round < 3; round++) {
      const bytes = bytesOf(200_000, 30 + round)
      const a = await upload(gw, token, bytes)
      await upload(gw, otherToken, bytes)
      const cid: string = a.body.Cid
      const [x, y] = await Promise.all([
        gw.request("DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token }),
        gw.request("DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token: otherToken })
      ])
      const answers = [x.body.evicted, y.body.evicted]
      expect(answers).toContain("true")
      expect(await engine.holds(gw, cid)).toBe(false)
    }
  })

  it("removes blocks shared with other pins only when nothing else needs them", async () => {
    // 1 MiB of one chunk, then the same chunk inside a longer file: the leaf is shared
    const chunk = bytesOf(MiB, 41)
    const longer = new Uint8Array(2 * MiB)
    longer.set(chunk, 0)
    longer.set(bytesOf(MiB, 42), MiB)
    const single = await upload(gw, token, chunk)
    const both = await upload(gw, token, longer)
    expect((await gw.request("DELETE", `/v1/storage/unpin/${single.body.Cid}?immediate=true`, { token })).body.evicted).toBe("true")
    const still = await getBytes(gw, `/v1/storage/get/${both.body.Cid}`, { authorization: `Bearer ${token}` })
    expect(Buffer.compare(Buffer.from(still.bytes), Buffer.from(longer))).toBe(0)
  })

  it("mints fetch capabilities for a device-bound session only, and refuses every wrong use", async () => {
    const bytes = bytesOf(300_000, 51)
    const { body } = await upload(gw, token, bytes, "shared.bin")
    const cid: string = body.Cid
    const otherUp = await upload(gw, token, bytesOf(1000, 52))
    const mint = (t: string, json: unknown) => gw.request("POST", "/v1/storage/fetch-caps", { token: t, json })
    expectError(await mint(token, { cid, count: 1, ttl_seconds: 3600 }), 403, "FETCH_CAP_DEVICE_REQUIRED")
    expectError(await mint(ownerKey, { cid, count: 1, ttl_seconds: 3600 }), 403, "FETCH_CAP_DEVICE_REQUIRED")
    // an API key without storage-read hears the same: what it lacks first is a device
    const cacheOnly = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["cache"] } })
    expectError(await mint(cacheOnly.body.api_key, { cid, count: 1, ttl_seconds: 3600 }), 403, "FETCH_CAP_DEVICE_REQUIRED")
    for (const bad of [
      { cid, count: 0, ttl_seconds: 3600 },
      { cid, count: 65, ttl_seconds: 3600 },
      { cid, count: 1, ttl_seconds: 3599 },
      { cid, count: 1, ttl_seconds: 604801 },
      { cid, count: 1.5, ttl_seconds: 3600 },
      { cid, count: 1 }
    ]) {
      expectError(await mint(deviceToken, bad), 400)
    }
    // content the namespace does not hold
    const press = await upload(gw, otherToken, bytesOf(999, 53))
    expectError(await mint(deviceToken, { cid: press.body.Cid, count: 1, ttl_seconds: 3600 }), 404, "NOT_FOUND")

    const minted = await mint(deviceToken, { cid, count: 3, ttl_seconds: 7200 })
    expect(minted.status, minted.text).toBe(200)
    expect(minted.body.namespace).toBe("media")
    expect(minted.body.cid).toBe(cid)
    expect(minted.body.caps).toHaveLength(3)
    const now = Math.floor(Date.now() / 1000)
    for (const cap of minted.body.caps) {
      expect(Object.keys(cap).sort()).toEqual(["expires_at", "id", "revoke_key", "token"])
      expect(cap.id).toMatch(/^[0-9a-f]{32}$/)
      expect(Math.abs(cap.expires_at - (now + 7200))).toBeLessThanOrEqual(5)
    }
    expect(new Set(minted.body.caps.map((c: { id: string }) => c.id)).size).toBe(3)
    const [cap, second] = minted.body.caps

    // relayed fetch: no credential beside it, the right CID, a genuine token
    const relayed = (c: string, headers: Record<string, string>) => getBytes(gw, `/v1/storage/relayed/${c}`, headers)
    const ok = await relayed(cid, { "x-portico-fetch-cap": cap.token })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("content-length")).toBe(String(bytes.length))
    expect(ok.headers.get("etag")).toBe(`"${cid}"`)
    expect(Buffer.compare(Buffer.from(ok.bytes), Buffer.from(bytes))).toBe(0)
    const ranged = await relayed(cid, { "x-portico-fetch-cap": cap.token, range: "bytes=10-19" })
    expect(ranged.status).toBe(206)
    const codeOf = (r: { text: string }) => JSON.parse(r.text).code
    const missing = await relayed(cid, {})
    expect([missing.status, codeOf(missing)]).toEqual([401, "FETCH_CAP_MISSING"])
    // a credential with no capability at all: the capability is what is missing
    const onlyCredential = await relayed(cid, { authorization: `Bearer ${token}` })
    expect([onlyCredential.status, codeOf(onlyCredential)]).toEqual([401, "FETCH_CAP_MISSING"])
    const notAlone = await relayed(cid, { "x-portico-fetch-cap": cap.token, authorization: `Bearer ${token}` })
    expect([notAlone.status, codeOf(notAlone)]).toEqual([400, "FETCH_CAP_NOT_ALONE"])
    const forged = cap.token.slice(0, -4) + (cap.token.endsWith("AAAA") ? "BBBB" : "AAAA")
    const forgedReply = await relayed(cid, { "x-portico-fetch-cap": forged })
    expect([forgedReply.status, codeOf(forgedReply)]).toEqual([403, "FETCH_CAP_INVALID"])
    const garbage = await relayed(cid, { "x-portico-fetch-cap": "not-a-token" })
    expect([garbage.status, codeOf(garbage)]).toEqual([403, "FETCH_CAP_INVALID"])
    const otherCid = await relayed(otherUp.body.Cid, { "x-portico-fetch-cap": cap.token })
    expect([otherCid.status, codeOf(otherCid)]).toEqual([403, "FETCH_CAP_INVALID"])
    const badCid = await relayed("nope", { "x-portico-fetch-cap": cap.token })
    expect([badCid.status, codeOf(badCid)]).toEqual([400, "VALIDATION_FAILED"])

    // revoke: a 32-hex id and its own revoke key
    const revoke = (id: string, key?: string) =>
      gw.request("DELETE", `/v1/storage/fetch-caps/${id}`, key === undefined ? {} : { headers: { "x-portico-revoke-key": key } })
    expectError(await revoke("xyz", cap.revoke_key), 400, "VALIDATION_FAILED")
    expectError(await revoke(cap.id), 403, "FETCH_CAP_REVOKE_KEY_INVALID")
    expectError(await revoke(cap.id, second.revoke_key), 403, "FETCH_CAP_REVOKE_KEY_INVALID")
    expectError(await revoke("0".repeat(32), cap.revoke_key), 403, "FETCH_CAP_REVOKE_KEY_INVALID")
    // hex in upper case is the same id
    const revoked = await revoke(cap.id.toUpperCase(), cap.revoke_key)
    expect(revoked.status, revoked.text).toBe(200)
    expect(revoked.body).toEqual({ revoked: cap.id })
    const after = await relayed(cid, { "x-portico-fetch-cap": cap.token })
    expect([after.status, codeOf(after)]).toEqual([403, "FETCH_CAP_REVOKED"])
    // the others stand
    expect((await relayed(cid, { "x-portico-fetch-cap": second.token })).status).toBe(200)

    // expiry: move the capability's clock back, as an hour passing would
    const registry = new Database(path.join(gw.dataDir, "registry.db"))
    registry.prepare("UPDATE fetch_caps SET expires_at = ? WHERE id = ?").run(now - 1, second.id)
    registry.close()
    const expired = await relayed(cid, { "x-portico-fetch-cap": second.token })
    expect([expired.status, codeOf(expired)]).toEqual([403, "FETCH_CAP_INVALID"])
    // nothing in the log row of a relayed fetch names the client
    const rows = gw
      .logs()
      .split("\n")
      .filter((l) => l.includes("/v1/storage/relayed/"))
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) expect(row).not.toMatch(/127\.0\.0\.1|remote|address|ip"/)
  })

  it("backs up a node-local database into content storage, restorable with its rows", async () => {
    const created = await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: "orders" } })
    expect(created.status, created.text).toBe(201)
    await gw.request("POST", "/v1/db/sqlite/query", { token: ownerKey, json: { database_name: "orders", query: "CREATE TABLE o (id INTEGER PRIMARY KEY, item TEXT)" } })
    for (const item of ["tea", "cake", "jam"]) {
      await gw.request("POST", "/v1/db/sqlite/query", { token: ownerKey, json: { database_name: "orders", query: "INSERT INTO o (item) VALUES (?)", params: [item] } })
    }
    const backup = await gw.request("POST", "/v1/db/sqlite/backup", { token: ownerKey, json: { database_name: "orders" } })
    expect(backup.status, backup.text).toBe(201)
    expect(Object.keys(backup.body).sort()).toEqual(["backup_cid", "created_at", "database_name", "id", "size_bytes"])
    expect(backup.body.size_bytes).toBeGreaterThan(0)
    const list = await gw.request("GET", "/v1/db/sqlite/backups?database_name=orders", { token: ownerKey })
    expect(list.status, list.text).toBe(200)
    expect(list.body.count).toBe(1)
    expect(list.body.backups[0].backup_cid).toBe(backup.body.backup_cid)
    const dbs = await gw.request("GET", "/v1/db/sqlite/list", { token: ownerKey })
    expect(dbs.body.databases.find((d: { name: string }) => d.name === "orders").backup_cid).toBe(backup.body.backup_cid)

    const got = await getBytes(gw, `/v1/storage/get/${backup.body.backup_cid}`, { authorization: `Bearer ${token}` })
    expect(got.status).toBe(200)
    expect(got.bytes.length).toBe(backup.body.size_bytes)
    const file = path.join(testTmp(), `restored-${Date.now()}.db`)
    writeFileSync(file, got.bytes)
    const restored = new Database(file, { readonly: true })
    expect(restored.pragma("integrity_check", { simple: true })).toBe("ok")
    expect(restored.prepare("SELECT item FROM o ORDER BY id").all()).toEqual([{ item: "tea" }, { item: "cake" }, { item: "jam" }])
    restored.close()

    // a backup is a reference of its own: it is not a pin the namespace can unpin
    expectError(await gw.request("DELETE", `/v1/storage/unpin/${backup.body.backup_cid}`, { token }), 404, "NOT_FOUND")
    expectError(await gw.request("POST", "/v1/db/sqlite/backup", { token: ownerKey, json: { database_name: "absent" } }), 404, "NOT_FOUND")
    expectError(await gw.request("POST", "/v1/db/sqlite/backup", { token: ownerKey, json: { database_name: "../x" } }), 400)
    expectError(await gw.request("GET", "/v1/db/sqlite/backups", { token: ownerKey }), 400)
    const runtime = (await gw.cli(["keys", "create", "--namespace", "media", "--profile", "runtime"])).api_key
    expectError(await gw.request("POST", "/v1/db/sqlite/backup", { token: runtime, json: { database_name: "orders" } }), 403)
    expect((await gw.request("GET", "/v1/db/sqlite/backups?database_name=orders", { token: otherKey })).body.count).toBe(0)

    // a database created again under the same name starts without a backup of its own; the
    // earlier backups stay listed under the name (they restore the deleted one)
    expect((await gw.request("POST", "/v1/db/sqlite/delete", { token: ownerKey, json: { database_name: "orders" } })).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect((await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: "orders" } })).status).toBe(201)
    const again = await gw.request("GET", "/v1/db/sqlite/list", { token: ownerKey })
    expect(again.body.databases.find((d: { name: string }) => d.name === "orders").backup_cid).toBeNull()
    expect((await gw.request("GET", "/v1/db/sqlite/backups?database_name=orders", { token: ownerKey })).body.count).toBe(1)
  })

  it("is in the OpenAPI document with its multipart body", async () => {
    const doc = (await gw.request("GET", "/v1/openapi.json")).body
    for (const route of ["/v1/storage/upload", "/v1/storage/get/{cid}", "/v1/storage/fetch-caps/{id}", "/v1/storage/relayed/{cid}", "/v1/db/sqlite/backups"]) {
      expect(doc.paths[route], route).toBeDefined()
    }
    expect(doc.paths["/v1/storage/upload"].post.requestBody.content["multipart/form-data"]).toBeDefined()
  })
})

describe("content storage limits, sweep and eviction on every node (embedded engine)", () => {
  let gw: Gateway
  let token: string
  const owner = Wallet.createRandom()

  beforeAll(async () => {
    const port = await Effect.runPromise(freePort)
    gw = await startGateway({
      port,
      env: {
        PORTICO_NODE_ID: "node-s",
        PORTICO_STORAGE_MAX_UPLOAD_BYTES: String(2 * MiB),
        PORTICO_STORAGE_QUOTA_BYTES: String(3 * MiB),
        PORTICO_STORAGE_SWEEP_SECONDS: "1",
        // this gateway is its own peer, and one peer never answers
        PORTICO_PEERS: `node-s=http://127.0.0.1:${port}`
      }
    })
    await gw.cli(["namespace", "create", "limits", "--owner", owner.address])
    token = await signIn(gw, "limits", owner)
  }, 60_000)
  afterAll(async () => {
    if (process.env["DEBUG_LOGS"]) console.log(gw?.logs())
    await gw?.stop()
  })

  it("refuses an upload over the cap or the quota with 413 and records nothing", async () => {
    expectError(await upload(gw, token, bytesOf(2 * MiB + 1, 61)), 413, "PAYLOAD_TOO_LARGE")
    const first = await upload(gw, token, bytesOf(2 * MiB, 62))
    expect(first.status, first.text).toBe(200)
    // 2 MiB held, 3 MiB quota: another 1.5 MiB would pass it
    const over = await upload(gw, token, bytesOf(1.5 * MiB, 63))
    expectError(over, 413, "PAYLOAD_TOO_LARGE")
    // what the namespace already holds is free to upload again
    expect((await upload(gw, token, bytesOf(2 * MiB, 62))).status).toBe(200)
    const fits = await upload(gw, token, bytesOf(MiB, 64))
    expect(fits.status, fits.text).toBe(200)
    // an announced length over the cap is refused before a byte is read
    const res = await fetch(gw.url + "/v1/storage/upload", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "multipart/form-data; boundary=x", "content-length": String(64 * MiB) },
      body: new Uint8Array(16)
    }).catch(() => undefined)
    if (res !== undefined) expect(res.status).toBe(413)
    expect((await gw.request("DELETE", `/v1/storage/unpin/${first.body.Cid}`, { token })).body.evicted).toBe("skipped")
  })

  it("reclaims the blocks of a plain unpin at the next sweep, and keeps pinned ones", async () => {
    const kept = await upload(gw, token, bytesOf(300_000, 71))
    const gone = await upload(gw, token, bytesOf(MiB + 20, 72))
    const before = blockCount(gw)
    expect((await gw.request("DELETE", `/v1/storage/unpin/${gone.body.Cid}`, { token })).body).toEqual({ Cid: gone.body.Cid, evicted: "skipped" })
    expect(await waitFor(() => blockCount(gw) <= before - 3, 15_000)).toBe(true)
    const still = await getBytes(gw, `/v1/storage/get/${kept.body.Cid}`, { authorization: `Bearer ${token}` })
    expect(still.status).toBe(200)
    expect(still.bytes.length).toBe(300_000)
  })

  it("drops a pin whose last reference went while the count could not run, at the next sweep", async () => {
    const up = await upload(gw, token, bytesOf(MiB + 30, 73))
    const cid: string = up.body.Cid
    // what an unpin leaves when its release landed and its count did not: a pin nobody holds
    const registry = new Database(path.join(gw.dataDir, "registry.db"))
    registry.prepare("DELETE FROM content_refs WHERE cid = ?").run(cid)
    const pinned = () => registry.prepare("SELECT count(*) AS n FROM content_pins WHERE cid = ?").get(cid) as { n: number }
    expect(pinned().n).toBe(1)
    expect(await waitFor(() => pinned().n === 0, 15_000)).toBe(true)
    registry.close()
    const { dir, file } = new NextToLast().encode(CID.parse(cid))
    expect(await waitFor(() => !existsSync(path.join(gw.dataDir, "blocks", dir, file)), 15_000)).toBe(true)
  })

  it("asks every node to evict on a privacy delete over the internal route, which needs the coordination MAC", async () => {
    const up = await upload(gw, token, bytesOf(50_000, 81))
    expect((await gw.request("DELETE", `/v1/storage/unpin/${up.body.Cid}?immediate=true`, { token })).body.evicted).toBe("true")
    // the internal route refuses a caller without a MAC, or with one for another node
    expectError(await gw.request("POST", "/v1/internal/storage/evict", { json: { cid: up.body.Cid } }), 403)
    expectError(
      await gw.request("POST", "/v1/internal/storage/evict", {
        json: { cid: up.body.Cid },
        headers: { "x-portico-coordination-mac": "v1=AAAA", "x-portico-coordination-time": String(Math.floor(Date.now() / 1000)) }
      }),
      403
    )
  })
})

describe("a privacy delete with a node that does not confirm", () => {
  let gw: Gateway
  let token: string
  const owner = Wallet.createRandom()

  beforeAll(async () => {
    const dead = await Effect.runPromise(freePort)
    gw = await startGateway({ env: { PORTICO_NODE_ID: "node-p", PORTICO_PEERS: `node-gone=http://127.0.0.1:${dead}` } })
    await gw.cli(["namespace", "create", "partial", "--owner", owner.address])
    token = await signIn(gw, "partial", owner)
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("answers partial, with the pin removed everywhere and the local blocks gone", async () => {
    const up = await upload(gw, token, bytesOf(70_000, 91))
    expect((await gw.request("DELETE", `/v1/storage/unpin/${up.body.Cid}?immediate=true`, { token })).body.evicted).toBe("partial")
    expect((await gw.request("GET", `/v1/storage/status/${up.body.Cid}`, { token })).body.Status).toBe("unpinned")
    expect(blockCount(gw)).toBe(0)
  })
})

/** A multipart upload whose file bytes arrive over `seconds`, in 8 steps. */
const slowUpload = async (gw: Gateway, token: string, bytes: Uint8Array, seconds: number) => {
  const head = new TextEncoder().encode('--slow\r\nContent-Disposition: form-data; name="file"; filename="s.bin"\r\n\r\n')
  const tail = new TextEncoder().encode("\r\n--slow--\r\n")
  const step = Math.ceil(bytes.length / 8)
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(head)
      for (let at = 0; at < bytes.length; at += step) {
        controller.enqueue(bytes.subarray(at, at + step))
        await new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 8))
      }
      controller.enqueue(tail)
      controller.close()
    }
  })
  const res = await fetch(gw.url + "/v1/storage/upload", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "multipart/form-data; boundary=slow" },
    body,
    duplex: "half"
  } as RequestInit)
  return { status: res.status, body: (await res.json()) as { Cid: string; Size: number } }
}

describe("reclaims and uploads in progress (embedded engine)", () => {
  let gw: Gateway
  let alice: string
  let bob: string
  const aliceWallet = Wallet.createRandom()
  const bobWallet = Wallet.createRandom()

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_NODE_ID: "node-r", PORTICO_STORAGE_SWEEP_SECONDS: "1" } })
    await gw.cli(["namespace", "create", "race-a", "--owner", aliceWallet.address])
    await gw.cli(["namespace", "create", "race-b", "--owner", bobWallet.address])
    alice = await signIn(gw, "race-a", aliceWallet)
    bob = await signIn(gw, "race-b", bobWallet)
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("never sweeps the blocks of an upload that was streaming when the sweep began", async () => {
    const bytes = bytesOf(2 * MiB + 5, 101)
    // sweeps run every second, so several start while this upload streams
    const up = await slowUpload(gw, alice, bytes, 3)
    expect(up.status).toBe(200)
    expect(up.body.Cid).toBe(await expectedCid(bytes))
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const read = await getBytes(gw, `/v1/storage/get/${up.body.Cid}`, { authorization: `Bearer ${alice}` })
    expect(read.status).toBe(200)
    expect(Buffer.compare(Buffer.from(read.bytes), Buffer.from(bytes))).toBe(0)
  })

  it("does not evict what another namespace's upload recorded while the privacy delete waited", async () => {
    const bytes = bytesOf(MiB + 77, 102)
    const held = await upload(gw, bob, bytes)
    expect(held.status).toBe(200)
    const racing = slowUpload(gw, alice, bytes, 2)
    await new Promise((resolve) => setTimeout(resolve, 700))
    const deleted = await gw.request("DELETE", `/v1/storage/unpin/${held.body.Cid}?immediate=true`, { token: bob })
    expect(deleted.status).toBe(200)
    // alice's upload landed before the eviction could run: hers now, nothing removed
    expect(deleted.body.evicted).toBe("shared")
    expect((await racing).status).toBe(200)
    const read = await getBytes(gw, `/v1/storage/get/${held.body.Cid}`, { authorization: `Bearer ${alice}` })
    expect(read.status).toBe(200)
    expect(read.bytes.length).toBe(bytes.length)
  })

  it("answers a privacy delete within the wait even while another namespace's upload stalls", async () => {
    const mine = await upload(gw, bob, bytesOf(200_000, 104))
    // alice's upload trickles in, fast enough not to be cut as stalled (8 KiB a second) and far
    // too slowly to end within the wait: it holds the node's import lock all along
    const controller = new AbortController()
    let trickle: ReturnType<typeof setInterval> | undefined
    const stalled = fetch(gw.url + "/v1/storage/upload", {
      method: "POST",
      headers: { authorization: `Bearer ${alice}`, "content-type": "multipart/form-data; boundary=s" },
      body: new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode('--s\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n' + "x".repeat(4096)))
          trickle = setInterval(() => c.enqueue(new Uint8Array(2048).fill(0x78)), 250)
        }
      }),
      duplex: "half",
      signal: controller.signal
    } as RequestInit).catch(() => undefined)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const started = Date.now()
    const deleted = await gw.request("DELETE", `/v1/storage/unpin/${mine.body.Cid}?immediate=true`, { token: bob })
    // not confirmed on this node within the wait: partial, and the client is not held
    expect(deleted.status).toBe(200)
    expect(deleted.body.evicted).toBe("partial")
    expect(Date.now() - started).toBeLessThan(12_000)
    clearInterval(trickle)
    controller.abort()
    await stalled
    // nobody holds it now, and nobody can pin it back by its CID before the sweep
    expectError(await gw.request("POST", "/v1/storage/pin", { token: alice, json: { cid: mine.body.Cid } }), 404, "NOT_FOUND")
  }, 30_000)

  it("logs an upload whose client stopped sending as a client error, and keeps serving", async () => {
    const net = await import("node:net")
    const head = '--c\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n'
    await new Promise<void>((resolve) => {
      const socket = net.connect(gw.port, "127.0.0.1", () => {
        socket.write(
          `POST /v1/storage/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nContent-Type: multipart/form-data; boundary=c\r\nContent-Length: 3000000\r\n\r\n${head}${"x".repeat(1024)}`
        )
        setTimeout(() => socket.end(), 200)
      })
      socket.on("close", () => resolve())
      socket.on("error", () => resolve())
      setTimeout(() => { socket.destroy(); resolve() }, 5000)
    })
    // the client is gone: nothing was recorded and the log says so, not that the gateway failed
    const uploadLines = () => gw.logs().split("\n").filter((l) => l.includes('"route":"/v1/storage/upload"'))
    expect(await waitFor(() => uploadLines().some((l) => l.includes('"status":499')), 10_000)).toBe(true)
    expect(uploadLines().some((l) => l.includes('"status":500'))).toBe(false)
    expect((await upload(gw, alice, bytesOf(10, 105))).status).toBe(200)
  })

  it("lets go of the import lock when a stalled upload is cut with 408: a privacy delete after it is whole at once", async () => {
    const net = await import("node:net")
    // as curl sends a body shorter than the Content-Length it was given: the file's first bytes
    // reach the import, then nothing more comes; the client closes once it has the answer
    const head = '--XX\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nabc'
    const answer = await new Promise<string>((resolve) => {
      let text = ""
      const socket = net.connect(gw.port, "127.0.0.1", () => {
        socket.write(
          `POST /v1/storage/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 100000\r\n\r\n${head}`
        )
      })
      socket.on("data", (chunk) => {
        text += chunk.toString()
        socket.end()
      })
      socket.on("close", () => resolve(text))
      socket.on("error", () => resolve(text))
      setTimeout(() => { socket.destroy(); resolve(text) }, 15_000)
    })
    expect(answer).toMatch(/^HTTP\/1\.1 408/)
    const mine = await upload(gw, bob, bytesOf(50_000, 106))
    const started = Date.now()
    const deleted = await gw.request("DELETE", `/v1/storage/unpin/${mine.body.Cid}?immediate=true`, { token: bob })
    expect([deleted.status, deleted.body.evicted], deleted.text).toEqual([200, "true"])
    expect(Date.now() - started).toBeLessThan(4000)
  }, 30_000)

  it("does not hand out leftover blocks nobody holds by their CID", async () => {
    const bytes = bytesOf(300_000, 103)
    const up = await upload(gw, bob, bytes)
    expect((await gw.request("DELETE", `/v1/storage/unpin/${up.body.Cid}`, { token: bob })).body.evicted).toBe("skipped")
    // the blocks may still be on disk until the sweep; they are nobody's
    expectError(await gw.request("POST", "/v1/storage/pin", { token: alice, json: { cid: up.body.Cid, name: "found" } }), 404, "NOT_FOUND")
    expectError(await gw.request("POST", "/v1/storage/pin", { token: bob, json: { cid: up.body.Cid, name: "again" } }), 404, "NOT_FOUND")
  })

  it("reads the form's name field strictly: not UTF-8, or given twice, is refused and nothing is stored", async () => {
    const form = (...parts: Array<Buffer>) =>
      fetch(gw.url + "/v1/storage/upload", {
        method: "POST",
        headers: { authorization: `Bearer ${alice}`, "content-type": "multipart/form-data; boundary=b" },
        body: Buffer.concat([...parts, Buffer.from("--b--\r\n")])
      })
    const field = (name: string, value: Buffer) =>
      Buffer.concat([Buffer.from(`--b\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n`), value, Buffer.from("\r\n")])
    const file = Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nstrict-name\r\n')
    const notUtf8 = await form(field("name", Buffer.from([0xff, 0xfe])), file)
    expect(notUtf8.status).toBe(400)
    expect(((await notUtf8.json()) as { error: string }).error).toBe("name: is not valid UTF-8")
    const twice = await form(field("name", Buffer.from("n1")), field("name", Buffer.from("n2")), file)
    expect(twice.status).toBe(400)
    expect(((await twice.json()) as { error: string }).error).toBe("name: is given twice")
    const once = await form(field("name", Buffer.from("n1")), file)
    expect(((await once.json()) as { Name: string }).Name).toBe("n1")
  })

  it("stores a file part without a filename byte for byte", async () => {
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x01, 0x62, 0xe9, 0x0d, 0x0a, 0x80])
    const body = Buffer.concat([
      Buffer.from('--b\r\nContent-Disposition: form-data; name="file"\r\n\r\n'),
      Buffer.from(bytes),
      Buffer.from("\r\n--b\r\nContent-Disposition: form-data; name=\"file2\"\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n")
    ])
    // a second, text part is still an unknown field
    const refused = await fetch(gw.url + "/v1/storage/upload", {
      method: "POST",
      headers: { authorization: `Bearer ${alice}`, "content-type": "multipart/form-data; boundary=b" },
      body
    })
    expect(refused.status).toBe(400)
    const res = await fetch(gw.url + "/v1/storage/upload", {
      method: "POST",
      headers: { authorization: `Bearer ${alice}`, "content-type": "multipart/form-data; boundary=b" },
      body: Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="file"\r\n\r\n'), Buffer.from(bytes), Buffer.from("\r\n--b--\r\n")])
    })
    const answer = (await res.json()) as { Cid: string; Size: number; Name: string }
    expect(res.status).toBe(200)
    expect(answer).toEqual({ Cid: await expectedCid(bytes), Size: bytes.length, Name: "" })
    const read = await getBytes(gw, `/v1/storage/get/${answer.Cid}`, { authorization: `Bearer ${alice}` })
    expect(Array.from(read.bytes)).toEqual(Array.from(bytes))
  })
})

describe("content storage when the registry does not answer (rqlite stopped)", () => {
  let gw: Gateway
  let server: RqlitedServer
  let token: string
  let deviceToken: string
  const owner = Wallet.createRandom()

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    gw = await startGateway({ env: { PORTICO_RQLITE_URL: server.url, PORTICO_NODE_ID: "node-r" } })
    await gw.cli(["namespace", "create", "down", "--owner", owner.address])
    token = await signIn(gw, "down", owner)
    deviceToken = await signIn(gw, "down", owner, await newDevice())
  }, 90_000)
  afterAll(async () => {
    await gw?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("works on rqlite, then answers retryable 503s, never a half-written state", async () => {
    const bytes = bytesOf(120_000, 101)
    const up = await upload(gw, token, bytes)
    expect(up.status, up.text).toBe(200)
    expect(up.body.Cid).toBe(await expectedCid(bytes))
    const cap = (await gw.request("POST", "/v1/storage/fetch-caps", { token: deviceToken, json: { cid: up.body.Cid, count: 1, ttl_seconds: 3600 } }))
      .body.caps[0]
    expect((await getBytes(gw, `/v1/storage/relayed/${up.body.Cid}`, { "x-portico-fetch-cap": cap.token })).status).toBe(200)

    await Effect.runPromise(server.stop)
    for (const reply of [
      await gw.request("GET", `/v1/storage/get/${up.body.Cid}`, { token }),
      await gw.request("GET", `/v1/storage/status/${up.body.Cid}`, { token }),
      await gw.request("DELETE", `/v1/storage/unpin/${up.body.Cid}`, { token })
    ]) {
      expectError(reply, 503)
      expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0)
    }
    const relayed = await gw.request("GET", `/v1/storage/relayed/${up.body.Cid}`, { headers: { "x-portico-fetch-cap": cap.token } })
    expectError(relayed, 503, "FETCH_CAP_UNAVAILABLE")
    expect(Number(relayed.headers.get("retry-after"))).toBeGreaterThan(0)
  }, 60_000)
})
