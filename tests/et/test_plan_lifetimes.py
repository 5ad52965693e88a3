"""The lifetimes ``Method.memory_plan()`` derives from the instruction chains against exir's
``TensorSpec.lifetime`` at export (tests/data/et/runs/*.lifetimes.json, written by
tests/data/make_et_lifetimes.py with the programs).

The two count different things. exir counts the nodes of the graph it emits (placeholders,
``memory.alloc``, ``getitem``, static ``memory.view`` and the output node among them, none
of which the emitter writes an instruction for), and gives a view and its base one
lifetime, the union of theirs; pyflatmodule counts instructions, and gives each value the
span of the instructions naming it (the method's inputs from the first, its outputs to the
last). The exact relation tested: with I(n) the instruction node n wrote, a tensor exir
says lives over nodes [a, b] lives over instructions [I(first node at or after a that
wrote one), I(last node at or before b that wrote one)]; for a view and its base, that
span is the union of their spans.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections import Counter
from typing import Dict, List, Optional, Tuple

import pytest

import pyflatmodule as pfm

from support.paths import ET
from support.runtime import HAS_RUNTIME

RUNS = os.path.join(ET, "runs")
STEMS = sorted(os.path.basename(p)[:-len(".lifetimes.json")]
               for p in glob.glob(os.path.join(RUNS, "*.lifetimes.json")))


def test_the_programs_are_there() -> None:
    assert {"life_portable", "life_xnnpack", "life_views", "life_mutable"} <= set(STEMS)


@pytest.mark.parametrize("stem", STEMS)
def test_lifetimes_are_exirs_counted_in_instructions(stem: str) -> None:
    with open(os.path.join(RUNS, stem + ".lifetimes.json")) as f:
        doc = json.load(f)
    with pfm.load_program(os.path.join(RUNS, stem + ".pte")) as p:
        assert list(doc) == list(p.methods)
        for name, exir in doc.items():
            mp = p.methods[name].memory_plan()
            at: List[Optional[int]] = [n["instruction"] for n in exir["nodes"]]
            assert [i for i in at if i is not None] == list(range(mp.instructions))

            def span(a: int, b: int) -> Tuple[int, int]:
                first = next(i for i in at[a:] if i is not None)
                last = next(i for i in reversed(at[:b + 1]) if i is not None)
                return first, last

            tensors = exir["tensors"]
            assert len(tensors) == len(mp.tensors)
            groups: Dict[int, List[int]] = {}
            for k, t in enumerate(tensors):
                assert t["nbytes"] <= t["allocated_memory"]
                root = k
                while tensors[root]["view_of"] is not None:
                    root = tensors[root]["view_of"]
                groups.setdefault(root, []).append(k)
            ours = Counter((t.mem_id, t.offset, t.nbytes, t.first, t.last) for t in mp.tensors)
            for members in sorted(groups.values(), key=len):
                (lifetime,) = {tuple(tensors[k]["lifetime"]) for k in members}  # one for all
                first, last = span(*lifetime)
                keys = {(tensors[k]["mem_id"], tensors[k]["mem_offset"], tensors[k]["nbytes"])
                        for k in members}
                if len(members) == 1:
                    (key,) = keys
                    found = [(*key, first, last)]
                else:
                    # the group's bytes hold none but its values over its span (no conflict)
                    found = [e for e in ours.elements()
                             if e[:3] in keys and first <= e[3] and e[4] <= last]
                    assert len(found) == len(members)
                    assert (min(e[3] for e in found), max(e[4] for e in found)) == (first, last)
                for e in found:
                    assert ours[e] > 0, (stem, name, members, e)
                    ours[e] -= 1
            assert not +ours


def test_a_view_lives_apart_from_its_base() -> None:
    """life_views: exir's single lifetime for ``reshape``'s view and the ``add`` it views
    is two spans here, the add's instruction alone and the view's users."""
    with open(os.path.join(RUNS, "life_views.lifetimes.json")) as f:
        tensors = json.load(f)["forward"]["tensors"]
    (view,) = [t for t in tensors if t["view_of"] is not None]
    base = tensors[view["view_of"]]
    assert view["lifetime"] == base["lifetime"]
    with pfm.load_program(os.path.join(RUNS, "life_views.pte")) as p:
        mp = p.methods["forward"].memory_plan()
    spans = sorted((t.first, t.last) for t in mp.tensors
                   if (t.mem_id, t.offset) == (base["mem_id"], base["mem_offset"]))
    assert len(spans) == 2 and spans[0][1] < spans[1][0]


@pytest.mark.skipif(not HAS_RUNTIME, reason="ExecuTorch is not installed")
def test_exir_exports_them_so_now(tmp_path) -> None:
    """make_et_lifetimes.py, in a child process, writes the committed programs and
    lifetimes again, byte for byte."""
    script = os.path.join(os.path.dirname(os.path.dirname(RUNS)), "make_et_lifetimes.py")
    r = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    for stem in STEMS:
        for ext in (".pte", ".lifetimes.json"):
            with open(os.path.join(RUNS, stem + ext), "rb") as f, \
                    open(tmp_path / (stem + ext), "rb") as g:
                assert f.read() == g.read(), stem + ext
