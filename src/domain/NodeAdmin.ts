/** Node administration's fixed terms (docs/cluster.md, "Node administration"), shared by the routes and the services. */

/** The most log lines a node keeps and `GET /v1/node/logs` answers. */
export const NODE_LOG_LINES = 1000

/** What `POST /v1/node/command` asks of a node. */
export const NODE_COMMANDS = ["drain", "undrain", "repair"] as const
export type NodeCommand = (typeof NODE_COMMANDS)[number]

/** What `/v1/internal/namespace/spawn` does to one app: start it unless it runs, or stop and start it. */
export const SPAWN_ACTIONS = ["start", "restart"] as const
export type SpawnAction = (typeof SPAWN_ACTIONS)[number]
