"""The benchmark's one figure: speedup over stock float32 target-only decoding per headline
configuration, greedy and sampled bars side by side, each with its theory ceiling marked
(E(a, k) / (k c + 1) from the row's own measured a, k and c). A plain SVG written here: no
plotting package, and it renders wherever the Markdown does."""

from __future__ import annotations

from html import escape
from pathlib import Path

WIDTH, LABEL_WIDTH, BAR_HEIGHT, GAP, TOP = 900, 330, 16, 14, 58
COLORS = {0.0: "#2b6cb0", "sampled": "#dd6b20"}


def speedup_svg(results: dict) -> str:
    """The SVG text for the rows marked headline in `results` (bench.py's JSON)."""
    rows = [r for r in results["rows"] if r.get("headline") and r.get("speedup")]
    names = list(dict.fromkeys(r["name"] for r in rows))
    temperatures = sorted({r["temperature"] for r in rows})
    top_value = max([1.0] + [max(r["speedup"], r.get("theoretical_speedup") or 0) for r in rows])
    scale = (WIDTH - LABEL_WIDTH - 150) / (top_value * 1.05)      # room for "1.77x (theory 2.02x)"
    group = len(temperatures) * BAR_HEIGHT + GAP
    height = TOP + len(names) * group + 40
    x0 = LABEL_WIDTH
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="10" y="20" font-size="15" font-weight="bold">Speedup over target-only decoding on the stock '
             f'float32 target ({escape(results["preset"])}, {results["max_new_tokens"]} tokens, {len(results["prompts"])} prompts)</text>',
             '<text x="10" y="40" fill="#444">bars: measured; black tick: the theory ceiling E(a, k) / (k c + 1) '
             'from the same run\'s a, k and c</text>']
    for index, temperature in enumerate(temperatures):
        color = COLORS[0.0] if temperature == 0 else COLORS["sampled"]
        label = "greedy" if temperature == 0 else f"T = {temperature:g}"
        parts.append(f'<rect x="{WIDTH - 170 + index * 80}" y="28" width="12" height="12" fill="{color}"/>'
                     f'<text x="{WIDTH - 154 + index * 80}" y="39">{label}</text>')
    for position, name in enumerate(names):
        y = TOP + position * group
        parts.append(f'<text x="{x0 - 8}" y="{y + group / 2 - 2}" text-anchor="end">{escape(_short(name))}</text>')
        for index, temperature in enumerate(temperatures):
            row = next((r for r in rows if r["name"] == name and r["temperature"] == temperature), None)
            if row is None:
                continue
            bar_y = y + index * BAR_HEIGHT
            color = COLORS[0.0] if temperature == 0 else COLORS["sampled"]
            width = row["speedup"] * scale
            ceiling = row.get("theoretical_speedup")
            label_x = x0 + max(width, (ceiling or 0) * scale) + 5
            theory = f' <tspan fill="#666">(theory {ceiling:.2f}x)</tspan>' if ceiling else ""
            parts.append(f'<rect x="{x0}" y="{bar_y}" width="{width:.1f}" height="{BAR_HEIGHT - 3}" fill="{color}"/>'
                         f'<text x="{label_x:.1f}" y="{bar_y + 11}">{row["speedup"]:.2f}x{theory}</text>')
            if ceiling:
                cx = x0 + ceiling * scale
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{bar_y - 1}" y2="{bar_y + BAR_HEIGHT - 2}" '
                             f'stroke="black" stroke-width="2.5"><title>theory {ceiling:.2f}x</title></line>')
    one = x0 + scale
    parts.append(f'<line x1="{one:.1f}" x2="{one:.1f}" y1="{TOP - 6}" y2="{height - 30}" stroke="#999" stroke-dasharray="4 3"/>'
                 f'<text x="{one:.1f}" y="{height - 16}" text-anchor="middle" fill="#666">1x = target-only</text></svg>')
    return "\n".join(parts)


def write_figure(results: dict, path: Path) -> Path:
    path.write_text(speedup_svg(results), encoding="utf-8")
    return path


def _short(name: str) -> str:
    return name.replace("SpecViz fast (int8 draft, prepacked fp32 target)", "SpecViz fast (int8 draft, packed target)")
