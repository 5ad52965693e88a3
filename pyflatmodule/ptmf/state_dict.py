"""The state_dict walk: parameters and buffers by dotted name, as torch gives them.

With ``jit_sources`` the classes' ``__parameters__``/``__buffers__`` decide: the C core
walks the field-object modules (``PtmfIndex.walk_modules``) and each set-state module is
expanded here, where it sits. Without them every tensor attribute reachable through
field objects is listed by its attribute path; a file written by
``torch._C._save_parameters`` gives the dictionary it saved.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple, Union

from ..core.dtypes import QuantizedTensor
from ..core.lazy import np
from ..core.native import ffi, format_error, lib
from .decoder import Decoder
from .index import WALK_TOO_LARGE, PtmfIndex
from .values import Object

__all__ = ["walk_state_dict"]

Tensor = Union["np.ndarray", QuantizedTensor]

_SAVED_PARAMETERS = "__torch__.SavedParameters"


def walk_state_dict(file: Decoder, root: Object) -> Dict[str, Tensor]:
    """Parameters and buffers by dotted name from ``root``, as torch's ``state_dict()``
    gives them (see ``Module.state_dict``)."""
    image = file.image
    # Shared objects are walked once per path, as torch does; the walk is paid in
    # attributes visited and stops at a few times what a tree of this file holds.
    budget = [_WALK_FLOOR + 4 * int(image.summary.n_ivalues)]
    root_type = int(image.index["type_index"][root.index])
    if not image.summary.n_jit_sources and image.type_name(root_type) == _SAVED_PARAMETERS:
        data = root.attributes.get("data")
        if isinstance(data, dict):
            return {str(k): v for k, v in data.items()
                    if isinstance(v, (np.ndarray, QuantizedTensor))}
    if image.summary.n_jit_sources and image.module_types().module[root_type]:
        # Field objects' tensors are found as record numbers, then made in bulk.
        found = _walk_declared(file, root.index, budget)
        records = [k for k, v in found.items() if isinstance(v, int)]
        found.update(zip(records, file.tensors.tensors([found[k] for k in records])))
        return found
    out: Dict[str, Tensor] = {}
    _walk_fields(image, root, "", out, budget)
    return out


#: Attribute visits any state_dict walk may make, beyond four per ivalue in the file.
_WALK_FLOOR = 65_536


def _spend(budget: List[int], image: PtmfIndex, i: int, attributes: int) -> None:
    budget[0] -= 1 + attributes
    if budget[0] < 0:
        raise format_error(lib.FB_E_ELEMENT_BUDGET, int(image.index["pos"][i]), f"ivalues[{i}]",
                           WALK_TOO_LARGE)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (np.ndarray, QuantizedTensor))


def _walk_declared(file: Decoder, root: int, budget: List[int]) -> Dict[str, Any]:
    """nn.Module.state_dict order: parameters, then buffers (each in slot order), then
    each submodule's entries; depth-first without recursion (a stack of the modules'
    entry generators, each writing its tensors to the result and yielding the
    submodules it leaves to the next). Field objects' tensors come out as record
    numbers (ints)."""
    walk = _ModuleWalk(file)
    out: Dict[str, Any] = {}
    stack = [walk.entries(root, "", out, budget)]
    while stack:
        for j, prefix in stack[-1]:
            stack.append(walk.entries(j, prefix, out, budget))
            break
        else:
            stack.pop()
    return out


class _ModuleWalk:
    """One file's declared modules, as the C walk reads them: per object type, whether
    it is a module (and of which kind) and each attribute name's role
    (``PtmfIndex.module_types``)."""

    def __init__(self, file: Decoder) -> None:
        self.file = file
        self.image = image = file.image
        table, kinds = image.type_table(), image.module_types()
        #: Per object type: 0 not a module, 1 entered by the C walk, 2 walked here.
        self.module = kinds.module.tolist()
        arrays = {field: ffi.from_buffer(ctype, a) for field, ctype, a in
                  (("module", "uint8_t[]", kinds.module),
                   ("slot_base", "uint32_t[]", table.types["first_attr"].astype(np.uint32)),
                   ("slot_count", "uint32_t[]", table.types["n_attrs"].astype(np.uint32)),
                   ("role", "uint8_t[]", kinds.role))}
        self.c_types = ffi.new("ptmf_walk_types *", dict(
            arrays, n_types=len(table.types), n_names=len(table.attrs)))
        self._keep = arrays   # the struct points into these

    def entries(self, i: int, prefix: str, out: Dict[str, Any],
                budget: List[int]) -> Iterator[Tuple[int, str]]:
        """Module ``i``'s entries under ``prefix``: its tensors go to ``out`` in order;
        each submodule this walk does not enter is yielded, where it sits, as
        (ivalue, its prefix)."""
        if self.module[int(self.image.index["type_index"][i])] == 1:
            return self._field_entries(i, prefix, out, budget)
        return self._other_entries(i, prefix, out, budget)

    def _field_entries(self, i: int, prefix: str, out: Dict[str, Any],
                       budget: List[int]) -> Iterator[Tuple[int, str]]:
        steps = self.image.walk_modules(i, self.c_types, budget)
        kinds = steps["kind"]
        # The tensors, and the modules this walk leaves to the caller where they sit.
        wanted = np.flatnonzero(kinds != lib.PTMF_WALK_MODULE)
        keys = self.image.walk_keys(steps, wanted)
        if prefix:
            keys = [prefix + key for key in keys]
        targets = steps["target"][wanted].tolist()
        last = 0
        for e in np.flatnonzero(kinds[wanted] == lib.PTMF_WALK_OTHER_MODULE).tolist() + [
                len(wanted)]:
            out.update(zip(keys[last:e], targets[last:e]))
            if e < len(wanted):
                yield targets[e], keys[e] + "."
            last = e + 1

    def _other_entries(self, i: int, prefix: str, out: Dict[str, Any],
                       budget: List[int]) -> Iterator[Tuple[int, str]]:
        """A module that is not a field object (a set-state one): its attributes are
        those its ``__setstate__`` sets."""
        image = self.image
        _spend(budget, image, i, int(image.index["length"][i]))
        decl = image.class_decl(int(image.index["type_index"][i]))
        assert decl is not None   # module types have a class
        params, buffers = set(decl.parameters), set(decl.buffers)
        attributes = self.file.objects([i])[0]._tensors_and_objects()
        tensors = [(name, value) for name, value in attributes
                   if not isinstance(value, Object)]
        out.update((prefix + name, value) for name, value in tensors if name in params)
        out.update((prefix + name, value) for name, value in tensors
                   if name not in params and name in buffers)
        for name, value in attributes:
            if (isinstance(value, Object)
                    and self.module[int(image.index["type_index"][value.index])]):
                yield value.index, f"{prefix}{name}."


def _walk_fields(image: PtmfIndex, obj: Object, prefix: str, out: Dict[str, Tensor],
                 budget: List[int]) -> None:
    # Attributes in slot order, each object's entries where it sits among them;
    # depth-first without recursion (a stack of the objects' attribute iterators).
    def attributes(obj: Object, prefix: str) -> Iterator[Tuple[str, Any]]:
        if obj.kind != "class_with_field":
            _spend(budget, image, obj.index, 0)
            return iter(())
        _spend(budget, image, obj.index, int(image.index["length"][obj.index]))
        return ((prefix + name, value) for name, value in obj._tensors_and_objects())

    stack = [attributes(obj, prefix)]
    while stack:
        for path, value in stack[-1]:
            if _is_tensor(value):
                out[path] = value
            elif isinstance(value, Object):
                stack.append(attributes(value, path + "."))
                break
        else:
            stack.pop()
