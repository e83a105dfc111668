/**
 * What kind of app a directory holds, when `portico deploy` is not told `--type`: the first of
 * these that fits, so a directory that is several (a Go server with a package.json for its
 * front-end tooling) is taken as the one that runs:
 *
 *   go.mod at the root                                  → go
 *   next.config.{js,mjs,cjs,ts,mts} at the root, or a
 *   `next` dependency in package.json                   → nextjs
 *   package.json at the root                            → nodejs
 *   anything else                                       → static
 *
 * Only the root is looked at: the deploy directory is the app.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { DeploymentType } from "../../domain/DeploymentRules.js"
import { CliError } from "../Cli.js"

export const NEXT_CONFIG_FILES = ["next.config.js", "next.config.mjs", "next.config.cjs", "next.config.ts", "next.config.mts"] as const

const isFile = (file: string): boolean => {
  try {
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** The app's package.json as an object, undefined when there is none; unreadable JSON is a clear error. */
export const readPackageJson = (dir: string): Readonly<Record<string, unknown>> | undefined => {
  const file = path.join(dir, "package.json")
  if (!isFile(file)) return undefined
  try {
    const value: unknown = JSON.parse(fs.readFileSync(file, "utf8"))
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
  } catch (error) {
    throw new CliError(`${file} is not valid JSON (${error instanceof Error ? error.message : String(error)})`)
  }
}

const dependsOn = (pkg: Readonly<Record<string, unknown>>, name: string): boolean =>
  ["dependencies", "devDependencies"].some((field) => {
    const deps = pkg[field]
    return typeof deps === "object" && deps !== null && name in deps
  })

/** The Next.js config file at the root, if any. */
export const nextConfigFile = (dir: string): string | undefined =>
  NEXT_CONFIG_FILES.map((name) => path.join(dir, name)).find(isFile)

export const detectAppType = (dir: string): DeploymentType => {
  if (isFile(path.join(dir, "go.mod"))) return "go"
  if (nextConfigFile(dir) !== undefined) return "nextjs"
  const pkg = readPackageJson(dir)
  if (pkg !== undefined) return dependsOn(pkg, "next") ? "nextjs" : "nodejs"
  return "static"
}
