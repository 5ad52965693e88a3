"""Markdown tables of medians and ratios from pytest-benchmark results, with the targets
of issues 4 (PyTorch Mobile), 11 (the zoo of real architectures) and 13 (ExecuTorch)
checked.

    python benchmarks/bench_report.py RESULTS.json     # a --benchmark-json file

The timed run prints the same report at its end (benchmarks/conftest.py).
"""
from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

PFM = "pyflatmodule"
MiB = 1024.0  # KiB per MiB


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def _fmt_unit(seconds: float, unit: str) -> str:
    if unit == "byte":
        return f"{1 / seconds / 2**30:.2f} GiB/s" if seconds else ""
    return f"{seconds * 1e6:.3f} µs/{unit}"


class Results:
    """Medians by (group, impl), with each group's extra_info."""

    def __init__(self, rows: List[Dict[str, Any]]) -> None:
        self.rows: Dict[Tuple[str, str], Dict[str, Any]] = {}
        for r in rows:
            info = r.get("extra_info") or {}
            if "impl" not in info:
                continue
            self.rows[(info["group"], info["impl"])] = r

    def median(self, group: str, impl: str) -> Optional[float]:
        r = self.rows.get((group, impl))
        return None if r is None else float(r["stats"]["median"])

    def info(self, group: str, impl: str, key: str) -> Any:
        r = self.rows.get((group, impl))
        return None if r is None else r["extra_info"].get(key)

    def per_unit(self, group: str, impl: str) -> Optional[float]:
        m = self.median(group, impl)
        units = self.info(group, impl, "units")
        return None if m is None or not units else m / units

    def ratio(self, group: str, slow: str, fast: str = PFM) -> Optional[float]:
        a, b = self.median(group, slow), self.median(group, fast)
        return None if a is None or b is None or b == 0 else a / b

    def groups(self) -> List[str]:
        return list(dict.fromkeys(g for g, _ in self.rows))


def _table(res: Results) -> List[str]:
    out = ["| benchmark | implementation | median | per unit | its time / pyflatmodule's | "
           "memory |", "|---|---|---:|---:|---:|---|"]
    for group in res.groups():
        impls = [i for g, i in res.rows if g == group]
        impls.sort(key=lambda i: (i != PFM, i))
        for impl in impls:
            r = res.rows[(group, impl)]
            info = r["extra_info"]
            med = float(r["stats"]["median"])
            unit = info.get("unit") or ""
            per = _fmt_unit(med / info["units"], unit) if info.get("units") else ""
            ratio = res.ratio(group, impl)
            mem = []
            if "peak_rss_kib" in info:
                mem.append(f"peak RSS {info['peak_rss_kib'] / MiB:.0f} MiB")
            if "state_dict_kib" in info:
                mem.append(f"+{info['open_kib'] / MiB:.1f} MiB open, "
                           f"+{info['state_dict_kib'] / MiB:.1f} MiB open+"
                           f"{info.get('step', 'state_dict')} "
                           f"(file {info['file_kib'] / MiB:.1f}, "
                           f"anon {info['anon_kib'] / MiB:.1f})")
            if "crashes" in info:
                mem.append(_crash_note(info))
            out.append(f"| {group} | {impl} | {_fmt_time(med)} | {per} | "
                       f"{'' if ratio is None else f'{ratio:.2f}'} | {'; '.join(mem)} |")
    return out


def _crash_note(info: Dict[str, Any]) -> str:
    """Crashes and hangs on mutated inputs, by mode (strict / lenient)."""
    causes = ", ".join(f"{k} {v}" for k, v in sorted(info.get("causes", {}).items()))
    return (f"{info['crashes']} crashing and {info['hangs']} hanging of {info['inputs']} "
            f"inputs (strict {info['crashes_strict']}/{info['hangs_strict']}, lenient "
            f"{info['crashes_lenient']}/{info['hangs_lenient']}"
            + (f"; by mode and cause: {causes}" if causes else "")
            + f"); {info['unconfirmed']} "
            f"killed a worker but not a fresh child; {info['other_exceptions']} other "
            "exceptions")


def _check(rows: List[str], target: str, measured: Optional[float], ok: Optional[bool],
           fmt: str = "{:.2f}") -> None:
    if measured is None:
        rows.append(f"| {target} | not measured | – |")
    else:
        rows.append(f"| {target} | {fmt.format(measured)} | {'met' if ok else '**missed**'} |")


def _targets(res: Results) -> List[str]:
    rows = ["| target | measured | |", "|---|---:|---|"]
    g = "open: meta_2k"
    r = res.ratio(g, "torch_lite")
    _check(rows, "open meta_2k: torch lite / pyflatmodule >= 5", r, r is not None and r >= 5)
    r = res.ratio(g, "torch_jit")
    _check(rows, "open meta_2k: torch jit / pyflatmodule >= 200", r, r is not None and r >= 200)
    r = res.ratio("open: linear_1g8", "torch_lite")
    _check(rows, "open linear_1g8: torch lite / pyflatmodule >= 1", r, r is not None and r >= 1)
    a, b = res.median("open: linear_1g8", PFM), res.median("open: linear_256m", PFM)
    r = None if a is None or b is None else a / b
    _check(rows, "open: pyflatmodule 1.8 GiB / 256 MiB <= 1.2", r, r is not None and r <= 1.2)
    for name in ("meta_20k", "meta_200k"):
        a, b = res.per_unit(f"open: {name}", PFM), res.per_unit("open: meta_2k", PFM)
        r = None if a is None or b is None else a / b
        _check(rows, f"open per ivalue: {name} / meta_2k <= 1.25 (linear)", r,
               r is not None and r <= 1.25)
    for group in [x for x in res.groups() if x.startswith("cold first value: ")]:
        name = group.split(": ", 1)[1]
        torch = [i for i in ("torch_lite", "torch_jit") if res.median(group, i) is not None]
        best = min(torch, key=lambda i: res.median(group, i)) if torch else None
        r = res.ratio(group, best) if best else None
        _check(rows, f"cold first value {name}: fastest torch ({best}) / pyflatmodule >= 10",
               r, r is not None and r >= 10)
        r = _peak_rss_ratio(res, group, torch)
        _check(rows, f"cold first value {name}: torch peak RSS / pyflatmodule's >= 6", r,
               r is not None and r >= 6)
    r = res.ratio("cli start to finish: info sample.ptl", PFM, "floor_numpy")
    _check(rows, "cli info sample.ptl, fresh process: pyflatmodule / `import numpy` <= 2.5",
           r, r is not None and r <= 2.5)
    kib = res.info("rss growth: linear_1g8", PFM, "state_dict_kib")
    _check(rows, "RSS growth open + state_dict, linear_1g8 <= 8 MiB",
           None if kib is None else kib / MiB, kib is not None and kib <= 8 * MiB, "{:.1f} MiB")
    a, b = kib, res.info("rss growth: linear_256m", PFM, "state_dict_kib")
    _check(rows, "RSS growth 1.8 GiB minus 256 MiB model <= 1 MiB",
           None if a is None or b is None else (a - b) / MiB,
           a is not None and b is not None and a - b <= MiB, "{:.2f} MiB")
    for name in ("meta_20k", "meta_200k"):
        a = res.info(f"rss growth: {name}", PFM, "state_dict_kib")
        b = res.info("rss growth: meta_2k", PFM, "state_dict_kib")
        ua = res.info(f"rss growth: {name}", PFM, "ivalues")
        ub = res.info("rss growth: meta_2k", PFM, "ivalues")
        r = None if None in (a, b, ua, ub) or not b else (a / ua) / (b / ub)
        _check(rows, f"RSS growth per ivalue: {name} / meta_2k <= 1.25 (linear)", r,
               r is not None and r <= 1.25)
    for name in ("meta_2k", "linear_256m", "transformer"):
        # torch's state_dict() walks a module whose tensors its load already made:
        # compared with pyflatmodule's first call (which makes the arrays) and with
        # later calls (which copy the walk's kept result).
        r = res.ratio(f"state_dict: {name}", "torch_jit")
        _check(rows, f"state_dict per tensor {name}, first call: torch / pyflatmodule > 1",
               r, r is not None and r > 1)
        a = res.median(f"state_dict: {name}", "torch_jit")
        b = res.median(f"state_dict: {name}", "pyflatmodule_again")
        r = None if a is None or not b else a / b
        _check(rows, f"state_dict per tensor {name}, later calls: torch / pyflatmodule > 1",
               r, r is not None and r > 1)
    for group in [x for x in res.groups() if x.startswith(("index all: ", "decode all: "))]:
        r = res.ratio(group, "python_walker")
        _check(rows, f"{group}: python walker / pyflatmodule per ivalue >= 10", r,
               r is not None and r >= 10)
    for group in [x for x in res.groups() if x.startswith("sum weights: ")]:
        a, b = res.median(group, PFM), res.median(group, "np_memmap")
        r = None if a is None or b is None else a / b
        _check(rows, f"{group}: pyflatmodule / np.memmap floor <= 1.1", r,
               r is not None and r <= 1.1)
    return rows


def _every(rows: List[str], res: Results, prefix: str, target: str,
           value: Callable[[str], Optional[float]], bound: float, at_most: bool = False,
           fmt: str = "{:.2f}") -> None:
    """One row for a target on every model (the groups ``prefix`` + model): the value of
    the model farthest from ``bound`` and the models that miss it."""
    values = {g[len(prefix):]: value(g) for g in res.groups() if g.startswith(prefix)}
    label = f"{target} {'<=' if at_most else '>='} {bound:g}, every model"
    unmeasured = [m for m, v in values.items() if v is None]
    if not values or unmeasured:
        rows.append(f"| {label} | not measured{': ' + ', '.join(unmeasured) if values else ''}"
                    " | – |")
        return
    sign = -1 if at_most else 1
    worst = min(values, key=lambda m: sign * values[m])
    missed = [m for m, v in values.items() if sign * (v - bound) < 0]
    rows.append(f"| {label} ({len(values)}) | {fmt.format(values[worst])} ({worst}) | "
                + ("met |" if not missed else f"**missed** on all {len(missed)} |"
                   if len(missed) == len(values) else
                   f"**missed** on {len(missed)}: {', '.join(missed)} |"))


def _peak_rss_ratio(res: Results, group: str, others: List[str]) -> Optional[float]:
    """The smallest of the ``others``' peak RSS over pyflatmodule's."""
    ours = res.info(group, PFM, "peak_rss_kib")
    theirs = [res.info(group, i, "peak_rss_kib") for i in others]
    return None if not ours or None in theirs or not theirs else min(theirs) / ours


def _zoo_targets(res: Results) -> List[str]:
    """The zoo's targets (issue 11), each on every model of the zoo."""
    rows: List[str] = []
    prefix = "zoo load + state_dict: "
    _every(rows, res, prefix, "zoo load + first state_dict: torch lite load / pyflatmodule",
           lambda g: res.ratio(g, "torch_lite"), 2)
    _every(rows, res, prefix,
           "zoo load + first state_dict: torch jit load + state_dict / pyflatmodule",
           lambda g: res.ratio(g, "torch_jit"), 50)
    _every(rows, res, "zoo state_dict: ",
           "zoo first state_dict per tensor: torch state_dict alone / pyflatmodule",
           lambda g: res.ratio(g, "torch_jit"), 1)
    prefix = "zoo fresh process: "
    _every(rows, res, prefix, "zoo fresh process, load + state_dict: torch lite / pyflatmodule",
           lambda g: res.ratio(g, "torch_lite"), 10)
    _every(rows, res, prefix, "zoo fresh process: torch lite peak RSS / pyflatmodule's",
           lambda g: _peak_rss_ratio(res, g, ["torch_lite"]), 6)
    _every(rows, res, "zoo cli info: ",
           "zoo `pyflatmodule info`: pyflatmodule / `python -c \"import numpy, cffi\"`",
           lambda g: res.ratio(g, PFM, "floor_numpy_cffi"), 1.5, at_most=True)
    return rows


#: The ExecuTorch opens compared for the same work, reported beside the targets (which
#: compare pyflatmodule's default open): (slow impl, fast impl, what the row says).
_LIKE_FOR_LIKE = [
    ("runtime_minimal_methods", "pyflatmodule_methods",
     "runtime load_program (Minimal) + load_method / pyflatmodule open + methods read"),
    ("exir_deserialize", "pyflatmodule_full",
     "exir deserialize_pte_binary / pyflatmodule verify='full'"),
    ("runtime_minimal_methods", "pyflatmodule_full",
     "runtime load_program (Minimal) + load_method / pyflatmodule verify='full'"),
    ("runtime_internalconsistency_methods", "pyflatmodule_full",
     "runtime load_program (InternalConsistency) + load_method / pyflatmodule "
     "verify='full'")]


def _et_targets(res: Results) -> List[str]:
    """The ExecuTorch targets (issue 13, item 6)."""
    rows: List[str] = []
    r = res.ratio("et open: et_graph_22k", "exir_deserialize")
    _check(rows, "et open: et_graph_22k: exir deserialize_pte_binary / pyflatmodule >= 100",
           r, r is not None and r >= 100)
    for group in [x for x in res.groups() if x.startswith("et open: ")]:
        r = res.ratio(group, "runtime_minimal")
        if r is not None:
            _check(rows, f"{group}: runtime load_program (Minimal) / pyflatmodule >= 1", r,
                   r >= 1)
        for slow, fast, label in _LIKE_FOR_LIKE:
            r = res.ratio(group, slow, fast)
            if r is not None:
                rows.append(f"| {group}: {label} (reported) | {r:.2f} | – |")
    for group in [x for x in res.groups() if x.startswith("et cold first constant: ")]:
        r = res.ratio(group, "exir")
        _check(rows, f"{group}: exir / pyflatmodule >= 10", r, r is not None and r >= 10)
    for group in [x for x in res.groups() if x.startswith("et rss growth: ")]:
        kib = res.info(group, PFM, "anon_kib")
        _check(rows, f"{group}: pyflatmodule anonymous RSS growth, open + reading every "
               "constant <= 8 MiB", None if kib is None else kib / MiB,
               kib is not None and kib <= 8 * MiB, "{:.1f} MiB")
    group = "et mutated programs"
    ours = res.info(group, PFM, "crashes")
    hangs = res.info(group, PFM, "hangs")
    _check(rows, f"{group}: pyflatmodule crashes + hangs == 0",
           None if ours is None or hangs is None else ours + hangs,
           ours == 0 and hangs == 0, "{:.0f}")
    info = (res.rows.get((group, "runtime")) or {}).get("extra_info")
    rows.append(f"| {group}: ExecuTorch runtime load_program + load_method (reported) | "
                + ("not measured | – |" if info is None else
                   f"{info['crashes']} crashes, {info['hangs']} hangs of {info['inputs']} | "
                   "– |"))
    return rows


def _speed_targets(res: Results) -> List[str]:
    """The open-speed targets (issue 25): the fixed cost of an open, the graph-heavy
    program's verified open, the metadata-heavy PTMF open."""
    rows: List[str] = []
    for sample in ("sample.pte", "sample.ptl"):
        m = res.median(f"open: {sample}", PFM)
        _check(rows, f"open: {sample}: pyflatmodule median <= 30 us",
               None if m is None else m * 1e6, m is not None and m <= 30e-6, "{:.1f} us")
    for model in ("linear_256m", "linear_1g8"):
        group = f"open: {model}"
        m = res.median(group, PFM)
        _check(rows, f"{group}: pyflatmodule median <= 30 us", None if m is None else m * 1e6,
               m is not None and m <= 30e-6, "{:.1f} us")
        r = res.ratio(group, "numpy_npy")
        _check(rows, f"{group}: np.load(mmap_mode='r') / pyflatmodule >= 1 (parity)", r,
               r is not None and r >= 1)
    r = res.ratio("open: linear_1g8", "torch_lite")
    _check(rows, "open: linear_1g8: torch lite / pyflatmodule >= 3", r, r is not None and r >= 3)
    m = res.median("close: linear_256m", PFM)
    _check(rows, "close: linear_256m: pyflatmodule median <= 5 us",
           None if m is None else m * 1e6, m is not None and m <= 5e-6, "{:.1f} us")
    group = "et open: et_graph_22k"
    for impl, label, bound in (("exir_deserialize", "exir deserialize_pte_binary", 1000),
                               ("runtime_minimal_methods",
                                "runtime load_program (Minimal) + load_method", 5),
                               ("runtime_minimal", "runtime load_program (Minimal)", 1)):
        r = res.ratio(group, impl)
        _check(rows, f"{group}: {label} / pyflatmodule >= {bound}", r,
               r is not None and r >= bound)
    r = res.ratio("open: meta_2k", "torch_lite")
    _check(rows, "open: meta_2k: torch lite / pyflatmodule >= 10", r, r is not None and r >= 10)
    return rows


def _growth(res: Results, per: str) -> Optional[float]:
    """The full check's cost per value (or per flatbuffer byte, ``per="byte"``) on the
    largest growth program over the smallest's."""
    group = "et full check growth"
    costs = []
    for impl in ("et_graph_2k", "et_graph_225k"):
        m = res.median(group, impl)
        units = res.info(group, impl, "units" if per == "value" else "flatbuffer_bytes")
        if m is None or not units:
            return None
        costs.append(m / units)
    return costs[1] / costs[0]


def _check_speed_targets(res: Results) -> List[str]:
    """The full check and start-up targets (issue 39): the like-for-like ratios, the cost
    growth, the fresh process and the command line's start-up."""
    rows: List[str] = []
    group = "et open: et_graph_22k"
    for slow, fast, label, bound in (
            ("runtime_internalconsistency_methods", "pyflatmodule_full",
             "runtime load_program + load_method (InternalConsistency) / pyflatmodule "
             "verify='full'", 5),
            ("exir_deserialize", "pyflatmodule_full",
             "exir deserialize_pte_binary / pyflatmodule verify='full'", 1000),
            ("runtime_minimal", PFM, "runtime load_program (Minimal) / pyflatmodule open", 5)):
        r = res.ratio(group, slow, fast)
        _check(rows, f"{group}: {label} >= {bound}", r, r is not None and r >= bound)
    for per in ("value", "byte"):
        r = _growth(res, per)
        _check(rows, f"et full check growth: cost per {per}, 225,010 values / 2,251 values "
               "<= 1.2", r, r is not None and r <= 1.2)
    group = "et cold first constant: et_graph_22k"
    r = res.ratio(group, "et_runtime")
    _check(rows, f"{group}: executorch.runtime process / pyflatmodule's >= 50", r,
           r is not None and r >= 50)
    r = _peak_rss_ratio(res, group, ["et_runtime"])
    _check(rows, f"{group}: executorch.runtime peak RSS / pyflatmodule's >= 20", r,
           r is not None and r >= 20)
    for impl in ("pyflatmodule_info", "pyflatmodule_verify"):
        r = res.ratio("cli start to finish: sample.pte", impl, "floor_python")
        _check(rows, f"cli start to finish: sample.pte: {impl} / python -c pass <= 3", r,
               r is not None and r <= 3)
    r = res.ratio("cli start to finish: info sample.ptl", PFM, "floor_python")
    rows.append("| cli start to finish: info sample.ptl: pyflatmodule / python -c pass "
                f"(reported) | {'not measured' if r is None else f'{r:.2f}'} | – |")
    return rows


def machine() -> str:
    cpus = os.cpu_count()
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{cpus} CPUs ({model}), {mem} RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def render(rows: List[Dict[str, Any]], machine_info: Optional[str] = None) -> str:
    res = Results(rows)
    lines = [f"Machine: {machine_info or machine()}", "",
             "Medians. Last column of the first table: how many times pyflatmodule's median "
             "the other implementation's median is (above 1: pyflatmodule is faster).", ""]
    # Each issue's targets when the run measured any of its groups.
    rows = ["| target | measured | |", "|---|---:|---|"]
    issues = []
    for issue, prefix, targets in TARGETS:
        if any(_issue_of(g) == prefix for g in res.groups()):
            issues.append(issue)
            rows += targets(res)
    lines += _table(res)
    if issues:
        names = " and ".join([", ".join(issues[:-1]), issues[-1]] if issues[:-1] else issues)
        lines += ["", f"Targets (issue{'s' if len(issues) > 1 else ''} {names}):", ""] + rows
    return "\n".join(lines)


def _remote_targets(res: Results) -> List[str]:
    """A remote program's metadata (issue 38): its header and flatbuffer, not its bytes."""
    rows: List[str] = []
    for group in [x for x in res.groups() if x.startswith("remote info: ")]:
        got = res.info(group, PFM, "fetched_bytes")
        size = res.info(group, PFM, "file_bytes")
        r = None if got is None or not size else got / size
        _check(rows, f"{group}: bytes fetched / file size <= 0.001", r,
               r is not None and r <= 0.001, "{:.6f}")
        r = res.ratio(group, "download")
        if r is not None:
            rows.append(f"| {group}: download then info / info by range (reported) | "
                        f"{r:.1f} | – |")
    return rows


def _issue_of(group: str) -> str:
    """The prefix that says whose targets a group feeds ("et ", "zoo ", or "")."""
    return next((p for p in ("et ", "zoo ", "remote ") if group.startswith(p)), "")


#: (issue, its groups' prefix, its targets' rows)
TARGETS: List[Tuple[str, str, Callable[[Results], List[str]]]] = [
    ("4", "", lambda res: _targets(res)[2:]), ("11", "zoo ", _zoo_targets),
    ("13", "et ", _et_targets), ("25", "", _speed_targets),
    ("38", "remote ", _remote_targets), ("39", "et ", _check_speed_targets)]


def main(argv: List[str]) -> None:
    with open(argv[0], encoding="utf-8") as f:
        doc = json.load(f)
    info = doc.get("machine_info") or {}
    cpu = info.get("cpu") or {}
    mi = None
    if info:
        mi = (f"{cpu.get('count', '?')} CPUs ({cpu.get('brand_raw', '')}), "
              f"{info.get('system', '')} {info.get('release', '')}, "
              f"Python {info.get('python_version', '')}")
    print(render(doc["benchmarks"], mi))


if __name__ == "__main__":
    main(sys.argv[1:])
