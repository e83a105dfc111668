import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { checkInstallInputs, checkLockfile, checkPackageJson, classifySpec, startCommand } from "../../src/domain/NodeInstall.js"

const refusal = (result: Either.Either<void, { _tag: string }>) => (Either.isLeft(result) ? result.left : undefined)

describe("start rule (spec §4.8)", () => {
  it("is npm start, else main, else index.js", () => {
    expect(Either.getOrThrow(startCommand({ scripts: { start: "node server.js" }, main: "lib/x.js" })).argv).toEqual(["npm", "start"])
    expect(Either.getOrThrow(startCommand({ scripts: { build: "tsc" }, main: "./lib/x.js" }))).toEqual({ kind: "file", argv: ["node", "lib/x.js"], entryPoint: "lib/x.js" })
    expect(Either.getOrThrow(startCommand({ scripts: { start: "  " } })).argv).toEqual(["node", "index.js"])
    expect(Either.getOrThrow(startCommand({ name: "x" })).argv).toEqual(["node", "index.js"])
    expect(Either.getOrThrow(startCommand(undefined)).argv).toEqual(["node", "index.js"])
  })
  it("refuses a main outside the app and a package.json that is not an object", () => {
    for (const main of ["/etc/passwd", "../other/app.js", "lib/../../x.js", "."]) expect(Either.isLeft(startCommand({ main }))).toBe(true)
    expect(Either.isLeft(startCommand([]))).toBe(true)
  })
})

describe("dependency specs", () => {
  it("lets registry versions, ranges, tags and npm: aliases through", () => {
    for (const spec of ["1.2.3", "^1.2.3", "~1.2", ">=1 <3 || 4.x", "*", "", "latest", "next", "1.0.0-beta.1+build", "npm:left-pad@^1", "npm:@scope/pkg@2.0.0", "npm:@scope/pkg"]) {
      expect([spec, classifySpec(spec)]).toEqual([spec, "registry"])
    }
  })
  it("names what every other spec is", () => {
    const cases: Array<[string, string]> = [
      ["git+https://github.com/a/b.git", "git"],
      ["git+ssh://git@github.com:a/b.git#v1", "git"],
      ["git://github.com/a/b.git", "git"],
      ["github:a/b", "git"],
      ["gitlab:a/b", "git"],
      ["bitbucket:a/b", "git"],
      ["gist:11081aaa", "git"],
      ["a/b", "git"],
      ["a/b#semver:^1", "git"],
      ["https://example.com/x.tgz", "url"],
      ["http://example.com/x", "url"],
      ["HTTPS://EXAMPLE.COM/x", "url"],
      ["file:../lib", "file"],
      ["FILE:./x.tgz", "file"],
      ["link:../lib", "link"],
      ["./lib", "path"],
      ["../lib", "path"],
      ["/abs/lib", "path"],
      ["~/lib", "path"],
      [".", "path"],
      ["C:\\lib", "path"],
      ["lib.tgz", "tarball"],
      ["lib.tar.gz", "tarball"],
      ["workspace:*", "unsupported"],
      ["npm:left-pad@git+https://x/y", "unsupported"],
      ["npm:../x", "unsupported"],
      ["1.0.0 #frag", "unsupported"]
    ]
    for (const [spec, kind] of cases) expect([spec, classifySpec(spec)]).toEqual([spec, kind])
  })
})

describe("package.json", () => {
  it("passes registry dependencies in every field", () => {
    expect(
      Either.isRight(
        checkPackageJson({
          dependencies: { a: "^1" },
          devDependencies: { b: "2" },
          optionalDependencies: { c: "latest" },
          peerDependencies: { d: ">=3" },
          bundleDependencies: ["a"],
          overrides: { e: "1.0.0", f: { ".": "2", g: "3" }, a: "$a" }
        })
      )
    ).toBe(true)
  })
  it("refuses a non-registry spec in each field, naming the dependency and where", () => {
    for (const field of ["dependencies", "devDependencies", "optionalDependencies", "peerDependencies"]) {
      const found = refusal(checkPackageJson({ dependencies: { ok: "1" }, [field]: { evil: "github:x/evil" } }))
      expect(found).toMatchObject({ _tag: "DependencyRefused", dependency: "evil", where: field, kind: "git" })
      expect((found as unknown as Error).message).toMatch(/'evil'/)
    }
  })
  it("refuses one in overrides, however deep", () => {
    expect(refusal(checkPackageJson({ overrides: { a: { b: { c: "file:../c" } } } }))).toMatchObject({ dependency: "c", where: "overrides", kind: "file" })
    expect(refusal(checkPackageJson({ overrides: { a: { ".": "https://x.test/a.tgz" } } }))).toMatchObject({ dependency: "a", kind: "url" })
    expect(refusal(checkPackageJson({ overrides: { a: 5 } }))).toMatchObject({ _tag: "PackageFileInvalid" })
  })
  it("refuses workspaces in any form", () => {
    expect(refusal(checkPackageJson({ workspaces: ["packages/*"] }))).toMatchObject({ kind: "workspaces" })
    expect(refusal(checkPackageJson({ workspaces: { packages: [] } }))).toMatchObject({ kind: "workspaces" })
  })
  it("refuses what is not a dependency map", () => {
    expect(refusal(checkPackageJson({ dependencies: ["a"] }))).toMatchObject({ _tag: "PackageFileInvalid" })
    expect(refusal(checkPackageJson({ dependencies: { a: 1 } }))).toMatchObject({ _tag: "DependencyRefused", dependency: "a", kind: "unsupported" })
    expect(refusal(checkPackageJson("x"))).toMatchObject({ _tag: "PackageFileInvalid" })
  })
})

const registryEntry = (name: string, version: string) => ({ version, resolved: `https://registry.npmjs.org/${name}/-/${name}-${version}.tgz`, integrity: "sha512-x" })

describe("lockfile", () => {
  const good = {
    lockfileVersion: 3,
    packages: {
      "": { name: "app", dependencies: { a: "^1", b: "npm:c@^2" } },
      "node_modules/a": registryEntry("a", "1.0.0"),
      "node_modules/b": { ...registryEntry("c", "2.0.0"), name: "c" },
      "node_modules/a/node_modules/@s/d": registryEntry("@s/d", "3.0.0"),
      "node_modules/bundled": { version: "1.0.0", inBundle: true }
    }
  }
  it("passes registry packages (v3, and v1's dependencies tree)", () => {
    expect(Either.isRight(checkLockfile(good))).toBe(true)
    expect(Either.isRight(checkLockfile({ lockfileVersion: 1, dependencies: { a: { ...registryEntry("a", "1.0.0"), dependencies: { b: registryEntry("b", "2.0.0") } } } }))).toBe(true)
  })
  it("refuses a resolved off the public registry, naming the package", () => {
    const lock = { packages: { ...good.packages, "node_modules/a/node_modules/@s/d": { version: "3.0.0", resolved: "git+ssh://git@github.com/s/d.git#abc" } } }
    expect(refusal(checkLockfile(lock))).toMatchObject({ dependency: "@s/d", where: "package-lock.json packages", kind: "git" })
    const mirror = { packages: { "node_modules/a": { version: "1.0.0", resolved: "https://registry.evil.test/a/-/a-1.0.0.tgz" } } }
    expect(refusal(checkLockfile(mirror))).toMatchObject({ dependency: "a", kind: "url" })
    const lookalike = { packages: { "node_modules/a": { version: "1.0.0", resolved: "https://registry.npmjs.org.evil.test/a.tgz" } } }
    expect(refusal(checkLockfile(lookalike))).toMatchObject({ dependency: "a", kind: "url" })
    const local = { packages: { "node_modules/a": { version: "1.0.0", resolved: "file:../a" } } }
    expect(refusal(checkLockfile(local))).toMatchObject({ dependency: "a", kind: "file" })
  })
  it("refuses links, packages outside node_modules and workspaces", () => {
    expect(refusal(checkLockfile({ packages: { "node_modules/w": { resolved: "packages/w", link: true } } }))).toMatchObject({ dependency: "w", kind: "link" })
    expect(refusal(checkLockfile({ packages: { "packages/w": { version: "1.0.0" } } }))).toMatchObject({ dependency: "packages/w", kind: "path" })
    expect(refusal(checkLockfile({ packages: { "": { workspaces: ["packages/*"] } } }))).toMatchObject({ kind: "workspaces" })
    expect(refusal(checkLockfile({ packages: { "": { dependencies: { x: "link:../x" } } } }))).toMatchObject({ dependency: "x", kind: "link" })
  })
  it("refuses a git or file version in the legacy tree, however deep", () => {
    const lock = { lockfileVersion: 2, dependencies: { a: { ...registryEntry("a", "1.0.0"), dependencies: { b: { version: "git+https://github.com/x/b.git#abc" } } } } }
    expect(refusal(checkLockfile(lock))).toMatchObject({ dependency: "b", kind: "git" })
    expect(refusal(checkLockfile({ dependencies: { c: { version: "file:../c" } } }))).toMatchObject({ dependency: "c", kind: "file" })
  })
  it("checks package.json, the shrinkwrap and the lock together", () => {
    expect(Either.isRight(checkInstallInputs({ packageJson: { dependencies: { a: "^1" } }, packageLock: good }))).toBe(true)
    const badShrinkwrap = { packages: { "node_modules/a": { version: "1.0.0", resolved: "https://x.test/a.tgz" } } }
    expect(refusal(checkInstallInputs({ packageJson: {}, packageLock: good, shrinkwrap: badShrinkwrap }))).toMatchObject({ where: "npm-shrinkwrap.json packages" })
    expect(refusal(checkInstallInputs({ packageJson: { dependencies: { a: "a/b" } }, packageLock: good }))).toMatchObject({ dependency: "a", kind: "git" })
  })
})
