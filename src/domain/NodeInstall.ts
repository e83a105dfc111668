/**
 * A Node.js deployment's `package.json` and lockfile (spec §4.8): how the app is started, and
 * which dependencies the server-side install refuses before it runs. The install reaches only the
 * public registry, so every dependency must be a registry package: a git, URL, `file:`, `link:`,
 * path or tarball spec anywhere npm would follow one (dependency fields, `overrides`, the
 * lockfile) is refused naming it, as is any `workspaces`. Pure and client-safe.
 */
import { Data, Either } from "effect"

/** Why the install step refuses: `dependency` names it (the route answers 500 naming it, spec §7). */
export class DependencyRefused extends Data.TaggedError("DependencyRefused")<{
  /** The dependency's name (or `workspaces`, or the lockfile's package path). */
  readonly dependency: string
  /** Where it was found: `dependencies`, `overrides`, `package-lock.json packages`, ... */
  readonly where: string
  readonly kind: "git" | "url" | "file" | "link" | "path" | "tarball" | "workspaces" | "unsupported"
  readonly spec: string
}> {
  override get message(): string {
    return this.kind === "workspaces"
      ? `workspaces are not supported (${this.where})`
      : `dependency '${this.dependency}' in ${this.where} is a ${this.kind} spec ('${this.spec.slice(0, 200)}'); only registry packages install on the server`
  }
}

/** The package.json or lockfile is not what npm would read. */
export class PackageFileInvalid extends Data.TaggedError("PackageFileInvalid")<{ readonly file: string; readonly reason: string }> {
  override get message(): string {
    return `${this.file}: ${this.reason}`
  }
}

type Refusal = DependencyRefused | PackageFileInvalid

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** How the app starts (spec §4.8): `scripts.start` → `npm start`; else `main` → `node <main>`; else `node index.js`. */
export type StartCommand =
  | { readonly kind: "npm-start"; readonly argv: readonly ["npm", "start"]; readonly entryPoint: "npm start" }
  | { readonly kind: "file"; readonly argv: readonly ["node", string]; readonly entryPoint: string }

/** The start rule over a parsed package.json (absent: no package.json, so `index.js`). */
export const startCommand = (packageJson: unknown): Either.Either<StartCommand, PackageFileInvalid> => {
  if (packageJson === undefined) return Either.right(runFile("index.js"))
  if (!isRecord(packageJson)) return Either.left(new PackageFileInvalid({ file: "package.json", reason: "not a JSON object" }))
  const scripts = packageJson["scripts"]
  if (isRecord(scripts) && typeof scripts["start"] === "string" && scripts["start"].trim() !== "") {
    return Either.right({ kind: "npm-start", argv: ["npm", "start"], entryPoint: "npm start" })
  }
  const main = packageJson["main"]
  if (typeof main === "string" && main.trim() !== "") {
    const file = main.trim().replace(/^(?:\.\/)+/, "")
    // the app's own directory is all it sees: a main outside it could never start
    if (file.startsWith("/") || file.split(/[\\/]/).includes("..") || file === "" || file === ".") {
      return Either.left(new PackageFileInvalid({ file: "package.json", reason: "main must name a file inside the app" }))
    }
    return Either.right(runFile(file))
  }
  return Either.right(runFile("index.js"))
}

const runFile = (file: string): StartCommand => ({ kind: "file", argv: ["node", file], entryPoint: file })

/** npm's package-name rule (validate-npm-package-name, new packages), scope included. */
const packageName = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9~][a-z0-9._~-]*$/i
/** A semver version or range, or a dist-tag: what the registry resolves. No `/`, `:`, `\`, `@` or `#`. */
const registrySpec = /^[A-Za-z0-9.+\-<>=~^|*_ \t]*$/
const tarballName = /\.(?:tgz|tar|tar\.gz)$/i

/**
 * What a dependency spec is, as npm (npm-package-arg) would read it. Only a registry spec (a
 * version, range or tag) or an `npm:` alias of one is `registry`; everything else names what it is.
 */
export const classifySpec = (spec: string): DependencyRefused["kind"] | "registry" => {
  const text = spec.trim()
  if (/^npm:/i.test(text)) {
    const aliased = text.slice(4)
    const at = aliased.indexOf("@", aliased.startsWith("@") ? 1 : 0)
    const name = at < 0 ? aliased : aliased.slice(0, at)
    if (!packageName.test(name)) return "unsupported"
    return at < 0 ? "registry" : classifySpec(aliased.slice(at + 1)) === "registry" ? "registry" : "unsupported"
  }
  if (/^(?:git\+|git:|github:|gitlab:|bitbucket:|gist:)/i.test(text)) return "git"
  if (/^file:/i.test(text)) return "file"
  if (/^link:/i.test(text)) return "link"
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return "url"
  if (/^(?:\.|~[\\/]|[\\/]|[a-zA-Z]:)/.test(text)) return "path"
  if (tarballName.test(text)) return "tarball"
  // `user/repo` and `user/repo#ref` are GitHub shorthands
  if (/^[^@/\s:]+\/[^\s]+$/.test(text)) return "git"
  if (registrySpec.test(text)) return "registry"
  return "unsupported"
}

const refuseSpec = (dependency: string, where: string, spec: unknown): Either.Either<void, Refusal> => {
  if (typeof spec !== "string") return Either.left(new DependencyRefused({ dependency, where, kind: "unsupported", spec: String(spec) }))
  const kind = classifySpec(spec)
  return kind === "registry" ? Either.void : Either.left(new DependencyRefused({ dependency, where, kind, spec }))
}

const dependencyFields = ["dependencies", "devDependencies", "optionalDependencies", "peerDependencies"] as const

/** Every spec of a dependency-field map. */
const checkDependencyMap = (value: unknown, where: string): Either.Either<void, Refusal> => {
  if (value === undefined) return Either.void
  if (!isRecord(value)) return Either.left(new PackageFileInvalid({ file: where, reason: "a dependency field is an object of name to spec" }))
  for (const [name, spec] of Object.entries(value)) {
    const checked = refuseSpec(name, where, spec)
    if (Either.isLeft(checked)) return checked
  }
  return Either.void
}

/**
 * `overrides`: nested objects whose string leaves are specs; the `.` key is the override of the
 * package itself, and `$name` refers to a direct dependency's spec (checked where it is written).
 */
const checkOverrides = (value: unknown, path: string): Either.Either<void, Refusal> => {
  if (value === undefined) return Either.void
  if (typeof value === "string") {
    if (value.startsWith("$")) return Either.void
    return refuseSpec(path, "overrides", value)
  }
  if (!isRecord(value)) return Either.left(new PackageFileInvalid({ file: "package.json", reason: `overrides '${path}' is neither a spec nor an object` }))
  for (const [key, inner] of Object.entries(value)) {
    const checked = checkOverrides(inner, key === "." ? path : key)
    if (Either.isLeft(checked)) return checked
  }
  return Either.void
}

const workspaces = (where: string): Either.Either<never, Refusal> =>
  Either.left(new DependencyRefused({ dependency: "workspaces", where, kind: "workspaces", spec: "" }))

/**
 * package.json's dependency fields and `overrides`, and no `workspaces`. `bundleDependencies` lists
 * names already in the dependency fields (their copies come from the upload), so it adds no spec.
 */
export const checkPackageJson = (packageJson: unknown): Either.Either<void, Refusal> => {
  if (!isRecord(packageJson)) return Either.left(new PackageFileInvalid({ file: "package.json", reason: "not a JSON object" }))
  if (packageJson["workspaces"] !== undefined) return workspaces("package.json")
  for (const field of dependencyFields) {
    const checked = checkDependencyMap(packageJson[field], field)
    if (Either.isLeft(checked)) return checked
  }
  return checkOverrides(packageJson["overrides"], "overrides")
}

/** The public registry: the only place a lockfile's `resolved` may point (what the install reaches). */
export const PUBLIC_REGISTRY = "https://registry.npmjs.org/"

const checkResolved = (dependency: string, where: string, resolved: unknown): Either.Either<void, Refusal> => {
  if (resolved === undefined) return Either.void
  if (typeof resolved === "string" && resolved.startsWith(PUBLIC_REGISTRY)) return Either.void
  const spec = String(resolved)
  const kind = classifySpec(spec)
  return Either.left(new DependencyRefused({ dependency, where, kind: kind === "registry" ? "url" : kind, spec }))
}

/** The package name of a lockfile `packages` key (`node_modules/a/node_modules/@s/b` → `@s/b`). */
const nameOfLockPath = (path: string): string => {
  const at = path.lastIndexOf("node_modules/")
  return at < 0 ? path : path.slice(at + "node_modules/".length)
}

/** lockfile v1's (and v2's legacy) `dependencies` tree: `version` a spec npm follows, `resolved` a URL. */
const checkLegacyTree = (tree: unknown, file: string): Either.Either<void, Refusal> => {
  if (tree === undefined) return Either.void
  if (!isRecord(tree)) return Either.left(new PackageFileInvalid({ file, reason: "dependencies is not an object" }))
  for (const [name, entry] of Object.entries(tree)) {
    if (!isRecord(entry)) return Either.left(new PackageFileInvalid({ file, reason: `dependencies.${name} is not an object` }))
    const where = `${file} dependencies`
    if (entry["version"] !== undefined) {
      const checked = refuseSpec(name, where, entry["version"])
      if (Either.isLeft(checked)) return checked
    }
    const resolved = checkResolved(name, where, entry["resolved"])
    if (Either.isLeft(resolved)) return resolved
    const inner = checkLegacyTree(entry["dependencies"], file)
    if (Either.isLeft(inner)) return inner
  }
  return Either.void
}

/**
 * A package-lock.json or npm-shrinkwrap.json (lockfile versions 1-3): in `packages`, no
 * `link: true` (a workspace or `file:` link), `resolved` only on the public registry, `version`
 * a registry version; the root entry's fields as package.json's; the legacy `dependencies` tree
 * likewise.
 */
export const checkLockfile = (lockfile: unknown, file = "package-lock.json"): Either.Either<void, Refusal> => {
  if (!isRecord(lockfile)) return Either.left(new PackageFileInvalid({ file, reason: "not a JSON object" }))
  const packages = lockfile["packages"]
  if (packages !== undefined) {
    if (!isRecord(packages)) return Either.left(new PackageFileInvalid({ file, reason: "packages is not an object" }))
    for (const [path, entry] of Object.entries(packages)) {
      if (!isRecord(entry)) return Either.left(new PackageFileInvalid({ file, reason: `packages['${path}'] is not an object` }))
      const where = `${file} packages`
      if (path === "") {
        if (entry["workspaces"] !== undefined) return workspaces(file)
        for (const field of dependencyFields) {
          const checked = checkDependencyMap(entry[field], `${file} ${field}`)
          if (Either.isLeft(checked)) return checked
        }
        continue
      }
      const name = nameOfLockPath(path)
      if (entry["link"] === true) return Either.left(new DependencyRefused({ dependency: name, where, kind: "link", spec: String(entry["resolved"] ?? path) }))
      if (!path.startsWith("node_modules/")) {
        // a package outside node_modules is a workspace or a file dependency's folder
        return Either.left(new DependencyRefused({ dependency: name, where, kind: "path", spec: path }))
      }
      if (entry["version"] !== undefined) {
        const checked = refuseSpec(name, where, entry["version"])
        if (Either.isLeft(checked)) return checked
      }
      const resolved = checkResolved(name, where, entry["resolved"])
      if (Either.isLeft(resolved)) return resolved
    }
  }
  return checkLegacyTree(lockfile["dependencies"], file)
}

/**
 * Everything the install step reads, checked before it runs: package.json and whichever of
 * `npm-shrinkwrap.json` and `package-lock.json` the upload carries (npm reads the shrinkwrap first;
 * both are checked so neither can carry what the other does not).
 */
export const checkInstallInputs = (inputs: {
  readonly packageJson: unknown
  readonly packageLock?: unknown
  readonly shrinkwrap?: unknown
}): Either.Either<void, Refusal> => {
  const pkg = checkPackageJson(inputs.packageJson)
  if (Either.isLeft(pkg)) return pkg
  if (inputs.shrinkwrap !== undefined) {
    const checked = checkLockfile(inputs.shrinkwrap, "npm-shrinkwrap.json")
    if (Either.isLeft(checked)) return checked
  }
  if (inputs.packageLock !== undefined) return checkLockfile(inputs.packageLock, "package-lock.json")
  return Either.void
}
