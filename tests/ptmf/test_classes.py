"""Which attributes state_dict() takes, as the TorchScript sources in a file declare.

Each file here is written with jit sources whose text the test spells out, so the
expected keys follow from that text by TorchScript's rules: a class is a line
``class NAME...:`` at the start of a line, its qualified name is its source's name, a
dot and NAME (the last of a name wins); its declarations are the lines up to its first
method, among them ``  __parameters__ = [...]`` and ``  __buffers__ = [...]``, which
list names in double quotes; a module's parameters come first, then its buffers, each
in slot order, then its submodules. Real files written by torch are checked against
torch in test_models.py and test_zoo.py.
"""
from __future__ import annotations

import random
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from support.ptmf_craft import STORAGE0, NoneV, Obj, Tensor, build


def _module(types: Sequence[Tuple[str, Sequence[str]]], root: Sequence[str],
            sources: Dict[str, str], child_type: int = 1) -> bytes:
    """A root object of type 0 whose attributes ``root`` hold one tensor each, but an
    attribute named ``child``, an object of type ``child_type`` whose attributes hold
    tensors too. ``types`` are (type name, attribute names)."""
    ivs: List[Dict] = [NoneV(), Tensor([2, 3])]
    child_attrs = types[child_type][1] if len(types) > child_type else []
    child = None
    if "child" in root:
        ivs.append(Obj(child_type, [1] * len(child_attrs)))
        child = len(ivs) - 1
    ivs.append(Obj(0, [child if a == "child" else 1 for a in root]))
    return build({"ivalues": ivs, "state_obj": len(ivs) - 1,
                  "storage_data": [STORAGE0.tobytes()], "storage_data_size": 1,
                  "object_types": [{"type_name": name, "type": 1, "attr_names": list(attrs)}
                                   for name, attrs in types],
                  "jit_sources": sources})


def _keys(data: bytes) -> List[str]:
    with pfm.load(data) as m:
        return list(m.state_dict())


def test_lists_in_any_spacing_and_over_several_lines() -> None:
    source = ("class Root(Module):\n"
              "  __parameters__ = [\"b\", ]\n"
              "  __parameters__=[\"a\"]  \n"
              "  __buffers__  =  [\"c\", \"d\", ]\t\n"
              "  a : Tensor\n"
              "  def forward(self):\n"
              "    return None\n")
    data = _module([("__torch__.Root", ["a", "b", "c", "d", "e"])], list("abcde"),
                   {"__torch__": source})
    assert _keys(data) == ["a", "b", "c", "d"]   # parameters, then buffers, in slot order


def test_only_the_declarations_before_the_first_method_count() -> None:
    source = ("class Root(Module):\n"
              "  __parameters__ = [\"a\", ]\n"
              "  def forward(self):\n"
              "  __buffers__ = [\"b\", ]\n"
              "class Other(Module):\n"
              "  __parameters__ = []\n"
              "x = 1\n"
              "  __buffers__ = [\"c\", ]\n")
    data = _module([("__torch__.Root", ["a", "b", "c"])], ["a", "b", "c"],
                   {"__torch__": source})
    assert _keys(data) == ["a"]


def test_a_line_that_is_no_list_line_declares_nothing() -> None:
    source = ("class Root(Module):\n"
              "  __parameters__ = [\"a\", ]\n"
              "  __buffers__ = [\"b\", ] # note\n"
              "  __buffers__x = [\"c\", ]\n"
              "  __buffers__ = \"d\"\n"
              "  __buffers__ = [\"e\\\"\", \"f\", ]\n")
    data = _module([("__torch__.Root", list("abcdef"))], list("abcdef"),
                   {"__torch__": source})
    # "e\"" holds a backslash: not a name; "f" after it is one.
    assert _keys(data) == ["a", "f"]


def test_a_name_in_both_lists_is_a_parameter() -> None:
    source = ("class Root(Module):\n"
              "  __parameters__ = [\"x\", ]\n"
              "  __buffers__ = [\"x\", \"y\", ]\n")
    data = _module([("__torch__.Root", ["y", "x"])], ["y", "x"], {"__torch__": source})
    assert _keys(data) == ["x", "y"]


def test_headers_without_a_colon_and_empty_lists() -> None:
    source = ("class Root(Module): # not a header\n"
              "  __parameters__ = [\"a\", ]\n"
              "class Root(Module):\n"
              "  __parameters__ = []\n"
              "  __buffers__ = []\n")
    data = _module([("__torch__.Root", ["a"])], ["a"], {"__torch__": source})
    # The second header is the class: a module with no tensors of its own.
    assert _keys(data) == []


def test_qualified_names_join_the_source_name_and_the_last_wins() -> None:
    sources = {
        "__torch__.a.b": "class C(Module):\n  __parameters__ = [\"p\", ]\n",
        "__torch__.a": "class b.C(Module):\n  __parameters__ = [\"q\", ]\n"
                       "class B(Module):\n  __parameters__ = [\"child\", ]\n",
        "__torch__.a.bb": "class C(Module):\n  __parameters__ = [\"r\", ]\n",
    }
    types = [("__torch__.a.b.C", ["p", "q", "r", "child"]), ("__torch__.a.B", ["child"])]
    data = _module(types, ["p", "q", "r"], sources)
    # "__torch__.a" + "b.C" names the same class as "__torch__.a.b" + "C": the later.
    assert _keys(data) == ["q"]


def test_submodules_follow_the_tensors_under_their_prefix() -> None:
    sources = {"__torch__": "class Root(Module):\n  __parameters__ = [\"w\", ]\n"
                            "  __buffers__ = [\"m\", ]\n"
                            "class Kid(Module):\n  __parameters__ = [\"k\", ]\n"}
    types = [("__torch__.Root", ["child", "w", "m", "z"]), ("__torch__.Kid", ["k", "j"])]
    data = _module(types, ["child", "w", "m", "z"], sources)
    assert _keys(data) == ["w", "m", "child.k"]


def test_a_type_named_like_no_class_is_no_module() -> None:
    sources = {"__torch__": "class Root(Module):\n  __parameters__ = [\"w\", ]\n"
                            "class Kidd(Module):\n  __parameters__ = [\"k\", ]\n"
                            "class Ki(Module):\n  __parameters__ = [\"k\", ]\n"}
    types = [("__torch__.Root", ["child", "w"]), ("__torch__.Kid", ["k"])]
    data = _module(types, ["child", "w"], sources)
    assert _keys(data) == ["w"]


@pytest.mark.parametrize("seed", range(3))
def test_many_classes_each_found_by_its_own_name(seed: int) -> None:
    """Hundreds of classes with names sharing long prefixes (and one length), in
    shuffled sources: each type finds its own class's lists."""
    rng = random.Random(seed)
    names = [f"__torch__.pkg.mod{k % 7}.Layer{k:04d}" for k in range(300)]
    declared = {n: rng.sample("abcdefgh", rng.randrange(0, 4)) for n in names}
    order = names[:]
    rng.shuffle(order)
    sources: Dict[str, str] = {}
    for n in order:
        module, _, cls = n.rpartition(".")
        listed = "".join(f'"{x}", ' for x in declared[n])
        sources[module] = sources.get(module, "") + (
            f"class {cls}(Module):\n  __parameters__ = [{listed}]\n  __buffers__ = []\n"
            "  def forward(self):\n    return None\n")
    root_type = rng.choice(names)
    types = [(root_type, list("abcdefgh"))]
    data = _module(types, list("abcdefgh"), sources)
    assert _keys(data) == [x for x in "abcdefgh" if x in declared[root_type]]


def test_keys_are_made_from_utf8_names() -> None:
    sources = {"__torch__": "class Root(Module):\n  __parameters__ = [\"wé\", ]\n"
                            "class Kid(Module):\n  __buffers__ = [\"ß\", ]\n"}
    types = [("__torch__.Root", ["child", "wé"]), ("__torch__.Kid", ["ß"])]
    data = _module(types, ["child", "wé"], sources)
    with pfm.load(data) as m:
        sd = m.state_dict()
    assert list(sd) == ["wé", "child.ß"]
    assert all(np.array_equal(v, STORAGE0.reshape(2, 3)) for v in sd.values())
