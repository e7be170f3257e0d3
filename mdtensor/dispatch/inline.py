"""The inline dispatch: one generator for the four lines every fast caller runs.

Note [Inline dispatch]
~~~~~~~~~~~~~~~~~~~~~~
Calling an overload means four lines: read the thread-local include/exclude keys, make
the call's key set from the Tensor arguments' ``_ks``, look the kernel up in the
overload's table, fill the entry on a miss::

    inc, keep = _tls_get()
    ks = (a._ks | b._ks | inc) & keep & op.mask
    kernel = table.get(ks)
    if kernel is None:
        kernel = op.fill_entry(ks)

``dispatch_kernel(op, table, a, b)`` is those lines as a function.  The fast callers do
not call it: a Python call costs a frame, about 0.1-0.3 us on the 2-core EPYC, as much as
the four lines themselves.  They are written with the call and decorated with
``@inline_dispatch``, which recompiles the decorated function once, at import, with every
statement ``kernel = dispatch_kernel(op, table, *tensors)`` replaced by the four lines (the
names given are used as they are: ``op`` and ``table`` may be closure variables, globals or
locals; a starred last name, ``dispatch_kernel(op, table, *tensors)``, is a list whose
Tensors are read in a loop).  So the lines exist once, here, and every fast caller runs them
in its own frame:

- an overload's caller (``make_caller``): the Tensors at its leading positions;
- a packet's function (``packet_function``): the overload that one Tensor, two Tensors, a
  Tensor and one or two values of other types, or a value then a Tensor resolved to,
  learned from the packet's ``on_resolve`` hooks (one dict lookup and one frame less per
  op: 0.2-0.3 us);
- the Python operators ``a * b``, ``b * a`` (``ops/_methods.py``): the overload the pair
  ``(Tensor, Tensor)`` resolved to (2.56 -> 2.2 us for ``a * b`` on 8x8 float32);
- ``x[1:3]`` (``ops/indexing.py``): the basic-indexing overload;
- ``x.T``, ``x.mT``, ``md.reshape`` and ``md.ravel`` (``ops/manipulation.py``, Note [Views
  dispatched inline]): the view op's overload.
- ``md.broadcast_arrays`` (``ops/manipulation.py``): ``expand``'s overload, per input.

The learned overloads are for the exact class Tensor (a subclass resolves as before) and
overloads whose Tensors are their leading positional parameters (``fast_positions``), and
are forgotten when the packet's overloads change (``on_change``).  The table is the
overload's own (cleared in place on any registration change, never replaced), so modes,
autograd, vmap and traces see the call exactly as through the caller.

The decorated function must be a module-level function without decorators of its own
above ``@inline_dispatch``; its closures (the callers it makes) are compiled with it.
The rewritten code keeps the file's line numbers, so tracebacks point at the source.
``MDTENSOR_NO_INLINE=1`` leaves every function as written (each ``dispatch_kernel`` a
call): the same results, a little slower -- for debugging the generator.
"""

from __future__ import annotations
import __future__

import ast
import inspect
import marshal
import os
import sys
import textwrap
from collections.abc import Callable
from types import CodeType

from .tls import dispatch_tls

__all__ = ["dispatch_kernel", "inline_dispatch"]

_tls_get = dispatch_tls.get


def dispatch_kernel(op, table, *tensors):
    """The kernel for a call of ``op`` with ``tensors`` (Note [Inline dispatch])."""
    inc, keep = _tls_get()
    ks = inc
    for t in tensors:
        ks |= t._ks
    ks &= keep & op.mask
    kernel = table.get(ks)
    if kernel is None:
        kernel = op.fill_entry(ks)
    return kernel


_TEMPLATE = """\
inc, keep = _inline_tls_get()
ks = ({keys}inc) & keep & {op}.mask
{target} = {table}.get(ks)
if {target} is None:
    {target} = {op}.fill_entry(ks)
"""


# ``dispatch_kernel(op, table, *tensors)``: the key sets of a list's Tensors, in a loop (a
# non-Tensor raises AttributeError, as a non-Tensor named argument does).
_LIST_TEMPLATE = """\
ks = {keys}0
for _tensor in {tensors}:
    ks |= _tensor._ks
inc, keep = _inline_tls_get()
ks = (ks | inc) & keep & {op}.mask
{target} = {table}.get(ks)
if {target} is None:
    {target} = {op}.fill_entry(ks)
"""


def _refuse(node):
    raise SyntaxError("inline_dispatch: write `kernel = dispatch_kernel(op, table, a, b, ...)` "
                      f"as a statement, with plain names (line {node.lineno})")


class _Expand(ast.NodeTransformer):
    """Replaces ``target = dispatch_kernel(op, table, *tensors)`` statements."""

    def visit_Call(self, node: ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "dispatch_kernel":
            _refuse(node)  # a call that is not a statement of the form expanded below
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign):
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "dispatch_kernel"):
            return self.generic_visit(node)
        args = call.args
        starred = bool(args) and isinstance(args[-1], ast.Starred)
        if starred:  # dispatch_kernel(op, table, *tensors): a list's Tensors
            args = [*args[:-1], args[-1].value]
        if (len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name)
                or call.keywords or len(args) < 2 + starred
                or not all(isinstance(a, ast.Name) for a in args)):
            _refuse(node)
        op, table, *tensors = (a.id for a in args)
        if starred:
            source = _LIST_TEMPLATE.format(target=node.targets[0].id, op=op, table=table,
                                           keys="".join(f"{t}._ks | " for t in tensors[:-1]),
                                           tensors=tensors[-1])
        else:
            source = _TEMPLATE.format(target=node.targets[0].id, op=op, table=table,
                                      keys="".join(f"{t}._ks | " for t in tensors))
        lines = ast.parse(source).body
        for stmt in lines:
            for n in ast.walk(stmt):  # the lines are the marker's line, for tracebacks
                if hasattr(n, "lineno"):
                    n.lineno = n.end_lineno = node.lineno
                    n.col_offset, n.end_col_offset = node.col_offset, node.end_col_offset
        return lines


def _expanded(fn: Callable) -> CodeType:
    """The module-level code that defines ``fn`` with its ``dispatch_kernel`` statements
    expanded, compiled against ``fn``'s file and line numbers."""
    code = fn.__code__
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    (fdef,) = tree.body
    if [d for d in fdef.decorator_list
            if not (isinstance(d, ast.Name) and d.id == "inline_dispatch")]:
        raise TypeError(f"inline_dispatch: {fn.__qualname__} has other decorators")
    fdef.decorator_list = []
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    tree = ast.fix_missing_locations(_Expand().visit(tree))
    future = __future__.annotations
    flags = future.compiler_flag if fn.__globals__.get("annotations") is future else 0
    return compile(tree, code.co_filename, "exec", flags=flags, dont_inherit=True)


# Note [Cached expansions]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Reading a function's source, parsing, expanding and compiling it costs tens of
# milliseconds per function -- too much for ``import mdtensor``.  So the compiled expansion is
# kept, as CPython keeps a module's bytecode, in the ``__pycache__`` folder beside the source
# (``callers.make_caller.cpython-311.inline``; under ``PYTHONPYCACHEPREFIX`` if set), marshalled,
# under a key made of the source
# file's and this generator's modification times and sizes and the function's first line.
# A missing, stale or unreadable entry is rebuilt; one that cannot be written (a read-only
# install, ``PYTHONDONTWRITEBYTECODE``) is simply not kept.

def _cache_path_and_key(fn: Callable) -> tuple[str, bytes] | tuple[None, None]:
    code = fn.__code__
    try:
        src, gen = os.stat(code.co_filename), os.stat(__file__)
    except OSError:
        return None, None
    folder = os.path.dirname(os.path.abspath(code.co_filename))
    if sys.pycache_prefix:  # PYTHONPYCACHEPREFIX: a tree of its own, as importlib's
        folder = os.path.join(sys.pycache_prefix, folder.lstrip(os.sep))
    else:
        folder = os.path.join(folder, "__pycache__")
    stem = os.path.splitext(os.path.basename(code.co_filename))[0]
    path = os.path.join(folder, f"{stem}.{fn.__name__}.{sys.implementation.cache_tag}.inline")
    key = (f"{src.st_mtime_ns} {src.st_size} {gen.st_mtime_ns} {gen.st_size} "
           f"{code.co_firstlineno}").encode()
    return path, key


def _code_for(fn: Callable) -> CodeType:
    path, key = _cache_path_and_key(fn)
    if path is not None:
        try:
            with open(path, "rb") as f:
                head, _, body = f.read().partition(b"\n")
            if head == key:
                return marshal.loads(body)
        except (OSError, ValueError, EOFError, TypeError):
            pass
    code = _expanded(fn)
    if path is not None and not sys.dont_write_bytecode:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(key + b"\n" + marshal.dumps(code))
            os.replace(tmp, path)
        except OSError:
            pass
    return code


def inline_dispatch(fn: Callable) -> Callable:
    """``fn`` recompiled with its ``dispatch_kernel`` statements inlined (Note [Inline
    dispatch])."""
    if os.environ.get("MDTENSOR_NO_INLINE"):
        return fn
    if fn.__code__.co_freevars:
        raise TypeError(f"inline_dispatch: {fn.__qualname__} is a closure; decorate the "
                        "module-level function that makes it")
    fn.__globals__["_inline_tls_get"] = _tls_get
    namespace: dict = {}
    exec(_code_for(fn), fn.__globals__, namespace)
    new = namespace[fn.__name__]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    new.__qualname__, new.__module__ = fn.__qualname__, fn.__module__
    return new
