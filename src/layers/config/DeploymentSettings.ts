/**
 * The deployments' settings (`PORTICO_APP_PORTS`, `PORTICO_DEPLOYMENTS_PER_NAMESPACE`,
 * `PORTICO_PUBLIC_URL`, `PORTICO_APP_HEALTH_INTERVAL_MS`, `PORTICO_APP_START_TIMEOUT_MS`,
 * `PORTICO_DEPLOYMENT_REPLICAS`, `PORTICO_REPLICA_CHECK_MS`;
 * docs/deployments.md): where a node's app ports come from, how many deployments one namespace
 * may hold, the URL an app is told the gateway has, and the supervisor's timings.
 */
import { Config, ConfigError, Effect, Either, Option } from "effect"

export interface DeploymentSettings {
  /**
   * `first-last` (default spec §8's 10200-19999): where this node's app ports are drawn from. An
   * operator moves it off ports other programs use; test gateways sharing one machine each take
   * their own block.
   */
  readonly appPorts: { readonly first: number; readonly last: number }
  /**
   * Deployments one namespace may hold, whatever their status: a record keeps its port (a failed
   * one too, so its log can be read and an update can fix it), and without a bound one tenant could
   * take every port of a node's range from the others.
   */
  readonly perNamespace: number
  /** The gateway's public URL given to apps (no trailing slash); undefined: the listen address. */
  readonly publicUrl: string | undefined
  /** How often a running app's health path is asked. */
  readonly healthIntervalMs: number
  /** How long a starting app has to answer its health path. */
  readonly startTimeoutMs: number
  /** `PORTICO_DEPLOYMENT_REPLICAS` (default 1): nodes besides its home that run each dynamic app, when the cluster has them (0: none). */
  readonly replicas: number
  /** `PORTICO_REPLICA_CHECK_MS` (default 5 minutes, spec §8): how often the cluster's worker re-creates missing or failed replicas. */
  readonly replicaCheckMs: number
}

export const DEFAULT_DEPLOYMENTS_PER_NAMESPACE = 100

export const defaultDeploymentSettings: DeploymentSettings = {
  appPorts: { first: 10200, last: 19999 },
  perNamespace: DEFAULT_DEPLOYMENTS_PER_NAMESPACE,
  publicUrl: undefined,
  healthIntervalMs: 30_000,
  startTimeoutMs: 60_000,
  replicas: 1,
  replicaCheckMs: 300_000
}

const appPorts = Config.string("APP_PORTS").pipe(
  Config.withDefault("10200-19999"),
  Config.mapOrFail((text) => {
    const match = /^\s*(\d{4,5})\s*-\s*(\d{4,5})\s*$/.exec(text)
    const first = Number(match?.[1])
    const last = Number(match?.[2])
    return match !== null && first >= 1024 && first <= last && last <= 65535
      ? Either.right({ first, last })
      : Either.left(ConfigError.InvalidData([], `expected first-last within 1024-65535, got "${text}"`))
  })
)

const positive = (name: string, fallback: number, message: string) =>
  Config.integer(name).pipe(Config.validate({ message, validation: (n) => n > 0 }), Config.withDefault(fallback))

export const deploymentConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const publicUrl = yield* env(Config.option(Config.url("PUBLIC_URL")))
  const settings: DeploymentSettings = {
    appPorts: yield* env(appPorts),
    perNamespace: yield* env(positive("DEPLOYMENTS_PER_NAMESPACE", DEFAULT_DEPLOYMENTS_PER_NAMESPACE, "expected a positive integer")),
    publicUrl: Option.getOrUndefined(Option.map(publicUrl, (url) => url.toString().replace(/\/$/, ""))),
    healthIntervalMs: yield* env(positive("APP_HEALTH_INTERVAL_MS", defaultDeploymentSettings.healthIntervalMs, "expected a positive number of milliseconds")),
    startTimeoutMs: yield* env(positive("APP_START_TIMEOUT_MS", defaultDeploymentSettings.startTimeoutMs, "expected a positive number of milliseconds")),
    replicas: yield* env(
      Config.integer("DEPLOYMENT_REPLICAS").pipe(Config.validate({ message: "expected 0 to 8", validation: (n) => n >= 0 && n <= 8 }), Config.withDefault(defaultDeploymentSettings.replicas))
    ),
    replicaCheckMs: yield* env(positive("REPLICA_CHECK_MS", defaultDeploymentSettings.replicaCheckMs, "expected a positive number of milliseconds"))
  }
  return settings
})
