/**
 * The edge's configuration (docs/edge.md): the JSON Caddy runs with in front of one gateway, on
 * the gateway's machine. `portico edge config` prints it; the edge tests run Caddy with it.
 *
 * - HTTPS on `httpsPort` for every name, each certificate obtained on demand when a handshake
 *   first names it, after the gateway's `/v1/internal/tls/check` said yes (so only hosts
 *   Portico serves get certificates), from the ACME CA at `acmeDirectory`.
 * - With `wildcard`, one certificate for `<base>` and `*.<base>` by DNS-01 through the gateway's
 *   `/v1/internal/acme/present` and `cleanup`; namespace and deployment hosts then need none of
 *   their own. Custom domains are always on demand (HTTP-01 or TLS-ALPN-01).
 * - Certificates, keys, ACME accounts, locks and challenge tokens in the gateway's
 *   `/v1/internal/tls-store` (the registry, sealed), so every node's edge shares them and any
 *   node answers a challenge another node's order started.
 * - Every request proxied to the gateway, which routes app hosts to apps and the rest to the API;
 *   `/v1/internal/` is answered 404 at the edge, since behind it every client comes from loopback.
 * - Plain HTTP on `httpPort` answers ACME HTTP-01 challenges and redirects everything else to HTTPS.
 * - No admin endpoint: the configuration is a file, changed by restarting the edge.
 */

import { Code, envelopeText } from "../domain/Errors.js"

export interface EdgeSettings {
  /** The gateway on this machine, as the edge reaches it: `http://127.0.0.1:6001`. */
  readonly gateway: string
  /** The gateway's data directory, where `edge.token` is. */
  readonly dataDir: string
  readonly baseDomain: string
  /** The ACME CA's directory URL (Let's Encrypt's production one by default). */
  readonly acmeDirectory: string
  /**
   * Certificates from Caddy's own local CA instead of an ACME CA: for a cluster on one machine,
   * which no public CA can reach. Its root lives in the shared store (`pki/authorities/local/`),
   * so every node's edge issues under the same one; it is never installed into the system's
   * trust store.
   */
  readonly internalCa?: boolean | undefined
  /** The ACME account's contact address, if any. */
  readonly email?: string | undefined
  /** PEM files of roots to trust for the ACME CA's own HTTPS (a test CA, a private CA). */
  readonly trustedRoots?: ReadonlyArray<string> | undefined
  /** Obtain `<base>` and `*.<base>` by DNS-01 through the gateway. */
  readonly wildcard?: boolean | undefined
  /** DNS servers Caddy asks to see a DNS-01 record before answering the challenge (`host:port`). */
  readonly resolvers?: ReadonlyArray<string> | undefined
  readonly httpsPort: number
  readonly httpPort: number
  /** The address the edge listens on; every address when empty. */
  readonly listenHost?: string | undefined
}

export const LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory"

/** What the gateway answers for a route it does not have: the edge answers `/v1/internal/` so. */
const NOT_HERE = envelopeText({ error: "no such route", code: Code.ROUTE_NOT_FOUND, hint: "see /v1/openapi.json for the routes this platform serves" })

export const caddyConfig = (settings: EdgeSettings): Record<string, unknown> => {
  const gateway = new URL(settings.gateway)
  const endpoint = gateway.origin
  const tokenFile = `${settings.dataDir.replace(/\/+$/, "")}/edge.token`
  const listen = (port: number) => `${settings.listenHost ?? ""}:${port}`
  const base = settings.baseDomain.toLowerCase()
  const acme = (challenges?: Record<string, unknown>): Record<string, unknown> => settings.internalCa === true ? { module: "internal" } : {
    module: "acme",
    ca: settings.acmeDirectory,
    ...(settings.email === undefined ? {} : { email: settings.email }),
    ...(settings.trustedRoots === undefined || settings.trustedRoots.length === 0 ? {} : { trusted_roots_pem_files: settings.trustedRoots }),
    // the challenge listeners on the edge's own address, beside its servers
    ...(challenges === undefined && settings.listenHost === undefined ? {} : { challenges: { ...(settings.listenHost === undefined ? {} : { bind_host: settings.listenHost }), ...challenges } })
  }
  const wildcardSubjects = [base, `*.${base}`]
  const policies: Array<Record<string, unknown>> = []
  if (settings.wildcard === true) {
    policies.push({
      subjects: wildcardSubjects,
      issuers: [
        acme({
          dns: {
            provider: { name: "portico", endpoint, token_file: tokenFile },
            ...(settings.resolvers === undefined ? {} : { resolvers: settings.resolvers })
          }
        })
      ]
    })
  }
  policies.push({ on_demand: true, issuers: [acme()] })
  const httpsSuffix = settings.httpsPort === 443 ? "" : `:${settings.httpsPort}`
  return {
    admin: { disabled: true, config: { persist: false } },
    storage: { module: "portico", endpoint, token_file: tokenFile },
    apps: {
      ...(settings.internalCa === true ? { pki: { certificate_authorities: { local: { install_trust: false } } } } : {}),
      tls: {
        ...(settings.wildcard === true ? { certificates: { automate: wildcardSubjects } } : {}),
        automation: {
          on_demand: { permission: { module: "http", endpoint: `${endpoint}/v1/internal/tls/check` } },
          policies
        }
      },
      http: {
        http_port: settings.httpPort,
        https_port: settings.httpsPort,
        servers: {
          edge: {
            listen: [listen(settings.httpsPort)],
            // HTTP/1.1 and HTTP/2 over TCP; HTTP/3 would also need the UDP port opened
            protocols: ["h1", "h2"],
            tls_connection_policies: [{}],
            automatic_https: { disable_redirects: true },
            routes: [
              {
                match: [{ path: ["/v1/internal", "/v1/internal/*"] }],
                handle: [{ handler: "static_response", status_code: 404, headers: { "Content-Type": ["application/json"] }, body: NOT_HERE }],
                terminal: true
              },
              { handle: [{ handler: "reverse_proxy", upstreams: [{ dial: gateway.host }] }] }
            ]
          },
          plain: {
            listen: [listen(settings.httpPort)],
            protocols: ["h1"],
            automatic_https: { disable: true },
            routes: [
              {
                handle: [
                  {
                    handler: "static_response",
                    status_code: 308,
                    headers: { Location: [`https://{http.request.host}${httpsSuffix}{http.request.uri}`] }
                  }
                ]
              }
            ]
          }
        }
      }
    }
  }
}
