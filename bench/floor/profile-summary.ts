/**
 * Summarize a V8 .cpuprofile (from `node --cpu-prof`) as top self-time items.
 * Usage: npx tsx bench/floor/profile-summary.ts <file.cpuprofile> [top=25] [lastSeconds]
 * lastSeconds keeps only the samples of the final N seconds, i.e. the load run,
 * so module compilation at start-up does not pollute the picture.
 */
import { readFileSync } from "node:fs"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
  readonly endTime: number
  readonly startTime: number
}

const file = process.argv[2]
if (file === undefined) {
  process.stderr.write("usage: profile-summary.ts <file.cpuprofile> [top]\n")
  process.exit(2)
}
const top = Number(process.argv[3] ?? "25")
const lastSeconds = Number(process.argv[4] ?? "0")
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile
const from = lastSeconds > 0 ? profile.endTime - lastSeconds * 1e6 : profile.startTime
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const self = new Map<string, number>()
const pkg = new Map<string, number>()
let total = 0
let t = profile.startTime
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0
  t += dt
  if (t < from) return
  const n = byId.get(id)
  if (n === undefined) return
  total += dt
  const f = n.callFrame
  const where = f.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/work\/main\//, "")
  const key = `${f.functionName || "(anonymous)"} ${where}${f.url ? `:${f.lineNumber + 1}` : ""}`
  self.set(key, (self.get(key) ?? 0) + dt)
  const bucket = f.url === ""
    ? (f.functionName.startsWith("(") ? f.functionName : "native/builtin")
    : f.url.startsWith("node:") ? "node core" : /node_modules\/(@[^/]+\/[^/]+|[^/]+)/.exec(f.url)?.[1] ?? "project"
  pkg.set(bucket, (pkg.get(bucket) ?? 0) + dt)
})
const pct = (v: number) => ((100 * v) / total).toFixed(1).padStart(5) + "%"
process.stdout.write(`total ${(total / 1e6).toFixed(2)}s sampled\n\nby package:\n`)
for (const [k, v] of [...pkg].sort((a, b) => b[1] - a[1]).slice(0, 12)) process.stdout.write(`${pct(v)}  ${k}\n`)
process.stdout.write(`\ntop ${top} self time:\n`)
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${k}\n`)
