"""``pyflatmodule dis``: bytecode disassembly with operators, constants, registers and schema
(``Function.disassembly``, formatted)."""
from __future__ import annotations

import argparse
from typing import Optional

from ..executorch import Program
from ..ptmf import Argument, Function, Methods, Module, short
from . import executorch
from .common import EXIT_OK, CliError, Context, Json, no_methods_note, open_model

HELP = "bytecode disassembly with operators, constants, registers and schema"

EXAMPLES = """examples:
  pyflatmodule dis model.ptl                  every method
  pyflatmodule dis model.ptl forward          one method (short or qualified name)
  pyflatmodule dis model.ptl --all            also __setstate__ and other functions
  pyflatmodule dis model.pte forward          an ExecuTorch method's instruction chains

a file without methods (e.g. a parameters file) lists nothing: a note on stderr, exit 0
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("method", nargs="?", metavar="METHOD",
                   help="qualified (__torch__.Net.forward) or short (forward) name")
    p.add_argument("--all", action="store_true",
                   help="every function in the file, not only the module's methods")


def _schema_doc(f: Function) -> Optional[Json]:
    schema = f.schema
    if schema is None:
        return None

    def arg(a: Argument) -> Json:
        return {"name": a.name, "type": a.type,
                "default": None if a.default is None else short(a.default, 200)}
    return {"arguments": [arg(a) for a in schema.arguments],
            "returns": [arg(a) for a in schema.returns]}


def disassemble(f: Function) -> Json:
    """Everything ``dis`` shows for one function, as JSON-able data."""
    schema = f.schema
    operators = f.operators
    constants = f.constants
    code = [{"pc": ins.pc, "op": ins.op, "opcode": ins.opcode, "x": ins.x, "n": ins.n,
             "operands": ins.operands, "comment": ins.comment} for ins in f.disassembly()]
    return {
        "name": f.name,
        "signature": f"{f.name}{schema if schema is not None else '(...)'}",
        "schema": _schema_doc(f),
        "register_size": f.register_size,
        "operators": [{"index": k, "name": o.name, "overload": o.overload_name,
                       "full_name": o.full_name, "num_args": o.num_args}
                      for k, o in enumerate(operators)],
        "constants": [{"index": k, "repr": short(c, 200)} for k, c in enumerate(constants)],
        "type_annotations": list(f.type_annotations),
        "instructions": code,
    }


def print_dis(ctx: Context, d: Json) -> None:
    """The listing of one function."""
    st = ctx.style
    ctx.print(f"{st('def', 'magenta')} {st(d['signature'], 'bold')}")
    ctx.print(st(f"  # {len(d['instructions'])} instructions, {d['register_size']} registers, "
                 f"{len(d['operators'])} operators, {len(d['constants'])} constants", "dim"))
    if d["operators"]:
        ctx.print("  operators:")
        for o in d["operators"]:
            args = "" if o["num_args"] is None else f"  ({o['num_args']} args)"
            ctx.print(f"    #{o['index']:<4d} {st(o['full_name'], 'cyan')}{args}")
    if d["constants"]:
        ctx.print("  constants:")
        for c in d["constants"]:
            ctx.print(f"    c{c['index']:<4d} {c['repr']}")
    ctx.print("  code:")
    width = max([len(i["opcode"]) for i in d["instructions"]] + [8])
    for ins in d["instructions"]:
        opcode = st(ins["opcode"].ljust(width), "yellow")
        text = f"    {ins['pc']:5d}  {opcode} {ins['operands']:<14s}"
        if ins["comment"]:
            text += st(f"  # {ins['comment']}", "dim")
        ctx.print(text.rstrip())


def _run_executorch(ctx: Context, p: Program) -> int:
    """Disassemble an ExecuTorch program's methods (a data file has none)."""
    args = ctx.args
    methods = p.methods
    if args.method is not None and args.method not in methods:
        names = ", ".join(methods) or "none"
        raise CliError(f"no method {args.method!r} (methods: {names})", "not_found",
                       file=args.path)
    docs = [executorch.disassemble(m) for name, m in methods.items()
            if args.method in (None, name)]
    if ctx.json:
        ctx.dump({"file": args.path, "methods": docs})
    else:
        for k, d in enumerate(docs):
            if k:
                ctx.print()
            executorch.print_dis(ctx, d)
    return EXIT_OK


def run(ctx: Context) -> int:
    """Disassemble the chosen methods."""
    args = ctx.args
    with open_model(args.path) as m:
        if not isinstance(m, Module):
            if isinstance(m, Program):
                return _run_executorch(ctx, m)
            no_methods_note(ctx, args.path, "an ExecuTorch data file: nothing to disassemble")
            if ctx.json:
                ctx.dump({"file": args.path, "methods": []})
            return EXIT_OK
        if args.all:
            functions = Methods(m.functions())
        else:
            functions = m.methods
        chosen = list(functions.values()) if args.method is None else \
            functions.find(args.method)
        if not chosen and args.method is not None:
            names = ", ".join(functions) or "none"
            raise CliError(f"no method {args.method!r} (methods: {names})", "not_found",
                           file=args.path)
        docs = [disassemble(f) for f in chosen]
        if not functions:
            others = 0 if args.all else len(m.functions())
            no_methods_note(ctx, args.path, f"--all shows its {others} other functions"
                            if others else "nothing to disassemble")
    if ctx.json:
        ctx.dump({"file": args.path, "functions": docs})
    else:
        for k, d in enumerate(docs):
            if k:
                ctx.print()
            print_dis(ctx, d)
    return EXIT_OK
