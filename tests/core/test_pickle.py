"""A Module crosses process boundaries as its path: multiprocessing "spawn" workers,
Ray or Dask take it pickled, and re-open, re-verify and identify the same file."""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import shutil
from typing import Dict

import numpy as np
import pytest

import pyflatmodule as pfm

from support import load_expectation, model_path
from support.paths import ET

NAME = "mlp_jit.ff"


def _oracle_bytes(name: str) -> Dict[str, bytes]:
    doc, arrays = load_expectation(name, "oracle")
    return {key: arrays[t["data"]].tobytes() for key, t in doc["state_dict"]["tensors"].items()}


def _bytes(weights) -> Dict[str, bytes]:
    return {k: np.ascontiguousarray(v).tobytes() for k, v in weights.items()}


def test_spawn_worker_reads_the_pickled_module():
    # The worker runs a library function: it imports nothing from the test suite.
    with pfm.load(model_path(NAME)) as m:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            theirs = pool.apply_async(pfm.Module.state_dict, (m,)).get(timeout=120)
        mine = m.state_dict()
    expected = _oracle_bytes(NAME)
    assert list(expected) == list(theirs)
    assert expected == _bytes(theirs)
    assert [(v.dtype, v.shape) for v in mine.values()] == [
        (v.dtype, v.shape) for v in theirs.values()]


def test_unpickled_module_keeps_load_options(tmp_path):
    path = tmp_path / NAME
    shutil.copyfile(model_path(NAME), path)
    m = pfm.load(str(path), verify=False, copy=True, max_depth=50)
    again = pickle.loads(pickle.dumps(m))
    assert m._load_args == again._load_args
    assert {"verify": False, "copy": True, "max_depth": 50}.items() <= again._load_args.items()
    os.unlink(path)   # copy=True: the first module holds its own bytes
    assert _oracle_bytes(NAME) == _bytes(m.state_dict())


@pytest.mark.parametrize("change", ["replaced", "touched", "grown"])
def test_unpickling_a_changed_file_names_what_changed(tmp_path, change):
    path = tmp_path / NAME
    shutil.copyfile(model_path(NAME), path)
    m = pfm.load(str(path))
    data = pickle.dumps(m)
    st = os.stat(path)
    if change == "replaced":
        shutil.copyfile(model_path(NAME), tmp_path / "new")
        os.replace(tmp_path / "new", path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        what = "inode"
    elif change == "touched":
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        what = "mtime_ns"
    else:
        with open(path, "ab") as f:
            f.write(b"\0" * 8)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        what = "size"
    with pytest.raises(OSError, match=f"not the file the pickled .*{what}"):
        pickle.loads(data)


def test_unpickling_verifies_the_file_again(tmp_path):
    # Same size, mtime and inode, but bytes changed in place: the verifier sees it.
    path = tmp_path / NAME
    shutil.copyfile(model_path(NAME), path)
    data = pickle.dumps(pfm.load(str(path)))
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(b"XXXX")   # the file identifier, "PTMF" in every torch file
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(pfm.FormatError) as e:
        pickle.loads(data)
    assert "bad_identifier" == e.value.code


def test_unpickling_a_removed_file_raises_file_not_found(tmp_path):
    path = tmp_path / NAME
    shutil.copyfile(model_path(NAME), path)
    data = pickle.dumps(pfm.load(str(path)))
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        pickle.loads(data)


def test_module_from_a_buffer_or_file_object_does_not_pickle():
    with open(model_path(NAME), "rb") as f:
        for source in (f.read(), f):
            f.seek(0)
            with pytest.raises(TypeError, match="only a Module opened from a path"):
                pickle.dumps(pfm.load(source))


def test_closed_module_does_not_pickle():
    m = pfm.load(model_path(NAME))
    m.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(m)


def test_proxies_refuse_pickling_and_say_what_to_send():
    m = pfm.load(model_path("sample.ptl"))
    f = m.methods["forward"]
    for kind, proxy in (("Object", m.root), ("AttributeMap", m.root.attributes),
                        ("Function", f), ("IValues", m.ivalues), ("Function", m.methods)):
        with pytest.raises(TypeError, match=f"cannot pickle a pyflatmodule {kind}: .*"
                                            "Pickle the Module"):
            pickle.dumps(proxy)


def test_plain_values_pickle_as_copies():
    m = pfm.load(model_path(NAME))
    weights = m.state_dict()
    copies = pickle.loads(pickle.dumps(weights))
    assert _oracle_bytes(NAME) == {k: v.tobytes() for k, v in copies.items()}
    assert not any(np.shares_memory(copies[k], weights[k]) for k in weights)


# ------------------------------------------------------------ ExecuTorch programs



def _external_oracle() -> Dict[str, bytes]:
    """external.ptd's tensors as exir wrote them (tests/data/et/external.oracle.*)."""
    with open(os.path.join(ET, "external.oracle.json")) as f:
        doc = json.load(f)
    arrays = np.load(os.path.join(ET, "external.oracle.npz"))
    return {k: arrays[t["data"]].tobytes() for k, t in doc["weights"].items()}


def test_a_program_and_its_data_files_cross_to_a_spawn_worker(tmp_path):
    pte, ptd = tmp_path / "m.pte", tmp_path / "m.ptd"
    shutil.copy(os.path.join(ET, "external.pte"), pte)
    shutil.copy(os.path.join(ET, "external.ptd"), ptd)
    d = pfm.load_data(str(ptd))
    p = pfm.load_program(str(pte), data=[d], strict=True)
    d.close()                                  # the program pickles its data file by path
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        theirs = pool.apply_async(pfm.Program.state_dict, (p,)).get(timeout=120)
    expected = _external_oracle()
    assert expected and _bytes(theirs) == expected
    again = pickle.loads(pickle.dumps(p))
    assert again.load_args == p.load_args and again.load_args["strict"] is True
    assert [g.origin for g in again.data_files] == [d.origin]
    assert pickle.loads(pickle.dumps(pfm.load_data(str(ptd)))).tensors.keys() == \
        set(expected)
    p.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(p)


def test_a_program_does_not_unpickle_from_a_changed_data_file(tmp_path):
    pte, ptd = tmp_path / "m.pte", tmp_path / "m.ptd"
    shutil.copy(os.path.join(ET, "external.pte"), pte)
    shutil.copy(os.path.join(ET, "external.ptd"), ptd)
    blob = pickle.dumps(pfm.load_program(str(pte), data=[str(ptd)]))
    with open(ptd, "ab") as f:
        f.write(b"\0")
    with pytest.raises(OSError, match="m.ptd is not the file the pickled"):
        pickle.loads(blob)


def test_a_program_from_a_buffer_does_not_pickle():
    with open(os.path.join(ET, "mlp.pte"), "rb") as f:
        p = pfm.load_program(f.read())
    with pytest.raises(TypeError, match="opened from paths"):
        pickle.dumps(p)
    with pytest.raises(TypeError, match="data file given as a buffer"):
        pickle.dumps(pfm.load_program(os.path.join(ET, "external.pte"),
                                      data=[open(os.path.join(ET, "external.ptd"), "rb").read()]))


def test_check_reprs_and_methods_name_the_file(tmp_path):
    path = tmp_path / "m.pte"
    shutil.copy(os.path.join(ET, "two_methods.pte"), path)
    with open(os.path.join(ET, "two_methods.oracle.json")) as f:
        names = [plan["name"] for plan in json.load(f)["program"]["execution_plan"]]
    p = pfm.load_program(str(path))
    assert repr(p) == f"<Program {path}: methods {names}>"
    with pytest.raises(KeyError) as e:
        p.methods["nope"]
    assert all(n in str(e.value) for n in names)
    assert p.check() is None
    with open(path, "ab") as f:
        f.write(b"\0")
    assert p.check() is not None
    p.close()
    assert repr(p) == "<Program (closed)>"
