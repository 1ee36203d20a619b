/** A small SVG line chart over the rolling window: no chart library, a path and two labels. */
import type { Point } from "../samples.js"

export interface SparklineProps {
  readonly title: string
  readonly points: ReadonlyArray<Point>
  readonly format: (value: number) => string
  /** Appended to the latest value, e.g. " /s". */
  readonly unit: string
  readonly color: string
  readonly windowMs: number
  readonly testId: string
}

const width = 320
const height = 84
const pad = 4

export const Sparkline = ({ color, format, points, testId, title, unit, windowMs }: SparklineProps) => {
  const latest = points.at(-1)
  const end = latest?.at ?? 0
  // Until the window has filled, the chart spans what has been sampled (at least 30 s).
  const span = Math.min(windowMs, Math.max(30_000, end - (points[0]?.at ?? end)))
  const visible = points.filter((p) => p.at >= end - span)
  const max = Math.max(1, ...visible.map((p) => p.value))
  const x = (at: number) => pad + ((at - (end - span)) / span) * (width - 2 * pad)
  const y = (value: number) => height - pad - (value / max) * (height - 2 * pad)
  const line = visible.map((p, i) => `${i === 0 ? "M" : "L"}${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ")
  const first = visible[0]
  const area =
    first === undefined || latest === undefined
      ? ""
      : `${line} L${x(latest.at).toFixed(1)},${height - pad} L${x(first.at).toFixed(1)},${height - pad} Z`
  return (
    <figure class="chart" data-testid={testId}>
      <figcaption>
        <span>{title}</span>
        <strong>{latest === undefined ? "–" : `${format(latest.value)}${unit}`}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={title}>
        <line x1={pad} x2={width - pad} y1={height - pad} y2={height - pad} class="axis" />
        <line x1={pad} x2={width - pad} y1={pad} y2={pad} class="grid" />
        {area === "" ? null : <path d={area} fill={color} fill-opacity="0.12" />}
        {line === "" ? null : (
          <path d={line} fill="none" stroke={color} stroke-width="2" vector-effect="non-scaling-stroke" />
        )}
      </svg>
      <div class="chart-scale">
        <span>{span >= 60_000 ? `${Math.round(span / 60_000)} min ago` : `${Math.round(span / 1000)}s ago`}</span>
        <span>{`max ${format(max)}`}</span>
        <span>now</span>
      </div>
    </figure>
  )
}
