/**
 * A deployment's identity (spec §2.7, §4.8, §8): its name, its type, the host it is served on and
 * the instance name its directory is claimed under. Pure and client-safe (no node: imports), so
 * the CLI refuses a bad name before uploading and the server refuses it before storing anything.
 */
import { Data, Either } from "effect"

/** A field of a deployment request that breaks a rule: the route answers 400 naming `field`. */
export class DeploymentFieldInvalid extends Data.TaggedError("DeploymentFieldInvalid")<{ readonly field: string; readonly reason: string }> {
  override get message(): string {
    return `${this.field}: ${this.reason}`
  }
}

export const invalid = (field: string, reason: string): Either.Either<never, DeploymentFieldInvalid> =>
  Either.left(new DeploymentFieldInvalid({ field, reason }))

/** Spec §8: a deployment name is 1-56 characters. */
export const NAME_MAX_LENGTH = 56
const namePattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,55}$/

/** Spec §2.7: 1-56 letters, digits, `-`, `_`, the first a letter or digit. */
export const isDeploymentName = (text: string): boolean => namePattern.test(text)

/** The name as given, or a 400 naming the field `name`. */
export const deploymentName = (value: unknown): Either.Either<string, DeploymentFieldInvalid> =>
  typeof value === "string" && namePattern.test(value)
    ? Either.right(value)
    : invalid("name", `1-${NAME_MAX_LENGTH} characters of letters, digits, '-' and '_', the first a letter or digit`)

export const DEPLOYMENT_TYPES = ["static", "nextjs", "go", "nodejs"] as const
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number]

export const isDeploymentType = (text: string): text is DeploymentType => (DEPLOYMENT_TYPES as ReadonlyArray<string>).includes(text)

/** The types that run a process (and so get a port, a sandbox and a health check). */
export const isDynamicType = (type: DeploymentType): boolean => type !== "static"

export const deploymentType = (value: unknown): Either.Either<DeploymentType, DeploymentFieldInvalid> =>
  typeof value === "string" && isDeploymentType(value) ? Either.right(value) : invalid("type", `one of ${DEPLOYMENT_TYPES.join(", ")}`)

/**
 * The random part of a generated host: 6 characters of a-z0-9 (36^6, about 2.2 billion). Six
 * because a 56-character name, a hyphen and 6 make 63, the longest DNS label.
 */
export const RANDOM_LABEL_LENGTH = 6
const labelAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

/**
 * The random part from random bytes (one byte a character, rejection-sampled so every character
 * is equally likely); undefined when `bytes` hold too few usable ones.
 */
export const randomLabelFrom = (bytes: Uint8Array): string | undefined => {
  // 252 = 7 × 36: bytes at or above it would favour the first characters
  let label = ""
  for (const byte of bytes) {
    if (byte >= 252) continue
    label += labelAlphabet[byte % 36]
    if (label.length === RANDOM_LABEL_LENGTH) return label
  }
  return undefined
}

/** A fresh random part, from the platform's CSPRNG (Web Crypto, present in Node 20 and browsers). */
export const randomLabel = (): string => {
  // 32 bytes hold 6 usable ones except with negligible probability: then draw again
  for (;;) {
    const label = randomLabelFrom(globalThis.crypto.getRandomValues(new Uint8Array(32)))
    if (label !== undefined) return label
  }
}

/**
 * The name as a DNS label part: lowercase, `_` as `-`, runs of `-` as one. Hosts are
 * case-insensitive and `_` is not a hostname character; collapsing runs keeps `--` out of the
 * third and fourth places, which DNS reserves for encodings such as `xn--` (a name `xn--app` would
 * otherwise become a host browsers try to decode as punycode).
 */
export const hostLabelOfName = (name: string): string => name.toLowerCase().replace(/_/g, "-").replace(/-+/g, "-")

/** The generated host, spec §2.7: `<name>-<random>.<base-domain>`. */
export const generatedDomain = (name: string, random: string, baseDomain: string): string =>
  `${hostLabelOfName(`${name}-${random}`)}.${baseDomain.toLowerCase()}`

/**
 * A first deploy's host, checked: a name whose generated host would begin `ns-` (`ns`, `ns-shop`,
 * `NS_shop`) is valid, but that host is a namespace gateway's (`ns-<namespace>.<domain>`), which
 * the API keeps, so the app would never be reached there: such a name needs a `--subdomain`.
 */
export const checkHost = (name: string, subdomain: string | undefined): Either.Either<void, DeploymentFieldInvalid> =>
  subdomain === undefined && generatedDomain(name, "x", "d").startsWith("ns-")
    ? invalid("subdomain", `the host of a name beginning 'ns-' would be a namespace gateway's (ns-<namespace>.<domain>): choose the app's host with a subdomain`)
    : Either.right(undefined)

/**
 * Labels a `--subdomain` may not take: platform hosts and the namespace gateways' `ns-` prefix
 * (`ns-<namespace>.<domain>`, spec §2.7 `PORTICO_GATEWAY_URL`), which would let an app answer as
 * a namespace's gateway.
 */
export const reservedSubdomains: ReadonlySet<string> = new Set(["www", "api", "admin", "internal", "cluster", "portico", "lobby", "gateway"])

const subdomainPattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/**
 * The `--subdomain` override: one DNS label (1-63 of a-z, 0-9 and inner hyphens), taken
 * lowercase (hosts are case-insensitive, so `Blog` and `blog` are one host and are stored as one).
 * The host is then `<subdomain>.<base-domain>`, with no random part.
 */
export const subdomainOverride = (value: unknown): Either.Either<string, DeploymentFieldInvalid> => {
  if (typeof value !== "string") return invalid("subdomain", "a DNS label")
  const label = value.toLowerCase()
  if (!subdomainPattern.test(label)) return invalid("subdomain", "one DNS label: 1-63 characters of a-z, 0-9 and inner hyphens")
  if (label.slice(2, 4) === "--") return invalid("subdomain", "'--' in the third and fourth places is reserved for DNS encodings (xn--)")
  if (label.startsWith("ns-")) return invalid("subdomain", "'ns-' hosts are the namespace gateways'")
  if (reservedSubdomains.has(label)) return invalid("subdomain", `'${label}' is a platform host`)
  return Either.right(label)
}

/** The host for an override: `<subdomain>.<base-domain>`. */
export const overrideDomain = (subdomain: string, baseDomain: string): string => `${subdomain}.${baseDomain.toLowerCase()}`

/**
 * The instance name, spec §4.8: `<namespace>-<name>`, the name of the deployment's directory on a
 * node. Two deployments can share one (namespace `a-b` with `c`, namespace `a` with `b-c`): that
 * is the instance collision the directory's owner marker settles.
 */
export const instanceName = (namespace: string, name: string): string => `${namespace}-${name}`
