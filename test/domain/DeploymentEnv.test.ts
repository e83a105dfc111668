import { Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  applyEnvChange,
  checkEnvironment,
  ENV_RENDERED_MAX_BYTES,
  ENV_VALUE_MAX_BYTES,
  PLATFORM_ENV_NAMES,
  PLATFORM_ENV_RESERVE_BYTES,
  parseRenderedEnvironment,
  processEnvironment,
  renderedBytes,
  renderEnvironment
} from "../../src/domain/DeploymentEnv.js"
import { mergeDeployEnv, parseEnvFile, parseEnvFlag } from "../../src/domain/EnvFile.js"

const refused = <A>(result: Either.Either<A, { field: string; reason: string }>) => (Either.isLeft(result) ? result.left : undefined)
const room = ENV_RENDERED_MAX_BYTES - PLATFORM_ENV_RESERVE_BYTES

describe("environment change", () => {
  it("sets, replaces and unsets, and says whether anything changed", () => {
    const first = Either.getOrThrow(applyEnvChange({ A: "1", B: "2" }, { set: { A: "one", C: "three" }, unset: ["B"] }))
    expect(first).toEqual({ env: { A: "one", C: "three" }, changed: true })
    expect(Either.getOrThrow(applyEnvChange(first.env, { set: { A: "one" }, unset: ["NOT_THERE"] })).changed).toBe(false)
    expect(Either.getOrThrow(applyEnvChange({}, {})).changed).toBe(false)
  })
  it("keeps a value as given: newlines, quotes, '=' and non-ASCII", () => {
    const value = "line1\nline2 \"quoted\" a=b $HOME ü 🚀"
    expect(Either.getOrThrow(applyEnvChange({}, { set: { V: value } })).env["V"]).toBe(value)
  })
  it("refuses every platform name, set or unset, naming it, and changes nothing", () => {
    for (const name of PLATFORM_ENV_NAMES) {
      const current = { KEEP: "x" }
      expect(refused(applyEnvChange(current, { set: { OK: "1", [name]: "x" } }))?.field).toBe(`set.${name}`)
      expect(refused(applyEnvChange(current, { unset: [name] }))?.field).toBe(`unset.${name}`)
      expect(current).toEqual({ KEEP: "x" })
    }
  })
  it("refuses dynamic-loader and runtime-injection names at set and in an upload's environment, and lets one stored earlier be removed", () => {
    for (const name of ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "NODE_OPTIONS", "GODEBUG", "GLIBC_TUNABLES", "GCONV_PATH", "BASH_ENV"]) {
      const change = refused(applyEnvChange({ KEEP: "x" }, { set: { OK: "1", [name]: "/tmp/x.so" } }))
      expect(change?.field).toBe(`set.${name}`)
      expect(change?.reason).toMatch(/reserved by the platform/)
      expect(refused(checkEnvironment({ [name]: "x" }))?.field).toBe(`env.${name}`)
    }
    expect(Either.getOrThrow(applyEnvChange({ LD_PRELOAD: "/x.so" }, { unset: ["LD_PRELOAD"] })).env).toEqual({})
    // near names are the tenant's
    expect(Either.getOrThrow(applyEnvChange({}, { set: { OLD_PRELOAD: "1", NODE_ENV: "production", GO_DEBUG: "1" } })).changed).toBe(true)
  })
  it("refuses bad names and values naming the field", () => {
    expect(refused(applyEnvChange({}, { set: { "1A": "x" } }))?.field).toBe("set.1A")
    expect(refused(applyEnvChange({}, { set: { "A-B": "x" } }))?.field).toBe("set.A-B")
    expect(refused(applyEnvChange({}, { set: { ["A".repeat(129)]: "x" } }))?.field).toMatch(/^set\.A+$/)
    expect(refused(applyEnvChange({}, { set: { A: "nul\u0000inside" } }))?.reason).toMatch(/NUL/)
    expect(refused(applyEnvChange({}, { set: { A: "lone \ud800 surrogate" } }))?.reason).toMatch(/UTF-8/)
    expect(refused(applyEnvChange({}, { set: { A: 5 } }))?.field).toBe("set.A")
    expect(refused(applyEnvChange({}, { unset: [""] }))?.field).toBe("unset[0]")
    expect(refused(applyEnvChange({ A: "1" }, { set: { A: "2" }, unset: ["A"] }))?.reason).toMatch(/both/)
  })
  it("takes a value of exactly 64 KiB of UTF-8 and refuses one byte more", () => {
    expect(Either.isRight(applyEnvChange({}, { set: { A: "x".repeat(ENV_VALUE_MAX_BYTES) } }))).toBe(true)
    expect(refused(applyEnvChange({}, { set: { A: "x".repeat(ENV_VALUE_MAX_BYTES + 1) } }))?.field).toBe("set.A")
    // bytes, not characters: 'é' is two
    expect(refused(applyEnvChange({}, { set: { A: "é".repeat(ENV_VALUE_MAX_BYTES / 2 + 1) } }))?.field).toBe("set.A")
  })
  it("caps the rendered environment (224 KiB with the platform's reserve)", () => {
    const value = "x".repeat(60 * 1024)
    const three = Either.getOrThrow(applyEnvChange({}, { set: { A: value, B: value, C: value } })).env
    expect(renderedBytes(three)).toBeLessThanOrEqual(room)
    const over = refused(applyEnvChange(three, { set: { D: value } }))
    expect(over?.field).toBe("set")
    expect(over?.reason).toMatch(/224|229376/)
    // exactly at the cap: NAME=value\0 for one variable
    const exact = "y".repeat(room - "Z=".length - 1 - renderedBytes(three))
    expect(exact.length).toBeLessThanOrEqual(ENV_VALUE_MAX_BYTES)
    expect(Either.isRight(applyEnvChange(three, { set: { Z: exact } }))).toBe(true)
    expect(Either.isLeft(applyEnvChange(three, { set: { Z: `${exact}y` } }))).toBe(true)
    // unsetting makes room again
    expect(Either.isRight(applyEnvChange(three, { set: { D: value }, unset: ["A"] }))).toBe(true)
  })
  it("treats __proto__ as a name like any other", () => {
    const applied = Either.getOrThrow(applyEnvChange({}, { set: JSON.parse('{"__proto__":"p","A":"a"}') as Record<string, unknown> }))
    expect(Object.keys(applied.env).sort()).toEqual(["A", "__proto__"])
    expect(new TextDecoder().decode(renderEnvironment(applied.env))).toBe("A=a\u0000__proto__=p\u0000")
  })
})

describe("rendering", () => {
  it("is NAME=value NUL-ended, sorted, and reads back unchanged", () => {
    const env = { B: "two\nlines", A: "a=b", E: "" }
    const bytes = renderEnvironment(env)
    expect(new TextDecoder().decode(bytes)).toBe("A=a=b\u0000B=two\nlines\u0000E=\u0000")
    expect(bytes.length).toBe(renderedBytes(env))
    expect(parseRenderedEnvironment(bytes)).toEqual(env)
  })
  it("adds the platform's variables within their reserve", () => {
    const env = Either.getOrThrow(processEnvironment({ A: "1" }, { PORT: "10200", PORTICO_NAMESPACE: "acme" }))
    expect(env).toEqual({ A: "1", PORT: "10200", PORTICO_NAMESPACE: "acme" })
    expect(refused(processEnvironment({}, { PORTICO_STATE_DIR: "/".repeat(PLATFORM_ENV_RESERVE_BYTES) }))?.field).toBe("platform")
  })
  it("checks a whole environment (first deploy)", () => {
    expect(Either.isRight(checkEnvironment({ A: "1" }))).toBe(true)
    expect(refused(checkEnvironment({ PORT: "1" }))?.field).toBe("env.PORT")
    expect(refused(checkEnvironment({ "a b": "1" }))?.field).toBe("env.a b")
  })
})

describe("env file and --env (spec §4.8)", () => {
  it("reads KEY=VALUE lines, skipping comments and blank lines, split on the first '='", () => {
    const text = ["# a comment", "", "  # indented comment", "A=1", "B=x=y=z", "C=", "  D = spaced value ", "E=$HOME/x", "F=a # not a comment", "G=\\n"].join("\n")
    expect(Either.getOrThrow(parseEnvFile(text))).toEqual({ A: "1", B: "x=y=z", C: "", D: " spaced value ", E: "$HOME/x", F: "a # not a comment", G: "\\n" })
  })
  it("removes one layer of matching quotes, and only around the whole value", () => {
    const text = ['A="quoted"', "B='single'", 'C=""double""', "D=\"mismatched'", 'E="', "F=a\"b\"", "G=''"].join("\r\n")
    expect(Either.getOrThrow(parseEnvFile(text))).toEqual({ A: "quoted", B: "single", C: '"double"', D: "\"mismatched'", E: '"', F: 'a"b"', G: "" })
  })
  it("lets a later line win and refuses a line without '=' or with a bad key, naming the line", () => {
    expect(Either.getOrThrow(parseEnvFile("A=1\nA=2\n"))).toEqual({ A: "2" })
    expect(refused(parseEnvFile("A=1\nnot a pair\n"))?.field).toBe("env-file:2")
    expect(refused(parseEnvFile("A=1\n\nexport B=2\n"))?.field).toBe("env-file:3")
    expect(refused(parseEnvFile("=value"))?.field).toBe("env-file:1")
  })
  it("splits --env on the first '=' and lets it override the file", () => {
    expect(Either.getOrThrow(parseEnvFlag("URL=postgres://u:p@h/db?a=b"))).toEqual(["URL", "postgres://u:p@h/db?a=b"])
    expect(Either.getOrThrow(parseEnvFlag('Q="kept"'))).toEqual(["Q", '"kept"'])
    expect(refused(parseEnvFlag("NOEQUALS"))?.field).toBe("--env")
    expect(Either.getOrThrow(mergeDeployEnv("A=file\nB=file\n", ["B=flag", "C=flag", "C=later"]))).toEqual({ A: "file", B: "flag", C: "later" })
    expect(Either.getOrThrow(mergeDeployEnv(undefined, ["A=1"]))).toEqual({ A: "1" })
    expect(refused(mergeDeployEnv("A\n", []))?.field).toBe("env-file:1")
  })
})
