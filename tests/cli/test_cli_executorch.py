"""The command line on ExecuTorch programs and data files, against ExecuTorch's answers.

Expected values come from the oracles beside each file in tests/data/et/ (ExecuTorch's own
flatbuffer reader, ``deserialize_pte_binary`` and the exported module's weights) or from
the file's bytes; the commands run in-process through ``pyflatmodule.cli.main``.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from support import run_cli
from support.paths import ET

PROGRAMS = sorted(f[:-4] for f in os.listdir(ET) if f.endswith(".pte"))


def _oracle(stem: str) -> Tuple[Dict[str, Any], Any]:
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    return doc, np.load(os.path.join(ET, stem + ".oracle.npz"))


def _pte(stem: str) -> str:
    return os.path.join(ET, stem + ".pte")


def _json(*argv: str) -> Any:
    r = run_cli(*argv, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _one(*argv: str) -> Any:
    """The one file's entry of ``--json`` (``{"files": [FILE]}``)."""
    (doc,) = _json(*argv)["files"]
    return doc


@pytest.mark.parametrize("stem", PROGRAMS)
def test_info_lists_executorchs_methods_and_operators(stem: str) -> None:
    doc, _ = _oracle(stem)
    (s,) = _json("info", _pte(stem))["files"]
    assert s["format"] == "pte"
    plans = doc["program"]["execution_plan"]
    assert [m["name"] for m in s["methods"]] == [p["name"] for p in plans]
    for got, want in zip(s["methods"], plans):
        assert got["values"] == len(want["values"])
        assert got["inputs"] == want["inputs"] and got["outputs"] == want["outputs"]
        assert got["operators"] == [f"{n}.{o}" if o else n for n, o in want["operators"]]
        assert got["instructions"] == sum(len(c["instructions"]) for c in want["chains"])
        assert got["delegates"] == [d["id"] for d in want["delegates"]]
    text = run_cli("info", _pte(stem))
    assert text.returncode == 0 and "ExecuTorch program" in text.stdout


@pytest.mark.parametrize("stem", PROGRAMS)
def test_dis_gives_every_instruction_with_its_operator(stem: str) -> None:
    doc, _ = _oracle(stem)
    d = _one("dis", _pte(stem))
    for got, want in zip(d["methods"], doc["program"]["execution_plan"]):
        assert [[i["op"] for i in c["instructions"]] for c in got["chains"]] == \
            [c["instructions"] for c in want["chains"]]
        names = [f"{n}.{o}" if o else n for n, o in want["operators"]]
        for c in got["chains"]:
            for ins in c["instructions"]:
                if ins["op"] == "KernelCall":
                    assert ins["target"] == names[ins["op_index"]]
                    assert ins["operands"] == ins["args"]
                    for v in ins["values"]:
                        kind = want["values"][v["index"]]["kind"]
                        assert v["text"].split()[0] in (
                            ("const", "planned", "input", "external") if kind == "Tensor"
                            else ("None",) if kind == "Null" else (kind,))
    assert run_cli("dis", _pte(stem)).returncode == 0


def test_dis_of_a_missing_method_names_the_methods() -> None:
    r = run_cli("dis", _pte("two_methods"), "backward")
    assert r.returncode == 1
    assert "'backward'" in r.stderr and "first_layer, forward" in r.stderr


def test_ops_is_the_union_of_the_programs_kernel_operators() -> None:
    want = set()
    for stem in ("mlp", "sample"):
        doc, _ = _oracle(stem)
        want |= {f"{n}.{o}" if o else n for p in doc["program"]["execution_plan"]
                 for n, o in p["operators"]}
    r = run_cli("ops", _pte("mlp"), _pte("sample"))
    assert r.returncode == 0 and r.stdout.split() == sorted(want)
    assert _json("ops", _pte("mlp"))["operators"] == sorted(
        f"{n}.{o}" for n, o in _oracle("mlp")[0]["program"]["execution_plan"][0]["operators"])


def test_verify_accepts_both_formats_and_names_the_bad_one(tmp_path: Any) -> None:
    bad = tmp_path / "bad.pte"
    raw = bytearray(open(_pte("mlp"), "rb").read())
    raw[32:40] = len(raw).to_bytes(8, "little")   # segment data past the end of the file
    bad.write_bytes(bytes(raw))
    r = run_cli("verify", _pte("mlp"), os.path.join(ET, "external.ptd"), str(bad))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert "OK" in lines[0] and "ExecuTorch program" in lines[0]
    assert "OK" in lines[1] and "ExecuTorch data file" in lines[1]
    assert "INVALID [bad_header]" in lines[2] and "at header" in lines[2]
    r = run_cli("verify", "--json", str(tmp_path))   # a directory: its .pte/.ptd files
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["invalid"] == 1
    assert doc["files"][0]["error"]["code"] == "bad_header"


def test_tree_shows_values_and_filters_by_path() -> None:
    doc, _ = _oracle("two_methods")
    t = _one("tree", _pte("two_methods"))["root"]
    methods = {m["name"]: m for m in t["children"] if m["kind"] == "method"}
    for plan in doc["program"]["execution_plan"]:
        values = next(c for c in methods[plan["name"]]["children"] if c["name"] == "values")
        assert [v["kind"] for v in values["children"]] == [v["kind"] for v in plan["values"]]
    pruned = _one("tree", _pte("two_methods"), "--filter", "first_layer.values[0]")["root"]
    (method,) = pruned["children"]
    (values,) = method["children"]
    assert [v["path"] for v in values["children"]] == ["first_layer.values[0]"]


def _xnn_graphs(doc: Dict[str, Any]) -> Dict[str, Any]:
    """ExecuTorch's decoding of each XNNPACK payload (its flatc), by ``METHOD.delegates[I]``."""
    plans = doc["program"]["execution_plan"]
    where = [f"{plan['name']}.delegates[{k}]" for plan in plans
             for k in range(len(plan["delegates"]))]
    return {w: d["graph"] for w, d in zip(where, doc["xnnpack"]["delegates"])}


@pytest.mark.parametrize("stem", ["xnn_q8_per_channel", "xnn_q4_group", "xnn_attention"])
def test_tree_lists_each_weight_once_under_its_delegates_graph(stem: str) -> None:
    """Under each XNNPACK delegate: its graph's node kinds, values, inputs and outputs as
    ExecuTorch's flatc decodes them, then its weights, each with the named data keys of
    its bytes and its scales; no weight and no named data key appears a second time."""
    doc, _ = _oracle(stem)
    root = _one("tree", _pte(stem))["root"]
    delegates = {d["path"]: d for m in root["children"] if m["kind"] == "method"
                 for d in m["children"] if d["kind"] == "delegate"}
    graphs = _xnn_graphs(doc)
    assert set(delegates) == set(graphs)
    listed = []
    for path, want in graphs.items():
        summary, *weights = delegates[path]["children"]
        kinds = [n["xnode_union_type"] for n in want["xnodes"]]
        assert summary["kind"] == "xnnpack_graph"
        assert summary["node_kinds"] == {k: kinds.count(k) for k in sorted(set(kinds))}
        assert (summary["nodes"], summary["values"]) == (len(kinds), len(want["xvalues"]))
        assert (summary["inputs"], summary["outputs"]) == (want["input_ids"], want["output_ids"])
        keys = [c["named_key"] for c in want["constant_data"]]
        expected = {}
        for xv in want["xvalues"]:
            union = xv["xvalue_union"]
            tensor = union.get("tensor_value", union)
            if tensor["constant_buffer_idx"]:
                scales = (union.get("quant_params") or {}).get("scale_buffer_idx")
                expected[f"{path}.values[{tensor['id_out']}]"] = (
                    keys[tensor["constant_buffer_idx"]] or None,
                    keys[scales] or None if scales else None)
        assert {w["path"]: (w["named_data"], w["scales_named_data"]) for w in weights} == expected
        assert summary["constants"] == len(weights)
        listed += [w["path"] for w in weights]
        listed += [k for w in weights for k in (w["named_data"], w["scales_named_data"]) if k]
    top = [c["path"] for c in root["children"] if c["kind"] in ("tensor", "named_data")]
    assert not set(top) & set(listed) and len(listed) == len(set(listed))
    assert set(top) | set(listed) >= {key for key, _ in doc["program"]["named_data"]}


def test_export_writes_the_external_tensors_by_name(tmp_path: Any) -> None:
    doc, arrays = _oracle("external")
    out = tmp_path / "w.npz"
    r = run_cli("export", _pte("external"), str(out), "--data",
                os.path.join(ET, "external.ptd"))
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        assert sorted(set(z.files) - {"__metadata__"}) == sorted(doc["weights"])
        for name, w in doc["weights"].items():
            want = np.frombuffer(arrays[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])
            np.testing.assert_array_equal(z[name], want)


def test_export_names_a_programs_constants_by_place(tmp_path: Any) -> None:
    doc, arrays = _oracle("mlp")
    out = tmp_path / "w.npz"
    assert run_cli("export", _pte("mlp"), str(out)).returncode == 0
    values = doc["program"]["execution_plan"][0]["values"]
    buffers = doc["restored"]["constant_buffer"]
    with np.load(out) as z:
        want = [i for i, v in enumerate(values) if v["kind"] == "Tensor"
                and v["data_buffer_idx"] > 0 and v["allocation"] is None]
        assert sorted(set(z.files) - {"__metadata__"}) == sorted(
            f"forward.values[{i}]" for i in want)
        for i in want:
            raw = arrays[buffers[values[i]["data_buffer_idx"]]].tobytes()
            assert z[f"forward.values[{i}]"].tobytes() == raw[:z[f"forward.values[{i}]"].nbytes]


def test_export_describes_grouped_weights(tmp_path: Any) -> None:
    """4-bit weights quantized per channel group: the integers with the group size in the
    metadata, and their scales (by channel, then group) and zero points beside them, as
    tensors in the file's dtypes."""
    import pyflatmodule as pfm
    from pyflatmodule import QuantizedTensor
    out = tmp_path / "w.npz"
    r = run_cli("export", _pte("xnn_q4_group"), str(out))
    assert r.returncode == 0, r.stderr
    with pfm.load(_pte("xnn_q4_group")) as p:
        grouped = {k: v for k, v in p.named_tensors().items()
                   if isinstance(v, QuantizedTensor) and v.group_size is not None}
        assert grouped
        with np.load(out) as z:
            meta = json.loads(str(z["__metadata__"]))["tensors"]
            for name, q in grouped.items():
                assert z[name].tobytes() == q.int_repr.tobytes()
                info = meta[name]
                assert (info["qscheme"], info["axis"], info["group_size"]) == (
                    q.qscheme, q.axis, q.group_size)
                for role, array in (("scales", q.scales), ("zero_points", q.zero_points)):
                    assert info[role] == f"{name}:{role}"
                    assert meta[info[role]][f"{role}_of"] == name
                    assert z[info[role]].shape == np.asarray(array).shape
                    assert z[info[role]].tobytes() == np.asarray(array).tobytes()


def test_export_data_is_for_programs_only(tmp_path: Any) -> None:
    ptd = os.path.join(ET, "external.ptd")
    r = run_cli("export", ptd, str(tmp_path / "w.npz"), "--data", ptd)
    assert r.returncode == 2 and "--data" in r.stderr
    r = run_cli("export", _pte("external"), str(tmp_path / "w.npz"), "--data", _pte("mlp"))
    assert r.returncode == 1 and "is an ExecuTorch program (.pte), not a data file" in r.stderr


def test_extract_named_data_and_delegate_payloads() -> None:
    doc, arrays = _oracle("xnnpack")
    for key, ref in doc["restored"]["named_data"].items():
        r = run_cli("extract", _pte("xnnpack"), key)
        assert r.returncode == 0 and r.stdout_bytes == arrays[ref].tobytes()
    # the delegate's payload: its segment, where ExecuTorch's reader says it is
    (delegate,) = doc["program"]["execution_plan"][0]["delegates"]
    offset, size = doc["program"]["segments"][delegate["index"]]
    raw = open(_pte("xnnpack"), "rb").read()
    start = doc["header"]["segment_base_offset"] + offset
    r = run_cli("extract", _pte("xnnpack"), "forward.delegates[0]")
    assert r.returncode == 0 and r.stdout_bytes == raw[start:start + size]
    r = run_cli("extract", _pte("xnnpack"), "forward.delegates[1]")
    assert r.returncode == 1 and "forward.delegates[0]" in r.stderr


def test_a_data_file_has_nothing_to_disassemble() -> None:
    r = run_cli("dis", os.path.join(ET, "external.ptd"))
    assert r.returncode == 1 and r.stdout == "" and "nothing to disassemble" in r.stderr


@pytest.mark.parametrize("command", ["tree", "info", "dis", "ops"])
def test_json_is_strict_with_a_non_finite_double(command: str) -> None:
    """xnn_attention.pte holds a Double -inf (exir's reading: values[49]); JSON has no
    such number, so it is written as the string "-inf", never as bare -Infinity."""
    doc, _ = _oracle("xnn_attention")
    assert doc["program"]["execution_plan"][0]["values"][49] == {"kind": "Double",
                                                                  "value": "-inf"}
    r = run_cli(command, _pte("xnn_attention"), "--json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    if command == "tree":
        assert '"-inf"' in r.stdout


def test_dis_shows_each_xnnpack_graph_as_exir_reads_it() -> None:
    """Under each DelegateCall: the delegate's XNNPACK nodes (kind, value ids read and
    written) and each value's datatype and dims, as ExecuTorch's XNNPACK deserializer
    reads the payload (xnn_conv.oracle.json's "xnnpack")."""
    doc, _ = _oracle("xnn_conv")
    r = run_cli("dis", _pte("xnn_conv"), "--json")
    assert r.returncode == 0, r.stderr
    (method,) = json.loads(r.stdout)["files"][0]["methods"]
    graphs = [ins["graph"] for c in method["chains"] for ins in c["instructions"]
              if ins["op"] == "DelegateCall"]
    expected = doc["xnnpack"]["delegates"]
    assert len(graphs) == len(expected) == 2
    for got, want in zip(graphs, expected):
        g = want["graph"]
        assert [n["kind"] for n in got["nodes"]] == [n["xnode_union_type"] for n in g["xnodes"]]
        for n, w in zip(got["nodes"], g["xnodes"]):
            ids = {k: v for k, v in w["xnode_union"].items() if k.endswith("_id")}
            assert n["outputs"] == [v for k, v in ids.items() if k.startswith("output")]
            assert sorted(n["inputs"]) == sorted(v for k, v in ids.items()
                                                 if not k.startswith("output")
                                                 and v != 0xFFFFFFFF)
        by_id = {v["xvalue_union"]["id_out"]: v["xvalue_union"] for v in g["xvalues"]}
        for v in got["values"]:
            assert v["dims"] == by_id[v["id"]]["dims"]
            assert "xnn_datatype_" + v["datatype"] == by_id[v["id"]]["datatype"]
            assert v["constant"] == (by_id[v["id"]]["constant_buffer_idx"] != 0)
    text = run_cli("dis", _pte("xnn_conv")).stdout
    for n in expected[0]["graph"]["xnodes"]:
        assert n["xnode_union_type"] in text


def test_dis_shows_jump_targets_and_stack_traces() -> None:
    """cond_stacktrace.pte (torch.cond, exported with stack traces): each JumpFalseCall's
    destination and each instruction's innermost frame, as exir reads the chain."""
    doc, _ = _oracle("cond_stacktrace")
    chain = doc["program"]["execution_plan"][0]["chains"][0]
    r = run_cli("dis", _pte("cond_stacktrace"), "--json")
    (method,) = json.loads(r.stdout)["files"][0]["methods"]
    code = method["chains"][0]["instructions"]
    jumps = [i for i in code if i["op"] == "JumpFalseCall"]
    assert jumps and all(i["jump_to"] == i["destination_instruction"] for i in jumps)
    for ins, frames in zip(code, chain["stacktrace"]):
        assert [[f["filename"], f["lineno"], f["name"], f["context"]]
                for f in ins.get("stack", [])] == frames
    text = run_cli("dis", _pte("cond_stacktrace")).stdout
    for ins in jumps:
        assert f"-> pc {ins['destination_instruction']}" in text
    top = chain["stacktrace"][0][-1]
    assert f"# {top[0]}:{top[1]} in {top[2]}" in text


def test_dis_of_a_method_without_inputs() -> None:
    doc, _ = _oracle("two_methods")
    plans = {p["name"]: p for p in doc["program"]["execution_plan"]}
    text = run_cli("dis", _pte("two_methods")).stdout
    for name, plan in plans.items():
        ins = ", ".join(f"%{i}" for i in plan["inputs"])
        assert f"method {name}({ins}) -> (" in text


def test_ops_lists_what_the_delegates_run() -> None:
    """--delegates adds each XNNPACK graph's node kinds, as ExecuTorch's XNNPACK
    deserializer reads them; a program whose every kernel is delegated says so."""
    doc, _ = _oracle("xnn_conv")
    kinds = {f"XnnpackBackend::{n['xnode_union_type']}" for d in doc["xnnpack"]["delegates"]
             for n in d["graph"]["xnodes"]}
    kernels = {f"{name}.{overload}" if overload else name
               for name, overload in doc["program"]["execution_plan"][0]["operators"]}
    r = run_cli("ops", "--delegates", _pte("xnn_conv"))
    assert r.returncode == 0 and set(r.stdout.split()) == kinds | kernels
    assert set(run_cli("ops", _pte("xnn_conv")).stdout.split()) == kernels
    r = run_cli("ops", _pte("xnnpack"))
    assert r.returncode == 0 and r.stdout == "" and "calls no kernel operator" in r.stderr


def _native_calls(stem: str) -> List[Tuple[Dict[str, Any], List[Any]]]:
    """Each native delegate's operator calls as ExecuTorch reads the payload
    (``native``'s deserialize_program): target and the names of what it reads and writes."""
    doc, _ = _oracle(stem)
    out = []
    for d in doc["native"]["delegates"]:
        (method,) = d["program"]["methods"]
        calls = []
        for n in method["graph"]["nodes"]:
            if n["op_kind"] == 0:   # CALL_FUNCTION
                reads = [a["arg"]["value"]["name"] for a in n["inputs"]
                         if a["arg"]["value_type"] == "TensorArg"]
                calls.append((n["target"], reads, [o["name"] for o in n["outputs"]]))
        out.append((method, calls))
    return out


def test_dis_shows_each_native_graph_as_exir_reads_it() -> None:
    """Under each DelegateCall of native_partial (two native delegates around a portable
    bucketize): the operator calls in order, the values they read and write (by name in
    the payload, here by the id dis gives each), each value's datatype and dims, and each
    constant's tensor by the name torch's ``state_dict()`` gives it (its data key)."""
    expected = _native_calls("native_partial")
    weights = _oracle("native_partial")[0]["weights"]
    (method,) = _one("dis", _pte("native_partial"))["methods"]
    graphs = [ins["graph"] for c in method["chains"] for ins in c["instructions"]
              if ins["op"] == "DelegateCall"]
    assert len(graphs) == len(expected) == 2
    for got, (m, calls) in zip(graphs, expected):
        metas = {t["name"]: t["meta"] for t in m["graph"]["tensor_values"]}
        metas.update({c["name"]: c["meta"] for c in m["constants"]})
        assert [n["kind"] for n in got["nodes"]] == [t for t, _, _ in calls]
        by_id = {v["id"]: v for v in got["values"]}
        names: Dict[int, str] = {}
        for n, (_, reads, writes) in zip(got["nodes"], calls):
            for i, name in zip(n["inputs"] + n["outputs"], reads + writes):
                assert names.setdefault(i, name) == name
        for i, name in names.items():
            assert by_id[i]["dims"] == [s["max"] for s in metas[name]["sizes"]]
            assert by_id[i]["constant"] == (name in {c["name"] for c in m["constants"]})
        for c in m["constants"]:
            (i,) = [i for i, name in names.items() if name == c["name"]]
            assert by_id[i]["tensor"] == c["data_key"] and c["data_key"] in weights
    text = run_cli("dis", _pte("native_partial")).stdout
    assert "ExecuTorch native graph" in text
    for _, calls in expected:
        for target, _, _ in calls:
            assert target in text


def test_ops_size_and_tree_show_the_native_graphs() -> None:
    """ops --delegates adds each native graph's operators (their targets, as ExecuTorch
    reads the payloads) to the program's kernels; size lists each native payload at
    ExecuTorch's size; tree --json gives each graph's node kinds and its weights' bytes
    (the named data ExecuTorch restores for their keys)."""
    doc, arrays = _oracle("native_partial")
    calls = _native_calls("native_partial")
    kinds = {f"NativeBackend::{t}" for _, c in calls for t, _, _ in c}
    kernels = {f"{name}.{overload}" if overload else name
               for name, overload in doc["program"]["execution_plan"][0]["operators"]}
    r = run_cli("ops", "--delegates", _pte("native_partial"))
    assert r.returncode == 0 and set(r.stdout.split()) == kinds | kernels
    size = _one("size", _pte("native_partial"))
    assert [(d["id"], d["size"]) for d in size["delegates"]] == \
        [("NativeBackend", d["payload_size"]) for d in doc["native"]["delegates"]]
    tree = _one("tree", _pte("native_partial"))
    found = []

    def walk(node: Dict[str, Any]) -> None:
        if node.get("kind") == "native_graph":
            found.append(node)
        for child in node.get("children", []):
            walk(child)
    walk(tree["root"])
    named = doc["restored"]["named_data"]
    assert len(found) == len(calls)
    for node, (m, c) in zip(found, calls):
        assert node["node_kinds"] == dict(Counter(t for t, _, _ in c))
        assert node["constant_bytes"] == sum(arrays[named[k["data_key"]]].size
                                             for k in m["constants"])


def test_export_writes_the_native_graphs_weights(tmp_path: Any) -> None:
    """export gives each native graph's constant its bytes, those ExecuTorch restores for
    its named data key, under the name torch's ``state_dict()`` gives the module's
    tensor (the oracle's ``weights``), with its values."""
    doc, arrays = _oracle("native_mlp")
    out = tmp_path / "w.npz"
    assert run_cli("export", _pte("native_mlp"), str(out)).returncode == 0
    (method,) = doc["native"]["delegates"][0]["program"]["methods"]
    got = np.load(out)
    named = doc["restored"]["named_data"]
    assert sorted(k for k in got.files if k != "__metadata__") == sorted(doc["weights"])
    for c in method["constants"]:
        exported = got[c["data_key"]].tobytes()
        assert exported == arrays[named[c["data_key"]]].tobytes()
        assert exported == arrays[doc["weights"][c["data_key"]]["data"]].tobytes()
