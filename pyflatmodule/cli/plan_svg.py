"""A picture of memory plans (``pyflatmodule memory --svg``): one self-contained SVG, per
method one panel, per planned buffer (memory id) a band; instructions across, byte
offsets down, one rectangle per planned tensor spanning its lifetime and byte range.

Every tensor's rectangle is ``<rect class="tensor">`` with its facts as attributes
(``data-value``, ``data-mem-id``, ``data-offset``, ``data-nbytes``, ``data-first``,
``data-last``; a tensor no instruction names has no ``data-first``/``data-last`` and spans
the whole band, dimmed) and a ``<title>`` a browser shows as its tooltip; one with room
for it has its value's name (``%5``) written in it. A tensor in a conflict (bytes shared
while both are alive) has class ``tensor conflict``, outlined in red, and
``data-conflicts`` lists the values it conflicts with.
"""
from __future__ import annotations

import html
from typing import Dict, List, Set

from .common import Json, human

#: Pixels: the left margin (offset labels), one instruction's width at most and the
#: picture's width for the instructions at most, a band's height, gaps.
LEFT, CELL, SPAN, BAND, GAP, TOP = 90, 28, 960, 240, 28, 38
#: The least width of the picture (room for a panel's heading).
MIN_WIDTH = 520
#: The least pixels a rectangle needs for its value's name written in it.
LABEL_WIDTH, LABEL_HEIGHT = 24, 13

STYLE = """
text { font: 11px sans-serif; fill: #333; }
.method { font-weight: bold; font-size: 13px; }
.band { fill: #f4f4f4; stroke: #999; stroke-width: 0.5; }
.tensor { stroke: #333; stroke-width: 0.4; fill-opacity: 0.8; }
.tensor.unused { fill-opacity: 0.25; stroke-dasharray: 2 2; }
.tensor.conflict { stroke: #d00; stroke-width: 2; }
.tick { stroke: #bbb; stroke-width: 0.5; }
.label { font-size: 10px; pointer-events: none; }
"""


def _fill(value: int) -> str:
    """A colour per value, apart from its neighbours' (golden-angle hues)."""
    return f"hsl({value * 137.508 % 360:.1f}, 60%, 62%)"


def _quoted(value: str) -> str:
    """An XML attribute value, quoted and escaped (html.escape: a lighter import than
    xml.sax, which brings urllib and http.client)."""
    return f'"{html.escape(value, quote=True)}"'


def _attrs(**kw: object) -> str:
    return "".join(f" {k.replace('_', '-')}={_quoted(str(v))}" for k, v in kw.items())


def _panel(doc: Json, top: float, out: List[str]) -> float:
    """Draw one method's plan from ``top``; the height it took."""
    n = max(int(doc["instructions"]), 1)
    cell = min(CELL, SPAN / n)
    width = cell * n
    conflicts: Dict[int, Set[int]] = {}
    for a, b in doc["conflicts"]:
        conflicts.setdefault(a, set()).add(b)
        conflicts.setdefault(b, set()).add(a)
    out.append(f'<g class="plan"{_attrs(data_method=doc["method"])}>')
    out.append(f'<text class="method" x="4" y="{top + 14:.1f}">method '
               f'{_esc(doc["method"])}: {len(doc["tensors"])} planned tensors, peak alive '
               f'{_esc(human(doc["peak"]))}, {doc["instructions"]} instructions</text>')
    y = top + TOP
    step = max(1, round(40 / cell))
    out.append(f'<text x="4" y="{y - 4:.1f}">instruction</text>')
    for pc in range(0, n, step):
        x = LEFT + pc * cell
        out.append(f'<text x="{x:.1f}" y="{y - 4:.1f}">{pc}</text>')
    sizes = doc["buffer_sizes"]
    for mem in range(1, len(sizes)):
        size = max(int(sizes[mem]), 1)
        scale = BAND / size
        out.append(f'<g class="buffer"{_attrs(data_mem_id=mem, data_size=sizes[mem])}>')
        out.append(f'<rect class="band" x="{LEFT}" y="{y:.1f}" width="{width:.1f}" '
                   f'height="{BAND}"><title>buffer {mem}: {sizes[mem]:,} bytes</title></rect>')
        out.append(f'<text x="4" y="{y + 12:.1f}">buffer {mem}</text>')
        out.append(f'<text x="4" y="{y + 26:.1f}">0</text>')
        out.append(f'<text x="4" y="{y + BAND:.1f}">{sizes[mem]:,}</text>')
        for t in doc["tensors"]:
            if t["mem_id"] != mem:
                continue
            used = t["first"] is not None
            first, last = (t["first"], t["last"]) if used else (0, n - 1)
            classes = "tensor" + ("" if used else " unused") + \
                (" conflict" if t["value"] in conflicts else "")
            facts = dict(data_value=t["value"], data_mem_id=mem, data_offset=t["offset"],
                         data_nbytes=t["nbytes"])
            if used:
                facts.update(data_first=t["first"], data_last=t["last"])
            if t["value"] in conflicts:
                facts["data_conflicts"] = " ".join(map(str, sorted(conflicts[t["value"]])))
            life = f"live {t['first']}..{t['last']}" if used else "named by no instruction"
            clash = (f"; shares bytes while alive with "
                     f"{', '.join('%' + str(v) for v in sorted(conflicts[t['value']]))}"
                     if t["value"] in conflicts else "")
            title = (f"%{t['value']}: {t['nbytes']:,} bytes at [{t['offset']:,}, "
                     f"{t['offset'] + t['nbytes']:,}) of buffer {mem}, {life}{clash}")
            x, top_y = LEFT + first * cell, y + t["offset"] * scale
            w, h = (last - first + 1) * cell, max(t["nbytes"] * scale, 1.0)
            out.append(f'<rect class={_quoted(classes)}{_attrs(**facts)} '
                       f'x="{x:.2f}" y="{top_y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                       f'fill="{_fill(t["value"])}"><title>{_esc(title)}</title></rect>')
            if w >= LABEL_WIDTH and h >= LABEL_HEIGHT:
                out.append(f'<text class="label" x="{x + 3:.2f}" y="{top_y + 11:.2f}">'
                           f'%{t["value"]}</text>')
        out.append("</g>")
        y += BAND + GAP
    for pc in range(0, n + 1, step):
        x = LEFT + pc * cell
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{top + TOP:.1f}" x2="{x:.1f}" '
                   f'y2="{y - GAP:.1f}"/>')
    out.append("</g>")
    return y - top


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plan_svg(docs: List[Json]) -> str:
    """The SVG document picturing ``docs``, memory plans as ``memory --json`` gives them."""
    body: List[str] = []
    y = 8.0
    for doc in docs:
        y += _panel(doc, y, body) + GAP
    width = max(MIN_WIDTH, LEFT + max([min(CELL * max(int(d["instructions"]), 1), SPAN)
                                       for d in docs] + [0]))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 16:.0f}" '
            f'height="{y:.0f}" viewBox="0 0 {width + 16:.0f} {y:.0f}">\n'
            f"<style>{STYLE}</style>\n" + "\n".join(body) + "\n</svg>\n")
