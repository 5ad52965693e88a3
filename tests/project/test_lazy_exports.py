"""The packages whose public names are imported when first read (``core.lazy.lazy_exports``):
what type checkers are shown under ``TYPE_CHECKING`` is what a reader gets, every name of
``__all__`` resolves to the object its module defines, and the backend registry's ids are
its modules' own."""
from __future__ import annotations

import ast
import importlib
import inspect
from typing import Dict, Tuple

import pytest

PACKAGES = ["pyflatmodule", "pyflatmodule.executorch", "pyflatmodule.ptmf"]


def _type_checking_imports(package: str) -> Dict[str, Tuple[str, str]]:
    """Name -> (module, name there) of the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(inspect.getsource(importlib.import_module(package)))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    base = importlib.util.resolve_name("." * imp.level + (imp.module or ""),
                                                       package)
                    for alias in imp.names:
                        out[alias.asname or alias.name] = (base, alias.name)
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_what_type_checkers_see_is_what_a_reader_gets(package: str) -> None:
    module = importlib.import_module(package)
    seen = _type_checking_imports(package)
    lazy = set(dir(module)) - set(vars(module)) | {n for n in seen if n in vars(module)}
    assert set(seen) == lazy, (set(seen) ^ lazy)
    for name, (where, inner) in seen.items():
        assert getattr(module, name) is getattr(importlib.import_module(where), inner), name


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(module, "nothing_here")


def test_each_backend_module_registers_its_own_id() -> None:
    from pyflatmodule.executorch import backends
    for delegate_id, name in backends.MODULES.items():
        module = importlib.import_module(f"pyflatmodule.executorch.backends.{name}")
        assert module.BACKEND.id == delegate_id
        assert backends.backend_of(delegate_id) is module.BACKEND
    assert backends.backend_of("NoSuchBackend") is None
    assert sorted(backends.BACKENDS) == sorted(backends.MODULES)
