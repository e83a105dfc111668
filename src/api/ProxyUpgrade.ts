/**
 * The anonymity proxy's WebSockets put in front of the server's `upgrade` listener (docs/proxy.md
 * "Tunnels"): on the API's hosts, `/v1/proxy/tunnel` and `/v1/proxy/relay` are answered by
 * src/layers/proxy/ProxySockets.ts, the credential judged by the API's own gate under the routes'
 * policies (the ones ProxyGroup declares: a tunnel admits exactly whom `/v1/proxy/anon` admits, the
 * relay anyone within the client network's rate limit); every other upgrade goes on.
 */
import { Effect, Option } from "effect"
import type * as http from "node:http"
import type { Duplex } from "node:stream"
import type { SessionLiveness } from "../layers/auth/Authenticator.js"
import type { ProxySettings } from "../layers/proxy/ProxySettings.js"
import { makeProxySockets } from "../layers/proxy/ProxySockets.js"
import type { GateRefusal, GateService } from "./gate/Gate.js"
import type { NamespaceRecord } from "../layers/namespaces/Namespaces.js"
import { open, session } from "./Policy.js"

type Upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void

export const makeProxyUpgrade = (options: {
  readonly settings: ProxySettings
  readonly gate: GateService
  readonly standing: SessionLiveness["Type"]["standing"]
  readonly isApiHost: (host: string | undefined) => boolean
  readonly namespace: (name: string) => Effect.Effect<Option.Option<NamespaceRecord>, unknown>
  readonly baseDomain: string
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
}) => {
  const policy = session("proxy")
  const asRefusal = (e: GateRefusal) => ({ code: e.code, error: e.error, hint: e.hint, retryAfterSeconds: "retryAfterSeconds" in e ? e.retryAfterSeconds : undefined })
  const sockets = makeProxySockets({
    settings: options.settings,
    standing: options.standing,
    admit: (authorization, remoteAddress) => Effect.mapError(options.gate.run(policy, { authorization, remoteAddress, clientCharged: false }), asRefusal),
    admitAnonymous: (remoteAddress) => Effect.mapError(options.gate.run(open, { authorization: undefined, remoteAddress, clientCharged: false }), asRefusal),
    namespaceExists: (name) => Effect.map(options.namespace(name), Option.isSome),
    baseDomain: options.baseDomain,
    onAnswered: options.onAnswered
  })
  return {
    /** The server's `upgrade` listener: the proxy's routes on the API's hosts, anything else to `next`. */
    inFront:
      (next: Upgrade): Upgrade =>
      (req, socket, head) =>
        options.isApiHost(req.headers.host) && sockets.handles(req) ? sockets.upgrade(req, socket, head) : next(req, socket, head),
    close: sockets.close
  }
}
