/**
 * The platform sign-in realm (docs/namespaces.md, "Signing in before a namespace exists"): a
 * wallet signs in to it before it has a namespace, as to a namespace named `portico`. The name is
 * reserved, so no namespace can ever hold it. Its sessions reach only the routes whose policy is
 * `wallet` or `operator` (creating and listing namespaces, the operator plane); the gate refuses
 * them everywhere else.
 */
export const PLATFORM_REALM = "portico"

export const isPlatformRealm = (namespace: string): boolean => namespace === PLATFORM_REALM
