/** A small line chart in SVG: one line per series over time, its last values in a legend (the numbers in words too). */
const COLORS = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490"]

export interface Series {
  readonly name: string
  readonly points: ReadonlyArray<{ readonly at: number; readonly value: number }>
}

export const LineChart = (props: { readonly title: string; readonly unit: string; readonly series: ReadonlyArray<Series>; readonly format: (value: number) => string }) => {
  const width = 600
  const height = 160
  const all = props.series.flatMap((s) => s.points)
  const first = Math.min(...all.map((p) => p.at))
  const last = Math.max(...all.map((p) => p.at))
  const top = Math.max(1, ...all.map((p) => p.value)) * 1.1
  const x = (at: number) => (last === first ? width : ((at - first) / (last - first)) * width)
  const y = (value: number) => height - (value / top) * height
  return (
    <figure class="chart" data-chart={props.title}>
      <figcaption>
        {props.title} ({props.unit})
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`${props.title} over the last ${Math.round((last - first) / 1000)} s`} preserveAspectRatio="none">
        <line x1="0" y1={height} x2={width} y2={height} stroke="currentColor" stroke-opacity="0.3" />
        {props.series.map((s, i) => (
          <polyline
            fill="none"
            stroke={COLORS[i % COLORS.length]}
            stroke-width="2"
            vector-effect="non-scaling-stroke"
            points={s.points.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ")}
          />
        ))}
      </svg>
      <ul class="legend">
        {props.series.map((s, i) => (
          <li>
            <svg width="12" height="12" aria-hidden="true">
              <rect width="12" height="12" fill={COLORS[i % COLORS.length]} />
            </svg>{" "}
            {s.name}: <span data-last-value>{s.points.length === 0 ? "—" : props.format(s.points[s.points.length - 1]?.value ?? 0)}</span>
          </li>
        ))}
      </ul>
    </figure>
  )
}
