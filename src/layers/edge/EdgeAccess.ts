/**
 * Who may call the edge's routes that hand out or change certificate material
 * (`/v1/internal/tls-store`, `/v1/internal/acme/present` and `cleanup`; docs/edge.md): the edge on
 * this node's own machine, holding this node's edge token.
 *
 * Loopback alone is not enough: behind the edge every client's request arrives from loopback too.
 * The token is 32 random bytes the gateway writes once to `<dataDir>/edge.token` (mode 0600), read
 * by the edge's Caddy modules (engines/caddy) from the file, so only who may read the data
 * directory holds it. It never leaves the machine and is compared in constant time.
 */
import { Context, Effect, Layer } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { EdgeCode } from "../../domain/Errors.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { isLoopbackSource } from "../nodes/NodeEnrolment.js"
import { type Refused, refuse } from "../Refused.js"
import { safeEqual } from "../secrets/Sealer.js"

export const EDGE_TOKEN_FILE = "edge.token"

export interface EdgeAccessService {
  /** Admits a call from this machine that carries `Authorization: Bearer <edge token>`. */
  readonly admit: (authorization: string | undefined, remote: string | undefined) => Effect.Effect<void, Refused<EdgeCode>>
  /** Where the token is, for the edge's configuration (`portico edge config`). */
  readonly tokenFile: string
}

/** The node's edge token: read from `<dir>/edge.token`, written there first when absent. */
export const edgeToken = (dir: string): string => {
  const file = path.join(dir, EDGE_TOKEN_FILE)
  try {
    return fs.readFileSync(file, "utf8").trim()
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
  fs.mkdirSync(dir, { recursive: true })
  const token = crypto.randomBytes(32).toString("base64url")
  const temp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(temp, `${token}\n`, { mode: 0o600, flag: "wx" })
  // a second gateway racing on the same directory keeps the first file: both then read it
  try {
    fs.linkSync(temp, file)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  } finally {
    fs.rmSync(temp, { force: true })
  }
  return fs.readFileSync(file, "utf8").trim()
}

const BEARER = /^Bearer ([A-Za-z0-9_-]{43})$/

export const makeEdgeAccess = (dir: string): EdgeAccessService => {
  const token = edgeToken(dir)
  return {
    tokenFile: path.join(dir, EDGE_TOKEN_FILE),
    admit: (authorization, remote) => {
      if (!isLoopbackSource(remote)) {
        return Effect.fail(refuse("FORBIDDEN", "the edge routes are served to this node's own machine only", "run the edge on the gateway's machine and point it at a loopback address"))
      }
      const presented = BEARER.exec(authorization ?? "")?.[1]
      if (presented === undefined || !safeEqual(presented, token)) {
        return Effect.fail(refuse("UNAUTHORIZED", "the edge token is missing or wrong", `send Authorization: Bearer <the token in <data dir>/${EDGE_TOKEN_FILE}>`))
      }
      return Effect.void
    }
  }
}

export class EdgeAccess extends Context.Tag("portico/EdgeAccess")<EdgeAccess, EdgeAccessService>() {
  static readonly Live = Layer.effect(
    EdgeAccess,
    Effect.map(PorticoConfig, (config) => makeEdgeAccess(config.dataDir))
  )

  /** Over the test settings' temporary data directory. */
  static readonly Test = Layer.suspend(() => EdgeAccess.Live.pipe(Layer.provide(PorticoConfig.Test)))
}
