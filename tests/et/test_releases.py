"""A file from every ExecuTorch release, read as its writer said it is.

tests/data/releases/<release>/ holds what that release wrote (tests/data/make_releases.py,
each release in its own environment) and its answers: its runtime's methods and their
inputs' and outputs' scalar types and sizes, the exported module's weights, and for the
data file (from 0.6.0) each external tensor's key, layout and bytes as the writer emitted
them. Every file opens with the default options and fully verified, its answers match,
and its minimum runtime is never newer than the release that wrote it. 0.6.0 wrote its
data files in a layout of its own (csrc/schemas/executorch_flat_tensor_0_6.fbs), told
apart from the later one by the root table's fields.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch.minimum_runtime import release_key

from support.cli import run_cli
from support.fbwalk import deref, element, field, root
from support.paths import RELEASES
from support.runtime import HAS_RUNTIME, runtime_verdicts

#: c10's ScalarType numbers of the dtypes these files hold (torch's names).
SCALAR_TYPES = {6: "float32"}


def _releases() -> List[str]:
    return sorted((r for r in os.listdir(RELEASES)
                   if os.path.exists(os.path.join(RELEASES, r, "answers.json"))),
                  key=release_key)


def _answers(release: str) -> Dict[str, Any]:
    with open(os.path.join(RELEASES, release, "answers.json"), encoding="utf-8") as f:
        return dict(json.load(f))


def _arrays(release: str) -> Dict[str, np.ndarray]:
    with np.load(os.path.join(RELEASES, release, "answers.npz")) as z:
        return {k: z[k] for k in z.files}


def _files(suffix: str) -> List[Tuple[str, str]]:
    return [(r, name) for r in _releases()
            for name, entry in sorted(_answers(r)["files"].items())
            if name.endswith(suffix) and "error" not in entry]


PROGRAMS = _files(".pte")
DATA_FILES = _files(".ptd")


def _path(release: str, name: str) -> str:
    return os.path.join(RELEASES, release, name)


def _data_for(release: str, name: str) -> List[str]:
    """The data file a program's external constants are in (its writer wrote it)."""
    ptd = name[:-4] + ".ptd"
    return [_path(release, ptd)] if (release, ptd) in DATA_FILES else []


def _open(release: str, name: str, **options: Any) -> Any:
    data = _data_for(release, name) if name.endswith(".pte") else []
    return pfm.load(_path(release, name), data=data, **options) if data else \
        pfm.load(_path(release, name), **options)


def test_each_folder_is_its_writers() -> None:
    """The folders are named by the release that wrote them, and 0.6.0, whose data file
    layout is read by a schema of its own, is among them."""
    assert "0.6.0" in _releases()
    for release in _releases():
        assert _answers(release)["writer"]["executorch"].split("+")[0] == release


@pytest.mark.parametrize("verify", [None, "full"])
@pytest.mark.parametrize("release,name", PROGRAMS, ids=[f"{r}/{n}" for r, n in PROGRAMS])
def test_program_reads_as_its_writer_says(release: str, name: str,
                                          verify: Optional[str]) -> None:
    """Methods and their inputs' and outputs' dtypes and shapes as the writer emitted
    them and as its runtime gave them (where it could load the program)."""
    entry = _answers(release)["files"][name]
    ran = entry["runtime"]
    answers = [entry["emitted"]] + ([ran] if "error" not in ran else [])
    with (_open(release, name, verify=verify) if verify else _open(release, name)) as p:
        method = p.methods["forward"]
        for answer in answers:
            assert sorted(p.methods) == answer["methods"]
            for metas, expected in ((method.input_meta, answer["inputs"]),
                                    (method.output_meta, answer["outputs"])):
                assert [(m.kind, m.dtype, list(m.shape or ())) for m in metas] == \
                    [("Tensor", SCALAR_TYPES[e["scalar_type"]], e["sizes"])
                     for e in expected]


def _tensors(p: Any) -> List[np.ndarray]:
    """Every tensor the program holds, wherever it keeps it: its constants, its data
    file's tensors, its delegates' constants."""
    out = [a for _, _, a in p.constants()]
    out += [np.asarray(a) for a in p.state_dict().values()]
    return out


@pytest.mark.parametrize("release,name", PROGRAMS, ids=[f"{r}/{n}" for r, n in PROGRAMS])
def test_weights_are_the_exported_modules_byte_for_byte(release: str, name: str) -> None:
    arrays = _arrays(release)
    weights = {k.rsplit("/", 1)[1]: v for k, v in arrays.items()
               if k.startswith(f"{name}/weight/")}
    assert sorted(weights) == _answers(release)["files"][name]["weights"]
    with _open(release, name, verify="full") as p:
        held = _tensors(p)
        for key, w in weights.items():
            assert any(a.dtype == w.dtype and a.shape == w.shape and
                       a.tobytes() == w.tobytes() for a in held), key
        if _data_for(release, name):   # external constants: by their names too
            state = p.state_dict()
            for key, w in weights.items():
                assert np.asarray(state[key]).tobytes() == w.tobytes(), key


@pytest.mark.parametrize("release,name", DATA_FILES, ids=[f"{r}/{n}" for r, n in DATA_FILES])
@pytest.mark.parametrize("verify", [None, "full"])
def test_data_file_holds_what_its_writer_emitted(release: str, name: str,
                                                 verify: Optional[str]) -> None:
    """Keys, dtypes, shapes and bytes of the external tensors as the writer emitted
    them."""
    expected = _answers(release)["files"][name]["data"]
    arrays = _arrays(release)
    with (pfm.load(_path(release, name), verify=verify) if verify
          else pfm.load(_path(release, name))) as d:
        assert isinstance(d, pfm.DataFile)
        layouts = d.tensor_layouts()
        assert sorted(layouts) == sorted(expected)
        for key, e in expected.items():
            a = d.tensors[key]
            assert (a.dtype.name, list(a.shape), a.nbytes) == \
                (SCALAR_TYPES[e["scalar_type"]], e["sizes"], e["nbytes"])
            assert a.tobytes() == arrays[f"{name}/data/{key}"].tobytes(), key


@pytest.mark.parametrize("release,name", DATA_FILES, ids=[f"{r}/{n}" for r, n in DATA_FILES])
def test_data_file_layout_is_told_by_the_roots_fields(release: str, name: str) -> None:
    """0.6.0's root table has fields 3 and 4 (segments, named_data after tensors); the
    later root has three fields. The layout read is 0.6.0's exactly for its writer."""
    with open(_path(release, name), "rb") as f:
        data = f.read()
    old = bool(field(data, root(data), 3) or field(data, root(data), 4))
    assert old == (release == "0.6.0")
    with pfm.load(_path(release, name), verify="full") as d:
        assert d.layout == ("0.6.0" if old else "0.7.0")
        assert d.info()["layout"] == d.layout
        assert d.info()["tensors"] == len(_answers(release)["files"][name]["data"])


@pytest.mark.parametrize("release,name", PROGRAMS + DATA_FILES,
                         ids=[f"{r}/{n}" for r, n in PROGRAMS + DATA_FILES])
def test_minimum_runtime_is_never_newer_than_the_writer(release: str, name: str) -> None:
    with _open(release, name, verify="full") as f:
        assert release_key(f.minimum_runtime.release) <= release_key(release), \
            str(f.minimum_runtime)
        if isinstance(f, pfm.DataFile) and f.layout == "0.6.0":
            assert f.minimum_runtime.release == "0.6.0"


def test_info_says_which_layout() -> None:
    old, new = _path("0.6.0", "mlp_external.ptd"), _path("1.4.1", "mlp_external.ptd")
    r = run_cli("info", old, new)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "tensors:" in line]
    assert len(lines) == 2
    assert lines[0].endswith("layout: ExecuTorch 0.6.0's") and "layout" not in lines[1]


def _old_data_file() -> bytes:
    with open(_path("0.6.0", "mlp_external.ptd"), "rb") as f:
        return f.read()


def _edited(data: bytes, field_id: int, fmt: str, value: int, element_of: bool
            ) -> Tuple[bytes, int]:
    """The 0.6.0 data file with field ``field_id`` (or, ``element_of``, the first element
    of that vector field) of its first tensor (TensorMetadata, found by the bytes' own
    offsets) that has the field set to ``value``, and that tensor's index."""
    for i in range(4):
        at = field(data, element(data, root(data), 2, i), field_id)
        if at:
            break
    assert at, "the writer wrote the field"
    out = bytearray(data)
    struct.pack_into(fmt, out, deref(data, at) + 4 if element_of else at, value)
    return bytes(out), i


@pytest.mark.parametrize("field_id,fmt,value,element_of,code", [
    (5, "<Q", 1 << 40, False, "outside_storage"),    # the offset: past its segment
    (1, "<b", 99, False, "bad_scalar_type"),          # no such scalar type
    (2, "<i", -1, True, "negative_dimension"),        # a size below 0
])
def test_a_bad_tensor_of_the_old_layout_is_a_located_error(field_id: int, fmt: str,
                                                           value: int, element_of: bool,
                                                           code: str) -> None:
    bad, i = _edited(_old_data_file(), field_id, fmt, value, element_of)
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(bad, verify="full")
    assert e.value.code == code
    assert e.value.path.startswith(f"tensors[{i}]"), e.value.path


@pytest.mark.skipif(not HAS_RUNTIME, reason="ExecuTorch's runtime is not installed")
def test_the_current_runtime_does_not_read_the_old_layout() -> None:
    """Why 0.6.0's layout needs its own schema: a later runtime (live: the installed
    one) reads its root as the later FlatTensor and finds no tensor where 0.6.0's
    runtime did."""
    with open(_path("0.6.0", "mlp_external.pte"), "rb") as f:
        program = f.read()
    verdicts = runtime_verdicts([(program, _old_data_file())], levels=("Minimal",))
    assert verdicts[0]["verdict"] == "refused", verdicts
