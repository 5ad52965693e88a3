"""Replaying ``__setstate__`` bytecode to recover a set-state object's attributes.

A CLASS_WITH_SETSTATE object stores only what ``__getstate__`` returned; its
attributes exist once ``__setstate__`` has run. Typical ``__setstate__`` methods
only move values from the state into slots, so a small interpreter for the data
movement instructions, plus a few scalar operators, recovers them without torch.
Anything else (other operators, calls, loops) makes the values it produces
unknown; attributes holding unknown values are left out. It never executes
anything but these instructions, follows forward jumps only (each instruction
runs at most once) and bounds every value it computes.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Sequence

__all__ = ["replay"]

MAX_STEPS = 100_000
MAX_STRING_BYTES = 1 << 24   # all strings built by operators, together


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN = _Unknown()

_SCALAR_OPS: Dict[str, Callable[..., Any]] = {}
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    for _overload in ("int", "float", "str"):
        if _name in ("sub", "mul") and _overload == "str":
            continue
        _SCALAR_OPS[f"aten::{_name}.{_overload}"] = _fn
_SCALAR_OPS["aten::neg.int"] = operator.neg
_SCALAR_OPS["aten::neg.float"] = operator.neg
# Operands each overload accepts: scalars only, so no result can grow (a list
# times an int would).
_OPERAND_TYPES = {"int": (int,), "float": (int, float), "str": (str,),
                  "t": (list, tuple, int)}
_SCALAR_OPS["aten::len.t"] = len
_SCALAR_OPS["aten::__getitem__.t"] = operator.getitem


class _Self:
    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: Dict[int, Any] = {}


class _Stop(Exception):
    pass


def _apply(name: str, args: List[Any], budget: List[int]) -> Any:
    fn = _SCALAR_OPS.get(name)
    if fn is None or not all(isinstance(a, _OPERAND_TYPES[name.rsplit(".", 1)[1]])
                             for a in args):
        return UNKNOWN
    try:
        out = fn(*args)
    except Exception:  # noqa: BLE001 - a failing operator makes its result unknown
        return UNKNOWN
    # Torch's ints are 64-bit and nothing here may grow without bound.
    if isinstance(out, int) and not isinstance(out, bool) and not -2**63 <= out < 2**63:
        return UNKNOWN
    if isinstance(out, str):
        budget[0] -= len(out)
        if budget[0] < 0:
            raise _Stop
    return out


def replay(instructions: Sequence[Sequence[int]], opcodes: Sequence[str],
           operators: Sequence[Any], constants: Sequence[Any], state: Any,
           slot_names: Sequence[str]) -> Dict[str, Any]:
    """Run ``__setstate__(self, state)``; return every slot whose value is known."""
    me = _Self()
    stack: List[Any] = [me, state]
    regs: Dict[int, Any] = {}
    budget = [MAX_STRING_BYTES]
    pc = 0
    try:
        for _ in range(MAX_STEPS):
            if not 0 <= pc < len(instructions):
                raise _Stop          # only RET ends a method
            op, n, x = instructions[pc]
            name = opcodes[op] if 0 <= op < len(opcodes) else "?"
            pc += 1
            if name == "STOREN":
                for i in reversed(range(n)):
                    regs[x + i] = stack.pop()
            elif name == "STORE":
                regs[x] = stack.pop()
            elif name == "LOAD":
                stack.append(regs[x])
            elif name == "MOVE":
                stack.append(regs.pop(x))
            elif name == "DROP":
                stack.pop()
            elif name == "DROPR":
                regs.pop(x, None)
            elif name == "LOADC":
                stack.append(constants[x])
            elif name == "TUPLE_INDEX":
                index, tup = stack.pop(), stack.pop()
                if not isinstance(tup, tuple) or not isinstance(index, int):
                    raise _Stop
                stack.append(tup[index])
            elif name in ("TUPLE_CONSTRUCT", "LIST_CONSTRUCT"):
                count = x if name == "TUPLE_CONSTRUCT" else n    # as torch's interpreter
                if count > len(stack):
                    raise _Stop
                items = stack[len(stack) - count:]
                del stack[len(stack) - count:]
                stack.append(tuple(items) if name == "TUPLE_CONSTRUCT" else items)
            elif name == "LIST_UNPACK":
                seq = stack.pop()
                if not isinstance(seq, (list, tuple)) or len(seq) != x:
                    raise _Stop
                stack.extend(seq)
            elif name == "GET_ATTR":
                obj = stack.pop()
                if obj is not me:
                    raise _Stop
                stack.append(me.slots.get(x, UNKNOWN))
            elif name == "SET_ATTR":
                value, obj = stack.pop(), stack.pop()
                if obj is not me:
                    raise _Stop
                me.slots[x] = value
            elif name in ("OP", "OPN"):
                num = operators[x].num_args if name == "OP" else n
                op = operators[x].full_name
                if num is None or num > len(stack):
                    raise _Stop
                args = stack[len(stack) - num:]
                del stack[len(stack) - num:]
                if op == "prim::TupleUnpack" and len(args) == 1 and \
                        isinstance(args[0], tuple):
                    stack.extend(args[0])
                elif op in _SCALAR_OPS:
                    stack.append(_apply(op, args, budget))
                elif op.startswith("quantized::") and op.split("::")[1].split(".")[0] \
                        .endswith("_prepack"):
                    stack.append(UNKNOWN)    # a packed-params object: one output
                else:
                    raise _Stop              # how many values it returns is unknown
            elif name in ("__IS__", "__ISNOT__"):
                b, a = stack.pop(), stack.pop()
                same = a is b or (a is None and b is None)
                stack.append(same if name == "__IS__" else not same)
            elif name == "__NOT__":
                v = stack.pop()
                stack.append(not v if isinstance(v, bool) else UNKNOWN)
            elif name == "UNCHECKED_CAST":
                pass
            elif name in ("JF", "JMP"):
                # Forward jumps only: no loops, so every instruction runs at most once.
                if x < 1:
                    raise _Stop
                cond = stack.pop() if name == "JF" else False
                if not isinstance(cond, bool):
                    raise _Stop
                pc += x - 1 if not cond else 0
            elif name == "RET":
                break
            else:
                raise _Stop
        else:
            raise _Stop
    except (_Stop, IndexError, KeyError, TypeError, ValueError):
        # Stopped early: slots not set yet may be set by the rest of the method.
        return {name: me.slots[i] for i, name in enumerate(slot_names)
                if i in me.slots and me.slots[i] is not UNKNOWN}
    # Ran to the end: slots the method never sets hold None, as in torch's objects.
    return {name: me.slots.get(i) for i, name in enumerate(slot_names)
            if me.slots.get(i) is not UNKNOWN}
