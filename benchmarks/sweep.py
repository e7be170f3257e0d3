"""The catalogue-wide overhead sweep: ``python -m benchmarks --sweep``.

Every op of the catalogue that has OpInfo samples is timed on one of its samples -- small
inputs, float32 where the op takes it -- without and with ``requires_grad`` (the recording
cost), against the same call in PyTorch eager and against the op's own backend call (its
declared ``cpu_impl`` on NumPy arrays where it has one, else its ``impl``: the floor no
dispatcher can go below).

Note [The sweep's PyTorch calls]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
How each op is called in PyTorch is already written down, once, in the differential suite's
op table (``tests/_reference_ops.py``: ``Ref.md`` and ``Ref.torch`` take the same
arguments).  The sweep uses that table rather than a second one: an op's PyTorch time is
measured only where the table's mdtensor call, given the OpInfo sample, returns what the
catalogue op returns (the two conventions agree), so a row never compares two different
computations.  Ops PyTorch lacks, or whose sample the table's call does not take, show no
PyTorch column; ``--sweep`` needs the test extras (hypothesis) for the table.  Both sides
go through the table's small wrappers (``Ref.md``, ``Ref.torch``), so each pays a Python
call more than a bare call; PyTorch's wrapper also turns Python scalars into 0-d tensors,
which costs it about 1 us where a sample has scalars.

Note [The sweep's target]
~~~~~~~~~~~~~~~~~~~~~~~~~
An op is *over target* when mdtensor takes more than 1.2x PyTorch's time, unless the
backend's own call is itself slower than PyTorch's and mdtensor adds at most 0.8 us to it
(1.6 us when recording for autograd): then the gap is NumPy's, not the dispatcher's.  The
grad case measures against the plain case's backend call, since NumPy records nothing.
A backend call slower than mdtensor's own plain call is not the computation mdtensor runs
-- the op has a hand-written CPU kernel whose NumPy computation the sweep cannot call
alone, and the backend column times its generic Array API impl instead (``scatter_add``:
23 us against mdtensor's 4.4 us) -- so it earns no exception.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .harness import Case, fmt, fmt_ratio, run_case

#: md/torch above which an op is over target (Note [The sweep's target])
TARGET = 1.2
#: what mdtensor may add to a backend call slower than PyTorch's (seconds)
SLACK, SLACK_GRAD = 0.8e-6, 1.6e-6


@dataclass
class OpRow:
    """One op's cases (``plain`` and ``grad``; ``grad`` None where nothing differentiates)."""

    name: str
    sample: str
    plain: Case
    grad: Case | None = None
    notes: list[str] = field(default_factory=list)

    def over_target(self, grad: bool) -> bool:
        case = self.grad if grad else self.plain
        if case is None:
            return False
        r = case.ratio("mdtensor", "torch")
        if r is None or r <= TARGET:
            return False
        m = case.medians
        # the backend's own call records nothing: the plain case's time stands for both
        backend, torch_t = self.plain.medians.get("backend"), m.get("torch")
        slack = SLACK_GRAD if grad else SLACK
        return not (backend is not None and backend > torch_t
                    and backend <= self.plain.medians["mdtensor"]
                    and m["mdtensor"] - backend <= slack)


def _reference_table():
    """``{op name: Ref}`` of the differential suite (Note [The sweep's PyTorch calls])."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    try:
        from _reference_ops import REFS
    except ImportError as e:  # hypothesis missing: no PyTorch column
        print(f"# sweep: no PyTorch calls ({e})", file=sys.stderr)
        return {}
    table = {}
    for r in REFS:
        if r.torch is not None and not r.name:
            table.setdefault(r.op, r)
    return table


def _sample(decl):
    """``(dtype, SampleInput)``: in float32 where the op takes it, the op's sample whose
    smallest array is largest (up to 256 elements: a 0-d tensor takes paths of its own, and
    the issue's measure was 16x16), the first of equals."""
    import mdtensor as md

    info = decl.info
    names = [d.name for d in info.dtypes]
    order = [d for d in ("float32", "float64") if d in names] + names
    for dtype in order:
        try:
            samples = list(info.samples(getattr(md, dtype), np.random.default_rng(0)))
        except Exception:  # noqa: BLE001 - a sample generator for another dtype
            continue
        best, best_size = None, 0
        for s in samples:
            arrays = [a for a in _flat(s.args) + _flat(s.kwargs.values())
                      if isinstance(a, np.ndarray)]
            size = min((min(a.size, 256) for a in arrays), default=1)
            if size > best_size:
                best, best_size = s, size
        if best is not None:
            return dtype, best
    return None, None


def _flat(values) -> list:
    out = []
    for v in values:
        out.extend(v if isinstance(v, (list, tuple)) else (v,))
    return out


def _convert(v, to):
    if isinstance(v, np.ndarray):
        return to(v.copy())
    if isinstance(v, (list, tuple)) and any(isinstance(x, np.ndarray) for x in v):
        return type(v)(_convert(x, to) for x in v)
    return v


def _arguments(sample, to) -> tuple[tuple, dict]:
    return (tuple(_convert(a, to) for a in sample.args),
            {k: _convert(v, to) for k, v in sample.kwargs.items()})


def _on_cpu(a):
    """A tensor of the sample's array on the CPU: the sweep measures the NumPy backend
    against PyTorch's CPU kernels, whatever the default device."""
    import mdtensor as md

    return md.asarray(a, device="cpu")


def _requiring_grad(args, kwargs, lib):
    """The floating tensors among the arguments, made leaves that require grad."""
    found = False
    for t in _flat(args) + _flat(kwargs.values()):
        if isinstance(t, lib.Tensor) and t.dtype in (lib.float32, lib.float64):
            t.requires_grad_(True)
            found = True
    return found


def _same(a, b) -> bool:
    import mdtensor as md

    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, md.Tensor) and isinstance(b, md.Tensor):
        x, y = np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy())
        return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y,
                                                                            equal_nan=True)
    return type(a) is type(b) and a == b


def _builders(decl, sample, refs, grad: bool):
    """``{impl: zero-argument callable}`` for one case, and notes on what is missing."""
    import mdtensor as md

    notes = []
    packet = decl.functional[0].overloadpacket
    margs, mkw = _arguments(sample, _on_cpu)
    if grad and not _requiring_grad(margs, mkw, md):
        return None, notes
    impls = {}
    expected = packet(*margs, **mkw)
    ref = refs.get(decl.name)
    md_call = None
    if ref is not None:
        try:
            if _same(ref.md(md, *margs, **mkw), expected):
                md_call = ref.md
            else:
                notes.append("the PyTorch table's call differs from the sample's")
        except Exception as e:  # noqa: BLE001
            notes.append(f"the PyTorch table's call refuses the sample ({type(e).__name__})")
    if md_call is not None:
        impls["mdtensor"] = lambda: md_call(md, *margs, **mkw)
        torch = _torch()
        if torch is not None:
            targs, tkw = _arguments(sample, torch.from_numpy)
            if grad:
                _requiring_grad(targs, tkw, torch)
            try:
                ref.torch(torch, *targs, **tkw)
                impls["torch"] = lambda: ref.torch(torch, *targs, **tkw)
            except Exception as e:  # noqa: BLE001
                notes.append(f"the PyTorch call refuses the sample ({type(e).__name__})")
    else:
        impls["mdtensor"] = lambda: packet(*margs, **mkw)
    if decl.impl is not None and not grad:
        raw, raw_kw = _arguments(sample, np.asarray)
        impls["backend"] = _backend_call(decl, md.Device("cpu").xp, raw, raw_kw)
    return impls, notes


def _backend_call(decl, xp, raw, raw_kw):
    """The NumPy computation the CPU kernel runs for these arguments: the op's
    ``cpu_impl`` or hand-written kernel's computation where it has one and computes this
    case (a ufunc itself when the call suits it), else its generic ``impl``."""
    from mdtensor.ops._ufunc_kernels import Ufunc

    cpu, impl = decl.cpu_impl, decl.impl
    if isinstance(cpu, Ufunc):
        suits = not raw_kw and all(
            not isinstance(a, np.ndarray) or not cpu.floats_only or a.dtype.kind in cpu.kinds
            for a in raw)
        if suits:
            return lambda: cpu.fn(*raw)
    elif cpu is not None:
        try:
            computes = cpu(xp, *raw, **raw_kw) is not None
        except Exception:  # noqa: BLE001  (a hand-written kernel's case it hands on)
            computes = False
        if computes:
            return lambda: cpu(xp, *raw, **raw_kw)
    return lambda: impl(xp, *raw, **raw_kw)


_TORCH: list = []


def _torch():
    if not _TORCH:
        try:
            import torch

            torch.set_num_threads(1)
            _TORCH.append(torch)
        except ImportError:
            _TORCH.append(None)
    return _TORCH[0]


def run_sweep(repeats: int = 5, target: float = 0.004, only: str = "") -> list[OpRow]:
    """Time every catalogue op with OpInfo samples (``only``: names containing it)."""
    from mdtensor.ops import CATALOGUE

    refs = _reference_table()
    rows = []
    for decl in sorted(CATALOGUE.values(), key=lambda d: d.name):
        if only not in decl.name or decl.info is None or decl.info.samples is None:
            continue
        if not decl.functional or "factory" in decl.functional[0].tags:
            continue
        dtype, sample = _sample(decl)
        if sample is None:
            continue
        row = None
        for grad in (False, True):
            try:
                impls, notes = _builders(decl, sample, refs, grad)
            except Exception as e:  # noqa: BLE001 - the sample itself fails: say so
                impls, notes = None, [f"{'grad: ' if grad else ''}{type(e).__name__}: {e}"]
            if row is None:
                row = OpRow(decl.name, dtype, Case(decl.name, "sweep"), notes=notes)
            else:
                row.notes += notes
            if impls is None:
                continue
            case = Case(f"{decl.name}{' (grad)' if grad else ''}", "sweep", impls=impls)
            run_case(case, repeats, target)
            if grad:
                row.grad = case
            else:
                row.plain = case
        rows.append(row)
    return rows


def _cell(case: Case | None, impl: str) -> str:
    if case is None or impl not in case.medians:
        return ""
    return fmt(case.medians[impl])


def report(rows: list[OpRow]) -> str:
    """The sweep's table (slowest md/torch first), its medians and the ops over target."""
    head = ["op", "dtype", "backend", "mdtensor", "torch", "md/torch", "md (grad)",
            "torch (grad)", "md/torch (grad)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def key(r):
        return -(r.plain.ratio("mdtensor", "torch") or 0)

    for r in sorted(rows, key=key):
        g = r.grad
        lines.append("| " + " | ".join([
            r.name, r.sample, _cell(r.plain, "backend"), _cell(r.plain, "mdtensor"),
            _cell(r.plain, "torch"), fmt_ratio(r.plain.ratio("mdtensor", "torch")),
            _cell(g, "mdtensor"), _cell(g, "torch"),
            fmt_ratio(g.ratio("mdtensor", "torch") if g else None)]) + " |")
    plain = [x for r in rows if (x := r.plain.ratio("mdtensor", "torch")) is not None]
    grads = [x for r in rows if r.grad and (x := r.grad.ratio("mdtensor", "torch"))
             is not None]
    lines.append("")
    lines.append(f"ops timed: {len(rows)}; against PyTorch: {len(plain)} "
                 f"({len(grads)} with grad)")
    if plain:
        lines.append(f"median md/torch: {statistics.median(plain):.2f} without grad"
                     + (f", {statistics.median(grads):.2f} with grad" if grads else ""))
    over = [r.name for r in rows if r.over_target(False)]
    over_g = [r.name for r in rows if r.over_target(True)]
    lines.append(f"over target (> {TARGET}x PyTorch, Note [The sweep's target]): "
                 f"{len(over)} without grad: {', '.join(over) or '-'}")
    lines.append(f"over target with grad: {len(over_g)}: {', '.join(over_g) or '-'}")
    return "\n".join(lines)


def record(rows: list[OpRow]) -> dict:
    """The sweep for the JSON record."""
    return {r.name: {"dtype": r.sample, "seconds": r.plain.medians,
                     "grad_seconds": r.grad.medians if r.grad else None,
                     "md/torch": r.plain.ratio("mdtensor", "torch"),
                     "md/torch (grad)": r.grad.ratio("mdtensor", "torch") if r.grad else None,
                     "notes": r.notes, "missing": r.plain.missing} for r in rows}
