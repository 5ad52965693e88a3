"""Where a program's bytes go: ``Program.regions()``, ``DataFile.regions()``,
``Program.extended_header`` and ``pyflatmodule size``, checked against ExecuTorch 1.5.1's
own readers of the same files (tests/data/et/size.oracle.json, written by
tests/data/make_et_size.py: exir's extended header, the segments of its flatbuffer
reader, the payload, named data and constant buffer sizes ``deserialize_pte_binary``
gives)."""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Tuple

import jsonschema
import pytest

import pyflatmodule as pfm

from support.checked import load_full
from support.cli import reads_in_both, run_cli
from support.paths import DATA, ROOT
from support.paths import ET as ET_DIR  # ET is xml.etree.ElementTree here
from support.regions import assert_tiles, walk

with open(os.path.join(ET_DIR, "size.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
NAMES = sorted(ORACLE)
PTES = [n for n in NAMES if n.endswith(".pte")]
SCHEMA_PATH = os.path.join(ROOT, "pyflatmodule", "schemas", "size.schema.json")
with open(SCHEMA_PATH, encoding="utf-8") as _f:
    SCHEMA = json.load(_f)
SVG = "{http://www.w3.org/2000/svg}"


def _path(name: str) -> str:
    return os.path.join(ET_DIR, name)


def _regions(name: str) -> List[pfm.executorch.Region]:
    with pfm.load(_path(name)) as f:
        return f.regions()


def _segment_extents(name: str) -> List[Tuple[int, int, int]]:
    """(index, start, end) of each non-empty segment, as ExecuTorch reads them."""
    o = ORACLE[name]
    h = o["header"]
    base = h["segment_base_offset"] if h is not None else 0
    return [(i, base + off, base + off + n) for i, (off, n) in enumerate(o["segments"]) if n]


def test_the_oracle_covers_every_executorch_file() -> None:
    on_disk = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ET_DIR, "*.pt[ed]")))
    assert NAMES == on_disk


@pytest.mark.parametrize("name", NAMES)
def test_regions_tile_the_file(name: str) -> None:
    size = os.path.getsize(_path(name))
    assert ORACLE[name]["size"] == size
    assert_tiles(_regions(name), size, ("flatbuffer", "padding", "segment"))


@pytest.mark.parametrize("name", NAMES)
def test_padding_is_zeros_and_every_other_byte_is_an_objects(name: str) -> None:
    """Padding, at every level, is zero bytes (what ExecuTorch's writers pad with); in
    the flatbuffer it is only what no table, vtable, vector or string covers, so it is
    alignment: fewer than 16 bytes at a time."""
    with open(_path(name), "rb") as f:
        data = f.read()
    regions = _regions(name)
    for r in walk(regions):
        if r.kind == "padding":
            assert all(not any(data[s:e]) for s, e in r.spans), r
    for c in regions[0].children:
        if c.kind == "padding":
            assert all(e - s < 16 for s, e in c.spans), c


@pytest.mark.parametrize("name", PTES)
def test_extended_header_is_exirs(name: str) -> None:
    want = ORACLE[name]["header"]
    with pfm.load(_path(name)) as p:
        eh = p.extended_header
    if want is None:
        assert eh is None
    else:
        assert eh is not None
        assert eh._asdict() == {k: want[k] for k in ("program_size", "segment_base_offset",
                                                     "segment_data_size")}


@pytest.mark.parametrize("name", NAMES)
def test_flatbuffer_and_segments_are_where_exir_reads_them(name: str) -> None:
    o = ORACLE[name]
    regions = _regions(name)
    h = o["header"]
    fb_end = (h["program_size"] if name.endswith(".pte") else
              h["flatbuffer_offset"] + h["flatbuffer_size"]) if h is not None else o["size"]
    assert (regions[0].kind, regions[0].start, regions[0].end) == ("flatbuffer", 0, fb_end)
    header = regions[0].children[0]
    assert header.kind == "header" and header.spans == ((0, 8 + (h["length"] if h else 0)),)
    got = {}
    for r in regions:
        if r.kind == "segment":
            for label in r.label.split(","):
                got[int(label)] = (r.start, r.end)
    assert got == {i: (s, e) for i, s, e in _segment_extents(name)}


@pytest.mark.parametrize("name", NAMES)
def test_named_data_sizes_are_exirs(name: str) -> None:
    got: Dict[str, int] = {}
    for r in walk(_regions(name)):
        if r.kind == "named_data":
            for key in r.label.split(","):
                got[key] = r.size
    assert got == {k: n for k, n in ORACLE[name]["named_data"].items() if n}


@pytest.mark.parametrize("name", PTES)
def test_delegate_payload_sizes_are_exirs(name: str) -> None:
    regions = _regions(name)
    for d in ORACLE[name]["delegates"]:
        label = f"delegates[{d['index']}]:{d['id']}"
        if d["location"] == "inline":
            method = next(r for r in regions[0].children
                          if r.kind == "method" and r.label == d["method"])
            node = next(c for c in method.children if c.kind == "delegate" and c.label == label)
            payload = [c for c in node.children if c.kind == "payload"]
        else:
            payload = [r for r in walk(regions)
                       if r.kind == "payload" and r.label == f"{d['method']}.{label}"]
        assert [p.size for p in payload] == [d["size"]], d
    n_payloads = sum(1 for r in walk(regions) if r.kind == "payload")
    assert n_payloads == len(ORACLE[name]["delegates"])


@pytest.mark.parametrize("name", PTES)
def test_constant_buffers_are_exirs(name: str) -> None:
    """Each constant (and mutable data) buffer is its tensor's bytes, and with the padding
    after it the slot deserialize_pte_binary cuts out (the inline constant_buffer: its
    storage)."""
    o = ORACLE[name]
    regions = _regions(name)
    if any(r.kind == "constant" for r in regions[0].children):
        inline = {int(r.label): r.size for r in regions[0].children if r.kind == "constant"}
        assert inline == {k: n for k, n in enumerate(o["constant_slots"]) if n}
        return
    for kind, what in (("constant", "constant"), ("mutable_data", "mutable")):
        seen = set()
        for seg in regions:
            kids = list(seg.children)
            for i, c in enumerate(kids):
                if c.kind != kind:
                    continue
                k = int(c.label)
                seen.add(k)
                assert c.size == o[what + "_nbytes"][str(k)]
                pad = kids[i + 1].size if i + 1 < len(kids) and kids[i + 1].kind == "padding" \
                    else 0
                assert c.size + pad == o[what + "_slots"][k]
        assert seen == {k for k, n in enumerate(o[what + "_slots"]) if n}


def test_methods_hold_their_parts() -> None:
    regions = _regions("two_methods.pte")
    methods = {r.label: {c.kind for c in r.children}
               for r in regions[0].children if r.kind == "method"}
    assert set(methods) == {"forward", "first_layer"}
    for kinds in methods.values():
        assert {"values", "chains", "operators", "other"} <= kinds


def _validated(doc: Any) -> Any:
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    return doc


@pytest.mark.parametrize("name", ["mlp.pte", "xnn_attention.pte", "xnnpack_inline.pte",
                                  "inline_constants.pte", "mutable_init.pte", "external.ptd"])
def test_cli_size(name: str) -> None:
    doc = _validated(reads_in_both("size", _path(name)))
    [f] = doc["files"]
    o = ORACLE[name]
    assert (f["file"], f["format"], f["size"]) == (_path(name), name[-3:], o["size"])
    assert sum(f["top_level"].values()) == o["size"] == sum(f["sections"].values())
    if name.endswith(".pte"):
        want = o["header"]
        assert f["extended_header"] == (None if want is None else {
            k: want[k] for k in ("program_size", "segment_base_offset", "segment_data_size")})
        assert [(d["method"], d["index"], d["id"], d["location"], d["size"])
                for d in f["delegates"]] == [(d["method"], d["index"], d["id"], d["location"],
                                              d["size"]) for d in o["delegates"]]
    assert sum(d["bytes"] for d in f["dtypes"]) >= sum(t["bytes"] for t in f["largest_tensors"])
    sizes = [t["bytes"] for t in f["largest_tensors"]]
    assert sizes == sorted(sizes, reverse=True)

    def flat(docs: List[Any]) -> List[Tuple[str, str, int, int, int]]:
        return [x for d in docs for x in [(d["kind"], d["label"], d["start"], d["end"],
                                           d["size"])] + flat(d["children"])]
    assert flat(f["regions"]) == [(r.kind, r.label, r.start, r.end, r.size)
                                  for r in walk(_regions(name))]


def test_cli_size_with_data_file() -> None:
    pte, ptd = _path("external.pte"), _path("external.ptd")
    doc = _validated(json.loads(run_cli("size", "--json", pte, "--data", ptd).stdout))
    assert [(f["file"], f["format"]) for f in doc["files"]] == [(pte, "pte"), (ptd, "ptd")]
    weights = {t["name"]: t["bytes"] for t in doc["files"][0]["largest_tensors"]}
    assert weights == ORACLE["external.ptd"]["named_data"]   # resolved from the data file
    text = run_cli("size", pte, "--data", ptd)
    assert text.returncode == 0 and pte in text.stdout and ptd in text.stdout
    assert "l1.weight" in text.stdout


def test_cli_text_names_the_parts() -> None:
    out = run_cli("size", _path("xnn_attention.pte"))
    assert out.returncode == 0, out.stderr
    for word in ("extended header", "sections", "methods", "delegates", "XnnpackBackend",
                 "tensors by dtype", "largest tensors", "float32"):
        assert word in out.stdout


@pytest.mark.parametrize("name", ["xnn_attention.pte", "external.ptd", "inline_constants.pte",
                                  "bundled.bpte"])
def test_treemap_svg_and_html(name: str, tmp_path: Any) -> None:
    svg, page = str(tmp_path / "t.svg"), str(tmp_path / "t.html")
    out = run_cli("size", _path(name), "--svg", svg, "--html", page)
    assert out.returncode == 0, out.stderr
    root = ET.parse(svg).getroot()
    assert root.tag == SVG + "svg"
    groups = root.findall(f"{SVG}g")
    shown = walk(_regions(name))
    assert len(root.findall(f".//{SVG}rect")) == len(groups) == len(shown)
    tips = [g.find(f"{SVG}title").text or "" for g in groups]
    for r in shown:   # every region's size is in a tooltip (named data's key at its end)
        assert any(t.startswith(f"{r.kind} {r.label}".strip() + f": {r.size:,} bytes")
                   or t.startswith(f"{r.kind} ") and f": {r.size:,} bytes" in t
                   and t.endswith(f", key {r.label}") for t in tips), r
    width, height = float(root.get("width") or 0), float(root.get("height") or 0)
    for rect in root.iter(f"{SVG}rect"):
        x, y, w, h = (float(rect.get(k) or 0) for k in ("x", "y", "width", "height"))
        assert 0 <= x and 0 <= y and x + w <= width + 0.2 and y + h <= height + 0.2
    with open(page, encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    for external in ("src=", "href=", "url(", "<link", "@import"):
        assert external not in text


def test_treemap_areas_follow_sizes(tmp_path: Any) -> None:
    svg = str(tmp_path / "t.svg")
    assert run_cli("size", _path("xnnpack.pte"), "--svg", svg).returncode == 0
    top = [g for g in ET.parse(svg).getroot().findall(f"{SVG}g") if g.get("data-depth") == "0"]
    areas = {}
    for g in top:
        rect = g.find(f"{SVG}rect")
        areas[g.find(f"{SVG}title").text] = float(rect.get("width")) * float(rect.get("height"))
    regions = [r for r in _regions("xnnpack.pte")]
    total = sum(areas.values())
    for r, a in zip(sorted(regions, key=lambda r: -r.size), areas.values()):
        assert abs(a / total - r.size / ORACLE["xnnpack.pte"]["size"]) < 0.01


def test_cli_errors_are_located(tmp_path: Any) -> None:
    ptl = os.path.join(ROOT, "pyflatmodule", "data", "sample.ptl")
    out = run_cli("size", "--json", ptl)
    assert out.returncode == 1 and json.loads(out.stderr)["error"]["code"] == "unsupported"
    assert json.loads(out.stderr)["error"]["file"] == ptl
    with open(_path("mlp.pte"), "rb") as f:
        data = bytearray(f.read())
    data[4:8] = b"ET12"
    bad = tmp_path / "bad.pte"
    bad.write_bytes(bytes(data[:1000]))   # the flatbuffer cut short
    out = run_cli("size", "--json", str(bad))
    err = json.loads(out.stderr)["error"]
    assert out.returncode == 1 and err["file"] == str(bad) and err["offset"] is not None
    text = run_cli("size", str(bad))
    assert text.returncode == 1 and str(bad) in text.stderr and "offset" in text.stderr
    out = run_cli("size", "--json", _path("profile.etdump"))   # a format without regions
    err = json.loads(out.stderr)["error"]
    assert out.returncode == 1 and (err["code"], err["file"]) == ("unsupported",
                                                                  _path("profile.etdump"))
    same = run_cli("size", _path("mlp.pte"), "--svg", _path("mlp.pte"))
    assert same.returncode == 2 and "refusing" in same.stderr
    nowhere = str(tmp_path / "no" / "such" / "t.svg")
    out = run_cli("size", _path("mlp.pte"), "--svg", nowhere)
    assert out.returncode == 1 and nowhere in out.stderr


def test_schema_is_package_data() -> None:
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["pyflatmodule"]
    assert "schemas/*.json" in data
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.skipif(importlib.util.find_spec("executorch") is None,
                    reason="executorch is not installed")
def test_the_stored_oracle_is_what_executorch_says_now() -> None:
    name = "xnnpack_inline.pte"
    script = os.path.join(DATA, "make_et_size.py")
    p = subprocess.run([sys.executable, script, "--child", _path(name)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == ORACLE[name]


def _tiles(regions: List[Any], size: int) -> bool:
    at = 0
    for r in regions:
        if r.start != at:
            return False
        at = r.end
    return at == size and all(sum(c.size for c in r.children) == r.size
                              for r in walk(regions) if r.children)


@pytest.mark.parametrize("name", ["mutable_init.pte", "xnnpack_inline.pte", "external.ptd",
                                  "bundled.bpte"])
def test_regions_of_every_file_one_byte_off_that_loads(name: str) -> None:
    """Whatever a full load accepts, regions() tiles: every third byte flipped."""
    with open(_path(name), "rb") as f:
        data = f.read()
    loaded = 0
    for i in range(0, len(data), 3):
        b = bytearray(data)
        b[i] ^= 0xFF
        try:
            f = load_full(bytes(b))
        except (pfm.FormatError, ValueError):
            continue
        loaded += 1
        assert _tiles(f.regions(), len(b)), i
    assert loaded >= 50   # the sweep reached files that load


def test_regions_of_a_constant_offset_beyond_its_segment() -> None:
    """A constant_segment offset no tensor uses may point past the segment (the runtime
    never follows it; the full sweep found one, byte 69 of xnn_q4_group.pte zeroed): its
    slot covers nothing and the regions still tile the file."""
    with open(_path("xnn_q4_group.pte"), "rb") as f:
        data = bytearray(f.read())
    data[69] = 0
    for verify in (True, False):
        with pfm.load(bytes(data), verify=verify) as p:
            regions = p.regions()
        assert _tiles(regions, len(data))
        assert all(r.end <= len(data) for r in walk(regions))


def _oracle_json(name: str) -> Any:
    with open(_path(name[:-4] + ".oracle.json"), encoding="utf-8") as f:
        return json.load(f)


def _oracle_readers(name: str) -> Dict[str, List[Tuple[str, str, str]]]:
    """Per named data key, the XNNPACK delegate constants that read it as ExecuTorch's
    deserialization of the payloads says (its *.oracle.json: a value's
    constant_buffer_idx, or its quantization's scale_buffer_idx, names a constant_data
    entry, whose named_key it is), each as (``METHOD.delegates[I].values[ID]``, ``NODE
    role`` when a conv or fully-connected node takes it as its filter or bias, else "",
    `` scales`` for its scales, else "")."""
    out: Dict[str, List[Tuple[str, str, str]]] = {}
    seen: Dict[str, int] = {}
    for d in _oracle_json(name).get("xnnpack", {}).get("delegates", []):
        j = seen[d["plan"]] = seen.get(d["plan"], -1) + 1
        g = d["graph"]
        roles = {}
        for n in g["xnodes"]:
            for role in ("filter", "bias"):
                vid = n["xnode_union"].get(f"{role}_id")
                if vid is not None:
                    roles[vid] = f"{n['xnode_union_type']} {role}"
        for x in g["xvalues"]:
            u = x["xvalue_union"]
            tv = u.get("tensor_value", u)
            where = f"{d['plan']}.delegates[{j}].values[{tv['id_out']}]"
            for k, what in ((tv.get("constant_buffer_idx", 0), ""),
                            ((u.get("quant_params") or {}).get("scale_buffer_idx", 0),
                             " scales")):
                entry = g["constant_data"][k] if k else {"size": 0}
                if entry["size"] and entry["named_key"]:
                    out.setdefault(entry["named_key"], []).append(
                        (where, roles.get(tv["id_out"], ""), what))
    return out


def _oracle_blobs(name: str) -> List[List[str]]:
    """The tensors of ``name`` that read each blob, as ExecuTorch's deserialization says
    (its *.oracle.json): a constant value by its constant buffer index, an XNNPACK
    delegate's constant by the named data key of its constant_data entry."""
    blobs: Dict[Any, List[str]] = {}
    for plan in _oracle_json(name)["program"]["execution_plan"]:
        for i, v in enumerate(plan["values"]):
            if (v["kind"] == "Tensor" and v["data_buffer_idx"] and v["allocation"] is None
                    and not v["location"]):
                blobs.setdefault(("buffer", v["data_buffer_idx"]), []).append(
                    f"{plan['name']}.values[{i}]")
    for key, readers in _oracle_readers(name).items():
        blobs[("named", key)] = [w for w, _, what in readers if not what]
    return [b for b in blobs.values() if b]


def _readable(n: str) -> Any:
    """``n`` as a test parameter, skipped when its tensors need ml_dtypes and it is not
    installed (xnn_q4_group.pte's scales are bfloat16)."""
    return pytest.param(n, marks=pytest.mark.skipif(
        n == "xnn_q4_group.pte" and importlib.util.find_spec("ml_dtypes") is None,
        reason="its scales are bfloat16: ml_dtypes is not installed"))


SHARING = [_readable(n) for n in PTES
           if os.path.exists(_path(n[:-4] + ".oracle.json")) and n != "external.pte"]


@pytest.mark.parametrize("name", SHARING)
def test_cli_size_counts_a_shared_blob_once(name: str) -> None:
    """Tensors that read the same bytes (constants of two methods, of one buffer, named
    data several delegate constants read) are one blob: listed once, with the others in
    ``shared_with``, and counted once in the totals by dtype."""
    doc = _validated(json.loads(run_cli("size", "--json", "--top", "100000",
                                        _path(name)).stdout))
    [f] = doc["files"]
    want = sorted(sorted(names) for names in _oracle_blobs(name) if len(names) > 1)
    shared = [t for t in f["largest_tensors"] if t["shared_with"]]
    assert sorted(sorted([t["name"], *t["shared_with"]]) for t in shared) == want
    assert f["shared"] == {"blobs": len(want), "tensors": sum(len(w) for w in want),
                           "bytes": sum(t["bytes"] for t in shared),
                           "repeated": sum(t["bytes"] * len(t["shared_with"]) for t in shared)}
    bytes_ = {t["name"]: t["bytes"] for t in f["largest_tensors"]}
    assert sum(d["bytes"] for d in f["dtypes"]) == sum(bytes_.values())
    assert sum(d["tensors"] for d in f["dtypes"]) == len(bytes_) + f["shared"]["tensors"] - \
        f["shared"]["blobs"]


def test_cli_size_two_methods_share_their_weights() -> None:
    """two_methods.pte: both methods' linear weight and bias are constant buffers 1 and 2
    (ExecuTorch's constant dedup); the totals count their 128 + 32 bytes once."""
    o = ORACLE["two_methods.pte"]
    doc = json.loads(run_cli("size", "--json", _path("two_methods.pte")).stdout)
    [f] = doc["files"]
    once = o["constant_nbytes"]["1"] + o["constant_nbytes"]["2"]
    assert f["shared"] == {"blobs": 2, "tensors": 4, "bytes": once, "repeated": once}
    assert f["dtypes"] == [{"dtype": "float32", "tensors": 6,
                            "bytes": sum(o["constant_nbytes"].values())}]
    text = run_cli("size", _path("two_methods.pte")).stdout
    assert "shared: 4 tensors read 2 blobs of 160 bytes, counted once" in text
    assert "first_layer.values[0]  (also forward.values[0])" in text


with open(os.path.join(DATA, "shared", "shared.oracle.json"), encoding="utf-8") as _f:
    _SHARED: Dict[str, Any] = json.load(_f)
XNN = [_readable(n) for n in PTES if n.startswith("xnn")
       and os.path.exists(_path(n[:-4] + ".oracle.json")) and _oracle_readers(n)]


@pytest.mark.parametrize("name", XNN)
def test_cli_size_names_hashed_named_data_by_its_readers(name: str, tmp_path: Any) -> None:
    """XNNPACK keys its named data by content hash: the JSON gives each such region's
    readers, the treemap names it by them (node and role where a conv or fully-connected
    node takes it), the key staying in the tooltip."""
    want = _oracle_readers(name)
    svg = str(tmp_path / "t.svg")
    out = run_cli("size", "--json", _path(name), "--svg", svg)
    doc = _validated(json.loads(out.stdout))

    def named(docs: List[Any]) -> Dict[str, List[str]]:
        found: Dict[str, List[str]] = {}
        for d in docs:
            if d["kind"] == "named_data":
                found[d["label"]] = d.get("readers", [])
            found.update(named(d["children"]))
        return found
    got = named(doc["files"][0]["regions"])
    assert set(want) <= set(got) and set(want) == {k for k, v in got.items() if v}
    for key, readers in want.items():
        assert sorted(got[key]) == sorted(w + (f" ({r})" if r else "") + what
                                          for w, r, what in readers)
    tips = [t.text or "" for t in ET.parse(svg).getroot().iter(f"{SVG}title")]
    for key, readers in want.items():
        tip = next(t for t in tips if t.endswith(f", key {key}"))
        assert tip.startswith("named_data " + "; ".join(got[key]) + ": ")


@pytest.mark.parametrize("pte, ptd, keys", [
    (_path("external.pte"), _path("external.ptd"), sorted(ORACLE["external.ptd"]["named_data"])),
    (os.path.join(DATA, "shared", "xnn_a.pte"), os.path.join(DATA, "shared", "foundation_xnn.ptd"),
     sorted(_SHARED["data_files"]["foundation_xnn.ptd"]))])
def test_cli_size_pictures_hold_the_data_files(pte: str, ptd: str, keys: List[str],
                                                tmp_path: Any) -> None:
    """With --data each file is a top-level box of its own, as large as the file, its
    named data inside by key (or by the delegate constant that reads it)."""
    svg, page = str(tmp_path / "t.svg"), str(tmp_path / "t.html")
    out = run_cli("size", "--json", pte, "--data", ptd, "--svg", svg, "--html", page)
    assert out.returncode == 0, out.stderr
    doc = _validated(json.loads(out.stdout))
    assert [f["file"] for f in doc["files"]] == [pte, ptd]
    root = ET.parse(svg).getroot()
    top = [g for g in root.findall(f"{SVG}g") if g.get("data-depth") == "0"]
    sizes = {os.path.basename(p): os.path.getsize(p) for p in (pte, ptd)}
    assert sorted((g.find(f"{SVG}title").text or "") for g in top) == sorted(
        f"file {n}: {b:,} bytes ({_human(b)}), [0, {b:,})" for n, b in sizes.items())
    areas = [float(g.find(f"{SVG}rect").get("width") or 0) *
             float(g.find(f"{SVG}rect").get("height") or 0) for g in top]
    big, small = sorted(sizes.values(), reverse=True)
    assert abs(min(areas) / sum(areas) - small / (big + small)) < 0.01
    tips = [t.text or "" for t in root.iter(f"{SVG}title")]
    for key in keys:
        assert any(t.startswith(f"named_data {key}: ") or t.endswith(f", key {key}")
                   for t in tips), key
    with open(page, encoding="utf-8") as f:
        assert f"file {os.path.basename(ptd)}" in f.read()


def _human(n: int) -> str:
    from pyflatmodule.cli.common import human
    return human(n)
