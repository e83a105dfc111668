/**
 * The folders under src/layers import one another one way: a family stands on the ones below it
 * (config, secrets, registry at the bottom), never on one that stands on it. Every import counts,
 * `import type` too, since a type import is still a dependency of the module's meaning. The test
 * names the imports of any loop between folders, so the one that closes it can be moved.
 */
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "../../src/layers")

const sources = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []
  )

/** A module's folder under src/layers; a module at the top (Services.ts, Refused.ts) is its own node. */
const folderOf = (file: string) => path.relative(root, file).split(path.sep)[0]!

/** folder → folder → the imports that make the edge. */
const graphOf = (files: ReadonlyArray<string>) => {
  const edges = new Map<string, Map<string, Array<string>>>()
  for (const file of files) {
    for (const m of readFileSync(file, "utf8").matchAll(/^(?:import|export)\s[^"]*?\sfrom\s+"(\.[^"]+)"/gm)) {
      const target = path.resolve(path.dirname(file), m[1]!).replace(/\.js$/, ".ts")
      if (!target.startsWith(root + path.sep)) continue
      const [from, to] = [folderOf(file), folderOf(target)]
      if (from === to) continue
      const out = edges.get(from) ?? new Map<string, Array<string>>()
      edges.set(from, out)
      out.set(to, [...(out.get(to) ?? []), `${path.relative(root, file)} → ${path.relative(root, target)}`])
    }
  }
  return edges
}

/** The loops (strongly connected components of more than one folder), each with its imports. */
const loopsOf = (edges: Map<string, Map<string, Array<string>>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const loops: Array<Array<string>> = []
  let next = 0
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1) {
        const inside = new Set(component)
        loops.push(component.flatMap((a) => [...(edges.get(a) ?? [])].filter(([b]) => inside.has(b)).flatMap(([, why]) => why)).sort())
      }
    }
  }
  for (const v of edges.keys()) if (!index.has(v)) visit(v)
  return loops
}

describe("the folders under src/layers", () => {
  it("import one another without a loop", () => {
    expect(loopsOf(graphOf(sources(root)))).toEqual([])
  })

  it("the check finds a loop, naming its imports", () => {
    const a = path.join(root, "a/A.ts")
    const b = path.join(root, "b/B.ts")
    const edges = new Map([
      ["a", new Map([["b", ["a/A.ts → b/B.ts"]]])],
      ["b", new Map([["a", ["b/B.ts → a/A.ts"]]])]
    ])
    expect(loopsOf(edges)).toEqual([["a/A.ts → b/B.ts", "b/B.ts → a/A.ts"]])
    expect([a, b].map(folderOf)).toEqual(["a", "b"])
  })
})
