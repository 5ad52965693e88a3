"""Methods by short name, and reprs of the module's collections that summarize
instead of printing (or decoding) what they hold."""
from __future__ import annotations

import base64
import re

import pytest

import pyflatmodule as pfm

from support import load_expectation, model_path

SAMPLE = model_path("sample.ptl")


def _function_names(name):
    doc, _ = load_expectation(name, "oracle")
    return sorted(doc["info"]["function_names"])


def test_short_method_names_resolve_when_unambiguous():
    m = pfm.load(SAMPLE)
    inputs, _ = load_expectation("sample.ptl", "inputs")
    qualified = inputs["qualified_names"][""]
    for short in inputs["methods"]:
        full = f"{qualified}.{short}"
        for name in (short, qualified.split(".")[-1] + "." + short, full):
            assert full == m.methods[name].name
            assert name in m.methods
            assert full == m.methods.get(name).name
            assert [full] == [f.name for f in m.methods.find(name)]
    assert sorted(m.methods) == _function_names("sample.ptl")   # keys stay qualified


def test_missing_method_names_the_methods_there_are():
    m = pfm.load(SAMPLE)
    with pytest.raises(KeyError) as e:
        m.methods["nosuch"]
    for name in _function_names("sample.ptl"):
        assert name in str(e.value)
    assert "nosuch" not in m.methods
    assert None is m.methods.get("nosuch")
    assert [] == m.methods.find("nosuch")
    assert [] == m.methods.find("ward")   # a suffix only counts after a dot


def test_ambiguous_method_name_names_the_candidates():
    a, b = pfm.load(SAMPLE), pfm.load(model_path("setstate.ff"))
    both = pfm.Methods(list(a.methods.values()) + list(b.methods.values()))
    forwards = sorted(n for n in _function_names("sample.ptl") + _function_names("setstate.ff")
                      if n.endswith(".forward"))
    assert 2 == len(forwards)
    with pytest.raises(KeyError, match="ambiguous") as e:
        both["forward"]
    assert all(n in str(e.value) for n in forwards)
    assert "forward" not in both
    assert forwards == sorted(f.name for f in both.find("forward"))


def _summary(text):
    """(what, count, shown) of a ``<What: N units: a, b, ... and K more>`` repr."""
    found = re.fullmatch(r"<(.+?): ([\d,]+) \w+(?:: (.*))?>", text)
    assert found, text
    return found.group(1), int(found.group(2).replace(",", "")), found.group(3) or ""


def test_collection_reprs_count_and_name_a_few():
    m = pfm.load(SAMPLE)
    inputs, _ = load_expectation("sample.ptl", "inputs")
    doc, _ = load_expectation("sample.ptl", "oracle")
    extra = {k: len(base64.b64decode(v)) for k, v in inputs["extra_files"].items()}
    sources_text = "".join(m.jit_sources.values())
    cases = [
        (m.methods, "Methods", _function_names("sample.ptl")),
        (m.extra_files, "ExtraFiles", [f"{k} ({n:,} bytes)" for k, n in extra.items()]),
        (m.root.attributes, "AttributeMap of " + inputs["qualified_names"][""],
         list(doc["attributes"]["attrs"])),
    ]
    for value, what, names in cases:
        text = repr(value)
        assert (what, len(names)) == _summary(text)[:2]
        shown = _summary(text)[2]
        assert all(n in shown for n in names[:5]), text
        assert len(text) < 300
    for value, what in ((m.jit_sources, "JitSources"), (m.storages, "Storages"),
                        (m.object_types, "ObjectTypes")):
        assert (what, len(value)) == _summary(repr(value))[:2]
        assert len(repr(value)) < 500
    assert sources_text[:40] not in repr(m.jit_sources)


def test_ivalues_repr_counts_kinds_without_decoding():
    m = pfm.load(SAMPLE)
    text = repr(m.ivalues)
    n = len(m.ivalues)
    found = re.fullmatch(r"<IValues: ([\d,]+) values: (.*)>", text)
    assert found, text
    assert n == int(found.group(1))
    counts = [int(part.split()[0]) for part in found.group(2).split(", ")]
    assert n == sum(counts)
    doc, _ = load_expectation("sample.ptl", "oracle")
    assert f"{len(doc['state_dict']['keys'])} TensorMetadata" in text
