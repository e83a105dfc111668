/** An integer setting within bounds, with its default: the shape every family's limits take. */
import { Config } from "effect"

export const between = (name: string, fallback: number, min: number, max: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `expected an integer from ${min} to ${max}`, validation: (n) => n >= min && n <= max }),
    Config.withDefault(fallback)
  )
