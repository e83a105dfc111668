/**
 * A throwaway certificate authority and a server certificate for 127.0.0.1 and localhost, made
 * with the `openssl` CLI at test time, so TLS stand-ins (the APNs provider API) speak real TLS and
 * a client trusts them only through the CA file: `NODE_EXTRA_CA_CERTS=<caFile>` for a gateway
 * process, or the `ca` option of an in-process client.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"

export interface TestCa {
  /** PEM file of the CA certificate; what NODE_EXTRA_CA_CERTS points at. */
  readonly caFile: string
  readonly caPem: string
  /** Server certificate (SAN IP:127.0.0.1, DNS:localhost) signed by the CA, and its key. */
  readonly certPem: string
  readonly keyPem: string
  readonly dir: string
}

let made: TestCa | undefined

const openssl = (args: ReadonlyArray<string>, cwd: string): void => {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] })
}

/** Makes the CA and server certificate once per test process (P-256 keys, one day). */
export const testCa = (): TestCa => {
  if (made !== undefined) return made
  const root = process.env["PORTICO_TEST_TMP"] ?? tmpdir()
  const dir = mkdtempSync(path.join(root, "portico-ca-"))
  openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key"], dir)
  openssl(["req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "1", "-subj", "/CN=portico test CA",
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", "ca.pem"], dir)
  openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "server.key"], dir)
  openssl(["req", "-new", "-key", "server.key", "-subj", "/CN=localhost", "-out", "server.csr"], dir)
  writeFileSync(path.join(dir, "server.ext"),
    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
  openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
    "-sha256", "-extfile", "server.ext", "-out", "server.pem"], dir)
  const read = (name: string) => readFileSync(path.join(dir, name), "utf8")
  made = { caFile: path.join(dir, "ca.pem"), caPem: read("ca.pem"), certPem: read("server.pem"), keyPem: read("server.key"), dir }
  return made
}
