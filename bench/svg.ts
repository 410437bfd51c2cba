// A small hand-written SVG line chart: µs per iteration (log scale) against N, one line per framework.
const COLORS = ["#888888", "#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6"];

export function chart(data: Record<string, Record<string, number | undefined>>, sizes: number[]): string {
  const width = 640;
  const height = 360;
  const left = 60;
  const right = 170;
  const top = 20;
  const bottom = 40;
  const values = Object.values(data).flatMap((row) =>
    sizes.map((n) => row[n]).filter((v): v is number => v !== undefined && v > 0),
  );
  const min = Math.floor(Math.log10(Math.min(...values)));
  const max = Math.ceil(Math.log10(Math.max(...values)));
  const x = (i: number) => left + (i * (width - left - right)) / Math.max(1, sizes.length - 1);
  const y = (v: number) => top + ((max - Math.log10(v)) * (height - top - bottom)) / Math.max(1, max - min);
  const parts: string[] = [];
  for (let p = min; p <= max; p++) {
    parts.push(
      `<line x1="${left}" x2="${width - right}" y1="${y(10 ** p)}" y2="${y(10 ** p)}" stroke="#ddd"/>`,
    );
    parts.push(
      `<text x="${left - 8}" y="${y(10 ** p) + 4}" text-anchor="end" font-size="11">${10 ** p >= 1 ? 10 ** p : (10 ** p).toFixed(-p)}</text>`,
    );
  }
  sizes.forEach((n, i) => {
    parts.push(
      `<text x="${x(i)}" y="${height - bottom + 18}" text-anchor="middle" font-size="11">N=${n.toLocaleString("en")}</text>`,
    );
  });
  Object.entries(data).forEach(([name, row], k) => {
    const color = COLORS[k % COLORS.length];
    const points = sizes.flatMap((n, i) =>
      row[n] ? [`${x(i).toFixed(1)},${y(row[n] as number).toFixed(1)}`] : [],
    );
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.join(" ")}"/>`);
    for (const point of points) {
      const [px, py] = point.split(",");
      parts.push(`<circle cx="${px}" cy="${py}" r="3" fill="${color}"/>`);
    }
    parts.push(
      `<text x="${width - right + 12}" y="${top + 16 + k * 18}" font-size="12" fill="${color}">■ ${name}</text>`,
    );
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" role="img">
<title>Runtime overhead per iteration by framework and N</title>
<text x="${left}" y="14" font-size="12">µs per iteration (log scale), non-streaming; lower is better</text>
${parts.join("\n")}
</svg>
`;
}
