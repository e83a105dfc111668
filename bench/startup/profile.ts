/**
 * A start-up CPU profile (`node --cpu-prof`) summarised by where the code lives: node's internals
 * (module resolution, compiling, reading files), each package under node_modules, each area of
 * dist/, the garbage collector. Self time, so a package's row is the code of that package itself.
 */
import * as fs from "node:fs"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const areaOf = ({ url, functionName }: ProfileNode["callFrame"]) => {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)"
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0] ?? ""}`
  const pkg = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return `package ${pkg[1] ?? ""}`
  const own = /\/dist\/(.*)$/.exec(url)
  if (own !== null) return `dist/${(own[1] ?? "").split("/").slice(0, 2).join("/")}`
  return url
}

/** The `top` areas by self time, in milliseconds, and the profile's whole time. */
export const summarise = (file: string, top = 12): { readonly totalMs: number; readonly areas: ReadonlyArray<readonly [string, number]> } => {
  const profile = JSON.parse(fs.readFileSync(file, "utf8")) as Profile
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const areas = new Map<string, number>()
  profile.samples.forEach((id, i) => {
    const node = nodes.get(id)
    if (node === undefined) return
    const area = areaOf(node.callFrame)
    areas.set(area, (areas.get(area) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000)
  })
  const sorted = [...areas].sort((a, b) => b[1] - a[1])
  return { totalMs: sorted.reduce((sum, [, ms]) => sum + ms, 0), areas: sorted.slice(0, top) }
}
