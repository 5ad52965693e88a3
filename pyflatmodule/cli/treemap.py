"""A squarified treemap of a file's regions (Bruls, Huizing and van Wijk, 2000), as a
self-contained SVG or HTML page: one rectangle per region with bytes, area proportional
to its size, its kind, label, size and byte range in the tooltip (``<title>``), labelled
where the rectangle has room."""
from __future__ import annotations

import html
from types import MappingProxyType
from typing import Iterator, List, Mapping, Sequence, Tuple

from ..executorch import Region
from .common import human

#: Fill colour of each region kind (others grey).
COLOURS = {"file": "#f4f4f4", "flatbuffer": "#dfe7f2", "segment": "#e3f0de", "padding": "#eeeeee",
           "header": "#9fb7d9", "method": "#c9d6ea", "values": "#7fa6d8",
           "chains": "#e0a458", "operators": "#d98b8b", "delegate": "#b9a6d9",
           "payload": "#9a83c9", "constant": "#6fbf73", "named_data": "#8fcf8f",
           "tensor": "#8fcf8f", "mutable_data": "#c8d96f", "data_index": "#d9c99f",
           "other": "#d0d0d0"}
WIDTH, HEIGHT = 1200, 760
HEAD = 16      # the label strip atop a region whose children are drawn inside it
INSET = 2

Rect = Tuple[float, float, float, float]


def _worst(row: Sequence[float], side: float) -> float:
    s = sum(row)
    return max(max(side * side * r / (s * s), (s * s) / (side * side * r)) for r in row)


def squarify(sizes: Sequence[float], rect: Rect) -> List[Rect]:
    """Rectangles tiling ``rect`` (x, y, w, h) with areas proportional to ``sizes`` (in
    the order given; sort them largest first for the squarest), each row laid along the
    shorter side while that keeps the worst aspect ratio from growing."""
    x, y, w, h = rect
    total = float(sum(sizes))
    out: List[Rect] = []
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in sizes]
    areas = [s * w * h / total for s in sizes]
    i = 0
    while i < len(areas):
        side = min(w, h)
        if side <= 0 or areas[i] <= 0:   # no room left (rounding): the rest are empty
            out += [(x, y, 0.0, 0.0)] * (len(areas) - i)
            break
        row = [areas[i]]
        i += 1
        while i < len(areas) and _worst(row + [areas[i]], side) <= _worst(row, side):
            row.append(areas[i])
            i += 1
        thick = sum(row) / side if side else 0.0
        at = 0.0
        for a in row:
            length = a / thick if thick else 0.0
            out.append((x, y + at, thick, length) if w >= h else (x + at, y, length, thick))
            at += length
        if w >= h:   # a column at the left of a wide rectangle, a row atop a tall one
            x, w = x + thick, max(0.0, w - thick)
        else:
            y, h = y + thick, max(0.0, h - thick)
    return out


#: Names for regions by (kind, label): what reads a named data key (a content hash), the
#: module's name of a constant.
Names = Mapping[Tuple[str, str], str]


def _name(r: Region, names: Names) -> str:
    """``kind label``; a region ``names`` names, ``kind name``."""
    return f"{r.kind} {names.get((r.kind, r.label), r.label)}".strip()


def _key(r: Region, names: Names) -> str:
    """The label a named region's tooltip ends with: a named data key, a constant's
    buffer; nothing for a region shown by its label."""
    if (r.kind, r.label) not in names:
        return ""
    return f", key {r.label}" if r.kind == "named_data" else f", {r.kind} {r.label}"


def _layout(regions: Sequence[Region], rect: Rect, depth: int
            ) -> Iterator[Tuple[Region, Rect, int, bool]]:
    """Each region with bytes, its rectangle, its depth and whether its children are
    drawn inside it."""
    shown = sorted((r for r in regions if r.size > 0), key=lambda r: -r.size)
    for r, (x, y, w, h) in zip(shown, squarify([r.size for r in shown], rect)):
        inner = [c for c in r.children if c.size > 0]
        head = HEAD if h > 2 * HEAD and w > 40 else 0
        yield r, (x, y, w, h), depth, bool(inner) and head > 0
        if inner:
            yield from _layout(inner, (x + INSET, y + head + INSET, max(0.0, w - 2 * INSET),
                                       max(0.0, h - head - 2 * INSET)), depth + 1)


def svg(title: str, regions: Sequence[Region], names: Names = MappingProxyType({})) -> str:
    """The treemap of ``regions`` as an SVG document, a region whose kind and label
    ``names`` maps shown by that name (its label then in the tooltip)."""
    top = HEAD + 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
             f'height="{HEIGHT + top}" viewBox="0 0 {WIDTH} {HEIGHT + top}" '
             'font-family="sans-serif" font-size="11">',
             f'<title>{html.escape(title)}</title>',
             f'<text x="4" y="{HEAD}" font-size="14" font-weight="bold">'
             f'{html.escape(title)}</text>']
    for r, (x, y, w, h), depth, nested in _layout(regions, (0, top, WIDTH, HEIGHT), 0):
        tip = (f"{_name(r, names)}: {r.size:,} bytes ({human(r.size)}), "
               f"[{r.start:,}, {r.end:,})"
               + (f" in {len(r.spans)} ranges" if len(r.spans) > 1 else "")
               + _key(r, names))
        parts.append(f'<g class="region" data-kind="{html.escape(r.kind)}" '
                     f'data-depth="{depth}"><title>{html.escape(tip)}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                     f'fill="{COLOURS.get(r.kind, "#cccccc")}" stroke="#ffffff" '
                     'stroke-width="1"/>')
        text = f"{_name(r, names)} {human(r.size)}"
        room = int(w / 6.5)
        if h >= 13 and room >= 4:
            label = text if len(text) <= room else text[:max(1, room - 1)] + "\u2026"
            parts.append(f'<text x="{x + 3:.1f}" y="{y + 12:.1f}" pointer-events="none">'
                         f'{html.escape(label)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def page(title: str, regions: Sequence[Region], table: Sequence[Tuple[str, int]],
         names: Names = MappingProxyType({})) -> str:
    """The treemap in an HTML page (``names`` as :func:`svg` takes them), with ``table``
    (region kind, bytes) beneath it, each kind with its colour; nothing it shows is
    fetched from elsewhere."""
    rows = "\n".join(f'<tr><td><span class="key" style="background:'
                     f'{COLOURS.get(n, "#cccccc")}"></span>{html.escape(n)}</td><td>{b:,}</td>'
                     f"<td>{html.escape(human(b))}</td></tr>" for n, b in table)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;"
            "margin:16px}table{border-collapse:collapse}td{padding:2px 10px;"
            "border-bottom:1px solid #ddd}td+td{text-align:right}"
            "g.region:hover rect{stroke:#000}span.key{display:inline-block;width:12px;"
            "height:12px;margin-right:6px;vertical-align:middle}</style></head><body>\n"
            f"{svg(title, regions, names)}<table>\n{rows}\n</table>\n</body></html>\n")
