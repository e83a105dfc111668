/**
 * Which names a deployment may take as a custom domain, and the DNS record that proves the tenant
 * holds one (docs/deployments.md, "Custom domains"). Pure and client-safe (no node: imports): the
 * route refuses a bad name before it reaches the registry, and a client can check the same rules.
 *
 * The name is taken as the host a browser sends: ASCII only. An internationalised name is given in
 * its punycode form (`xn--…`) and kept as given; nothing here converts or checks IDNA, so a name
 * that is not valid punycode simply never verifies (its DNS record cannot exist).
 */
import { Either } from "effect"
import { type DeploymentFieldInvalid, invalid } from "./DeploymentRules.js"

/** How many custom domains one deployment may hold, verified or not. */
export const MAX_CUSTOM_DOMAINS = 20

/**
 * How long a claim may wait unverified (7 days): past it the claim is gone (not listed, not
 * verifiable, not counted) and the tenant adds the domain again, with a new token.
 */
export const PENDING_CLAIM_SECONDS = 7 * 86_400

/** Unverified claims one namespace may hold at once, all its deployments together (the setting's default). */
export const DEFAULT_PENDING_DOMAINS_PER_NAMESPACE = 50

/** The label the verification TXT record sits under: `_portico-verify.<domain>`. */
export const VERIFY_LABEL = "_portico-verify"

/**
 * RFC 1035 allows 253 characters in text form; the verification record's name must fit too, so a
 * domain is at most 253 - 16 = 237 (a longer one could never be verified).
 */
export const DOMAIN_MAX_LENGTH = 253 - VERIFY_LABEL.length - 1

const labelPattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/**
 * The domain as stored (lowercase, without a trailing dot), or a 400 naming the field `domain`.
 * `baseDomain` is the platform's: it and every name under it are the platform's hosts.
 */
export const customDomain = (value: unknown, baseDomain: string): Either.Either<string, DeploymentFieldInvalid> => {
  if (typeof value !== "string") return invalid("domain", "a host name such as www.example.com")
  let domain = value.trim().toLowerCase()
  // one trailing dot is the absolute form of the same name
  if (domain.endsWith(".")) domain = domain.slice(0, -1)
  if (domain.length === 0 || domain.length > DOMAIN_MAX_LENGTH) return invalid("domain", `1-${DOMAIN_MAX_LENGTH} characters`)
  if (!/^[\x21-\x7e]+$/.test(domain)) {
    return invalid("domain", "ASCII letters, digits, '-' and '.' only; give an internationalised name in its punycode form (xn--…)")
  }
  if (domain.includes(":") || domain.startsWith("[")) return invalid("domain", "an IP address is not a domain")
  const labels = domain.split(".")
  if (labels.length < 2) return invalid("domain", "at least two labels, such as example.com")
  for (const label of labels) {
    if (!labelPattern.test(label)) {
      return invalid("domain", `the label '${label}' is not 1-63 of a-z, 0-9 and '-' without a leading or trailing '-'`)
    }
  }
  // a top-level label is never all digits (RFC 3696 §2): this refuses every IPv4 form too
  // (`127.0.0.1`, `127.1`), which resolvers would read as an address rather than a name
  if (/^[0-9]+$/.test(labels[labels.length - 1] as string)) return invalid("domain", "an IP address is not a domain")
  if (domain === "localhost" || domain.endsWith(".localhost")) return invalid("domain", "localhost names are this machine's, not a deployment's")
  const base = baseDomain.toLowerCase().replace(/\.$/, "")
  if (domain === base || domain.endsWith("." + base)) {
    return invalid("domain", `${base} and the names under it are the platform's; use the deployment's own host, or a domain you hold`)
  }
  return Either.right(domain)
}

/** The name of the TXT record that verifies `domain` (already checked by `customDomain`). */
export const verificationRecordName = (domain: string): string => `${VERIFY_LABEL}.${domain}`
