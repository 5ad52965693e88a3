"""One file's decoding state, at the top of the decoding layer.

A ``Decoder`` joins what decoding one file takes: its ``PtmfIndex`` (the index layer),
its ``TensorTable`` (each tensor record made once), the one proxy object of each
Object and Function ivalue, and the attributes each set-state object's
``__setstate__`` gives, replayed once. ``values.decode`` reads a file through it.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar, cast

from .functions import OPCODES, Function
from .index import PtmfIndex
from .setstate import replay
from .tensors import TensorTable
from .values import Object, decode

__all__ = ["Decoder"]

P = TypeVar("P")


class Decoder:
    """The decoding state of one file (implements ``values.Decoding``)."""

    __slots__ = ("image", "tensors", "_proxies", "_proxy_lock", "_restored")

    def __init__(self, image: PtmfIndex) -> None:
        self.image = image
        self.tensors = TensorTable(image)
        # Weak, so proxies (which hold the decoder) never form a cycle with it. Plain
        # references, not a WeakValueDictionary: a dead one costs a slot until reused.
        self._proxies: Dict[int, "weakref.ref[Any]"] = {}
        self._proxy_lock = threading.Lock()
        self._restored: Dict[int, Dict[str, Any]] = {}

    def value(self, i: int) -> Any:
        """Decode ivalue ``i``; values shared inside it are decoded once."""
        return decode(self, i, {})

    def objects(self, indices: Sequence[int]) -> List[Object]:
        """The one Object proxy of each ivalue of ``indices``."""
        return self._proxies_of(indices, Object)

    def functions(self, indices: Sequence[int]) -> List[Function]:
        """The one Function proxy of each ivalue of ``indices``."""
        return self._proxies_of(indices, Function)

    def _proxies_of(self, indices: Sequence[int], factory: Callable[["Decoder", int], P]
                    ) -> List[P]:
        """The one proxy object for each ivalue of ``indices``, the missing ones made
        in bulk and published under a lock: threads racing here get the same ones."""
        refs = self._proxies
        out: List[Optional[P]] = [None if (ref := refs.get(i)) is None else ref()
                                  for i in indices]
        todo = [i for i, p in zip(indices, out) if p is None]
        if todo:
            made = dict(zip(todo, map(factory, itertools.repeat(self), todo)))
            with self._proxy_lock:
                for i, p in made.items():
                    known = None if (ref := refs.get(i)) is None else ref()
                    if known is None:
                        refs[i] = weakref.ref(p)
                    else:
                        made[i] = known
            out = [made[i] if p is None else p for i, p in zip(indices, out)]
        return cast("List[P]", out)

    def restored_attributes(self, i: int) -> Dict[str, Any]:
        """Attributes of set-state object ``i``, replayed from its ``__setstate__`` once."""
        attrs = self._restored.get(i)
        if attrs is None:
            attrs = self._restored[i] = self._restore(i)
        return attrs

    def _restore(self, i: int) -> Dict[str, Any]:
        image = self.image
        row = image.rows()[i]
        decl = image.class_decl(row.type_index)
        function = decode(self, row.setstate, {})
        if decl is None or not isinstance(function, Function):
            return {}
        return replay(function.instructions.tolist(), OPCODES, function.operators,
                      function.constants, decode(self, row.state, {}), decl.attributes)
