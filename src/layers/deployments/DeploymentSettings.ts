/**
 * The deployment store's settings, read from the environment where its layer is built: where a
 * node's app ports come from, and how many deployments one namespace may hold.
 */
import { Config, ConfigError, Either } from "effect"

/**
 * PORTICO_APP_PORTS, `first-last` (default spec §8's 10200-19999): where this node's app ports are
 * drawn from. An operator moves it off ports other programs use; test gateways sharing one machine
 * each take their own block.
 */
export const appPortsSetting = Config.string("APP_PORTS").pipe(
  Config.withDefault("10200-19999"),
  Config.mapOrFail((text) => {
    const match = /^\s*(\d{4,5})\s*-\s*(\d{4,5})\s*$/.exec(text)
    const first = Number(match?.[1])
    const last = Number(match?.[2])
    return match !== null && first >= 1024 && first <= last && last <= 65535
      ? Either.right({ first, last })
      : Either.left(ConfigError.InvalidData([], `expected first-last within 1024-65535, got "${text}"`))
  }),
  Config.nested("PORTICO")
)

/**
 * Deployments one namespace may hold, whatever their status: a record keeps its port (a failed
 * one too, so its log can be read and an update can fix it), and without a bound one tenant could
 * take every port of a node's range from the others.
 */
export const DEFAULT_DEPLOYMENTS_PER_NAMESPACE = 100

/** PORTICO_DEPLOYMENTS_PER_NAMESPACE, a positive integer (default 100). */
export const perNamespaceSetting = Config.integer("DEPLOYMENTS_PER_NAMESPACE").pipe(
  Config.validate({ message: "expected a positive integer", validation: (n) => n >= 1 }),
  Config.withDefault(DEFAULT_DEPLOYMENTS_PER_NAMESPACE),
  Config.nested("PORTICO")
)

export const deploymentStoreSettings = Config.all({ ports: appPortsSetting, perNamespace: perNamespaceSetting })
