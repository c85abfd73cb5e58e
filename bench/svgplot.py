"""Dependency-free SVG bar charts for bench/run_bench.py.

One chart = a row of panels (one per config), each with its own y axis; a panel
holds groups (one per policy) of bars (one per implementation). bar_chart draws
one value per bar; stacked_bar_chart splits each bar into segments (e.g. the
forward / backward / optimizer / communication time of a step). Plain SVG 1.1,
written by hand: no matplotlib, no fonts beyond the viewer's sans-serif.
"""

import math
from xml.sax.saxutils import escape

FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"

# Colours per series key; anything unknown falls back to grey.
COLOURS = {
    "ctron": "#1f77b4",
    "torch": "#ff7f0e",
    "ctron-bf16": "#08306b",
    "pt2-fp32": "#d62728",
    "pt2-fp32-sdpa": "#ff9896",
    "pt2-bf16": "#2ca02c",
    "pt2-bf16-sdpa": "#98df8a",
    "hf-fp32": "#e377c2",
    "hf-fp32-eager": "#f7b6d2",
    "hf-bf16": "#8c564b",
    "hf-bf16-eager": "#c49c94",
    "pytorch-best": "#9467bd",
}


def _num(x):
    """Coordinates with at most 1 decimal, no trailing zeros."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def nice_ticks(vmax, n=5):
    """0 .. >= vmax in about n steps of 1, 2, 2.5 or 5 x 10^k."""
    if not vmax or vmax <= 0 or not math.isfinite(vmax):
        return [0, 1]
    raw = vmax / n
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if step >= raw:
            break
    top = step * math.ceil(vmax / step - 1e-9)
    k = int(round(top / step))
    return [i * step for i in range(k + 1)]


def _tick_label(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _text_w(s, size, bold=False):
    """Estimated width of s in px (sans-serif averages ~0.58 em per character)."""
    return len(s) * size * (0.64 if bold else 0.58)



def _panel_widths(panels, bar_w, gap_in, gap_group):
    """Each panel's plot width: its groups' bars and gaps (at least 160 px)."""
    widths = []
    for p in panels:
        w = sum(max(1, len(g["bars"])) * bar_w + (max(1, len(g["bars"])) - 1) * gap_in + gap_group
                for g in p["groups"])
        widths.append(max(160, w + gap_group))
    return widths


def _svg_head(width, height, title, subtitle):
    """The opening of a chart: the svg element, a white page, the title and the subtitle."""
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT}>",
           f"<rect x='0' y='0' width='{width}' height='{height}' fill='white'/>",
           _text(12, 22, title, size=15, anchor="start", weight="bold")]
    if subtitle:
        out.append(_text(12, 40, subtitle, size=11, anchor="start", fill="#555"))
    return out

def _wrap(s, n):
    lines, cur = [], ""
    for word in s.split():
        if cur and len(cur) + 1 + len(word) > n:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(cur)
    return lines


def _text(x, y, s, size=11, anchor="middle", weight=None, fill="#222", rotate=None, extra=""):
    attrs = f"x='{_num(x)}' y='{_num(y)}' font-size='{size}' text-anchor='{anchor}' fill='{fill}'"
    if weight:
        attrs += f" font-weight='{weight}'"
    if rotate is not None:
        attrs += f" transform='rotate({rotate} {_num(x)} {_num(y)})'"
    return f"<text {attrs}{extra}>{escape(str(s))}</text>"


def _multiline(x, y, s, size=10, sep="+"):
    """A policy name such as selective+bf16+regen, broken before each '+'."""
    parts = s.split(sep)
    lines = [parts[0]] + [sep + p for p in parts[1:]]
    out = [f"<text x='{_num(x)}' y='{_num(y)}' font-size='{size}' text-anchor='middle' fill='#222'>"]
    for i, line in enumerate(lines):
        dy = "0" if i == 0 else f"{size + 1}"
        out.append(f"<tspan x='{_num(x)}' dy='{dy}'>{escape(line)}</tspan>")
    out.append("</text>")
    return "".join(out), len(lines)


def _panel_frame(out, p, px, pw, top, plot_h, vmax, ylabel, bar_w, gap_in, gap_group):
    """One panel's title, y grid with tick labels, axes and y label; returns the value -> y map and
    the x where the first bar group starts (the groups centred in the panel)."""
    ticks = nice_ticks(vmax * 1.12 if vmax else 1)
    ytop = ticks[-1]

    def y_of(v):
        return top + plot_h - plot_h * (v / ytop if ytop else 0)

    out.append(_text(px + pw / 2, top - 12, p["title"], size=12, weight="bold"))
    for t in ticks:
        y = y_of(t)
        out.append(f"<line x1='{_num(px)}' y1='{_num(y)}' x2='{_num(px + pw)}' y2='{_num(y)}' "
                   f"stroke='#e3e3e3' stroke-width='1'/>")
        out.append(_text(px - 5, y + 4, _tick_label(t), size=10, anchor="end", fill="#444"))
    out.append(f"<line x1='{_num(px)}' y1='{top}' x2='{_num(px)}' y2='{top + plot_h}' stroke='#444'/>")
    out.append(f"<line x1='{_num(px)}' y1='{top + plot_h}' x2='{_num(px + pw)}' "
               f"y2='{top + plot_h}' stroke='#444'/>")
    out.append(_text(px - 46, top + plot_h / 2, ylabel, size=11, rotate=-90, fill="#444"))
    span = sum(max(1, len(g["bars"])) * (bar_w + gap_in) - gap_in + gap_group for g in p["groups"]) - gap_group
    return y_of, px + max(gap_group, (pw - span) / 2)


def bar_chart(title, subtitle, panels, series, ylabel, value_label,
              ref_value=None, ref_label=None, bar_w=24, note=None):
    """Returns an SVG document (str).

    panels: [{"title": str, "groups": [{"label": str, "bars": {series_key: value or None}}]}]
    series: [(key, legend text)] in drawing order within a group; a group draws
            only the series present in its "bars" dict (so a ctron-only policy
            gets one bar).
    value_label: f(value) -> text above a bar.
    ref_value: draws a dashed horizontal line at that value in every panel.
    """
    gap_in, gap_group = 3, 22
    pad_l, pad_r = 64, 14
    top, plot_h = 100, 250
    label_lines = max([1] + [len(g["label"].split("+")) for p in panels for g in p["groups"]])
    bottom = 22 + 11 * label_lines + 6
    panel_ws = _panel_widths(panels, bar_w, gap_in, gap_group)
    legend_w = sum(30 + 7 * len(text) for _, text in series)
    if ref_value is not None and ref_label:
        legend_w += 27 + _text_w(ref_label, 11)
    width = int(max(sum(pad_l + pw + pad_r for pw in panel_ws) + 10,
                    24 + _text_w(title, 15, bold=True), 24 + _text_w(subtitle or "", 11),
                    24 + legend_w, 560))
    # widen a lone panel (or the last) to the full width so the chart is not lopsided
    panel_ws[-1] += width - 10 - sum(pad_l + pw + pad_r for pw in panel_ws)
    note_lines = _wrap(note, int((width - 24) / (0.58 * 10))) if note else []
    height = top + plot_h + bottom + 14 * len(note_lines)

    out = _svg_head(width, height, title, subtitle)
    # legend
    lx = 12
    for key, text in series:
        out.append(f"<rect x='{lx}' y='50' width='12' height='12' fill='{COLOURS.get(key, '#888')}'/>")
        out.append(_text(lx + 17, 60, text, size=11, anchor="start"))
        lx += 30 + 7 * len(text)
    if ref_value is not None and ref_label:
        out.append(f"<line x1='{lx}' y1='56' x2='{lx + 22}' y2='56' stroke='#444' "
                   f"stroke-dasharray='4 3'/>")
        out.append(_text(lx + 27, 60, ref_label, size=11, anchor="start"))

    x0 = 0
    for p, pw in zip(panels, panel_ws):
        px = x0 + pad_l
        vals = [v for g in p["groups"] for v in g["bars"].values() if v is not None]
        vmax = max(vals + ([ref_value] if ref_value is not None else []) + [0])
        y_of, gx = _panel_frame(out, p, px, pw, top, plot_h, vmax, ylabel, bar_w, gap_in, gap_group)
        for g in p["groups"]:
            keys = [k for k, _ in series if k in g["bars"]]
            nb = max(1, len(keys))
            gw = nb * bar_w + (nb - 1) * gap_in
            for i, key in enumerate(keys):
                v = g["bars"][key]
                bx = gx + i * (bar_w + gap_in)
                if v is None:
                    out.append(_text(bx + bar_w / 2, top + plot_h - 4, "n/a", size=9, fill="#999"))
                    continue
                y = y_of(v)
                out.append(f"<rect x='{_num(bx)}' y='{_num(y)}' width='{bar_w}' "
                           f"height='{_num(top + plot_h - y)}' fill='{COLOURS.get(key, '#888')}'>"
                           f"<title>{escape(key + ' ' + g['label'] + ': ' + value_label(v))}</title></rect>")
                out.append(_text(bx + bar_w / 2, y - 3, value_label(v), size=9, fill="#222"))
            label, _ = _multiline(gx + gw / 2, top + plot_h + 15, g["label"])
            out.append(label)
            gx += gw + gap_group
        if ref_value is not None:
            y = y_of(ref_value)
            out.append(f"<line x1='{_num(px)}' y1='{_num(y)}' x2='{_num(px + pw)}' y2='{_num(y)}' "
                       f"stroke='#444' stroke-width='1' stroke-dasharray='4 3'/>")
        x0 += pad_l + pw + pad_r
    for i, line in enumerate(note_lines):
        out.append(_text(12, height - 8 - 14 * (len(note_lines) - 1 - i), line, size=10,
                         anchor="start", fill="#555"))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def stacked_bar_chart(title, subtitle, panels, segments, ylabel, value_label,
                      bar_w=34, note=None):
    """Returns an SVG document (str) of stacked bars.

    panels:   [{"title": str, "groups": [{"label": str, "bars": [bar, ...]}]}]
    bar:      {"key": series key (tooltip), "label": text under the bar,
               "parts": {segment_key: value}, "total": value above the bar or None}
              A bar with total None and no parts draws "n/a". Parts are stacked
              bottom-up in the order of `segments`; a part that is 0 or missing
              draws nothing (its legend entry stays, so a category that is 0,
              such as communication in one process, is still shown as one).
    segments: [(key, legend text, colour)]
    value_label: f(value) -> text (above the bar, and in each segment's tooltip).
    """
    gap_in, gap_group = 4, 24
    pad_l, pad_r = 64, 14
    top, plot_h = 100, 250
    label_lines = max([1] + [len(g["label"].split("+")) for p in panels for g in p["groups"]])
    bottom = 22 + 12 + 11 * label_lines + 6
    panel_ws = _panel_widths(panels, bar_w, gap_in, gap_group)
    legend_w = sum(30 + 7 * len(text) for _, text, _ in segments)
    width = int(max(sum(pad_l + pw + pad_r for pw in panel_ws) + 10,
                    24 + _text_w(title, 15, bold=True), 24 + _text_w(subtitle or "", 11),
                    24 + legend_w, 560))
    panel_ws[-1] += width - 10 - sum(pad_l + pw + pad_r for pw in panel_ws)
    note_lines = _wrap(note, int((width - 24) / (0.58 * 10))) if note else []
    height = top + plot_h + bottom + 14 * len(note_lines)
    colour = {k: c for k, _, c in segments}

    out = _svg_head(width, height, title, subtitle)
    lx = 12
    for key, text, col in segments:
        out.append(f"<rect x='{lx}' y='50' width='12' height='12' fill='{col}'/>")
        out.append(_text(lx + 17, 60, text, size=11, anchor="start"))
        lx += 30 + 7 * len(text)

    x0 = 0
    for p, pw in zip(panels, panel_ws):
        px = x0 + pad_l
        tops = []
        for g in p["groups"]:
            for b in g["bars"]:
                stack = sum(v for v in b["parts"].values() if v and v > 0)
                tops.append(max(stack, b.get("total") or 0))
        vmax = max(tops + [0])
        y_of, gx = _panel_frame(out, p, px, pw, top, plot_h, vmax, ylabel, bar_w, gap_in, gap_group)
        for g in p["groups"]:
            nb = max(1, len(g["bars"]))
            gw = nb * bar_w + (nb - 1) * gap_in
            for i, b in enumerate(g["bars"]):
                bx = gx + i * (bar_w + gap_in)
                out.append(_text(bx + bar_w / 2, top + plot_h + 12, b["label"], size=9, fill="#444"))
                parts = [(k, b["parts"].get(k)) for k, _, _ in segments]
                if b.get("total") is None and not any(v for _, v in parts):
                    out.append(_text(bx + bar_w / 2, top + plot_h - 4, "n/a", size=9, fill="#999"))
                    continue
                base = 0.0
                for k, v in parts:
                    if not v or v <= 0:
                        continue
                    y1, y0 = y_of(base + v), y_of(base)
                    tip = escape(f"{b['key']} {g['label']} {k}: {value_label(v)}")
                    out.append(f"<rect x='{_num(bx)}' y='{_num(y1)}' width='{bar_w}' "
                               f"height='{_num(y0 - y1)}' fill='{colour.get(k, '#888')}'>"
                               f"<title>{tip}</title></rect>")
                    base += v
                shown = b.get("total") if b.get("total") is not None else base
                out.append(_text(bx + bar_w / 2, y_of(max(base, shown)) - 3, value_label(shown),
                                 size=9, fill="#222"))
            label, _ = _multiline(gx + gw / 2, top + plot_h + 27, g["label"])
            out.append(label)
            gx += gw + gap_group
        x0 += pad_l + pw + pad_r
    for i, line in enumerate(note_lines):
        out.append(_text(12, height - 8 - 14 * (len(note_lines) - 1 - i), line, size=10,
                         anchor="start", fill="#555"))
    out.append("</svg>")
    return "\n".join(out) + "\n"
