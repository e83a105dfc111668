/** Picks the registry engine the settings name: the embedded SQLite file or an rqlite cluster. */
import type { Layer } from "effect"
import type { PorticoSettings } from "../config/PorticoConfig.js"
import type { RegistryStore, StoreError } from "./RegistryStore.js"
import { RqliteRegistryStore } from "./RqliteRegistryStore.js"
import { SqliteRegistryStore } from "./SqliteRegistryStore.js"

export const registryLayer = (settings: PorticoSettings): Layer.Layer<RegistryStore, StoreError> =>
  settings.registry.engine === "sqlite"
    ? SqliteRegistryStore.layer({ filename: settings.registry.file })
    : RqliteRegistryStore.layer({
        url: settings.registry.url,
        user: settings.registry.user,
        password: settings.registry.password
      })
