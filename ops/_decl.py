"""How an operator is declared in the catalogue.

Every op is declared once, with ``defop``::

    defop("exp(Tensor self) -> Tensor",
          impl=lambda xp, x: xp.exp(x),      # on raw arrays, against the Array API
          structured=True,                     # also exp_ and exp.out, from the same impl
          meta=meta.unary_float,               # shape/dtype inference without data
          tags=("pointwise",),
          info=OpInfo(ref=np.exp, dtypes=FLOATING, samples=samples.unary))

From that one declaration come: the overloads (``exp``, ``exp_``, ``exp.out``), their
ArrayAPI kernels (the impl wrapped to unwrap tensors, check devices and wrap results), the
Meta kernels (from ``meta``), the ADInplaceOrView kernels of in-place, ``out=`` and view
overloads, the namespace functions and Tensor methods (``ops._methods``), and the OpInfo
sweep's test data.  Derivative formulas are not declared here: they live in
``ops/derivatives.py``, the Autograd layer's rules table, by op name.

Note [NumPy fast impls]
~~~~~~~~~~~~~~~~~~~~~~~
A few hot ops give ``cpu_impl=``: the same computation written against NumPy directly,
registered for the CPU key.  array-api-compat wraps some NumPy functions (``matmul``) and
``np.sum`` goes through Python-level dispatch; on 8-element inputs those layers cost as
much as the arithmetic.  The generic impl still serves every other backend, and the OpInfo
sweep checks both agree with the reference.

The kernels are built in ops/_impl_kernels.py (from ``impl``) and ops/_ufunc_kernels.py (from
a ``Ufunc``); their errors are in ops/_errors.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from mdtensor.dispatch.kernel import Kernel
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import define
from mdtensor.dispatch.schema import FunctionSchema, parse_schema

from ._accepted import with_accepted_kinds
from ._impl_kernels import (
    array_api_kernel,
    impl_kernel,
    meta_kernel,
    prepared_impl,
    prepared_kernel,
)
from ._ufunc_kernels import Ufunc, ufunc_inplace_kernel, ufunc_kernel, ufunc_out_kernel

__all__ = [
    "CATALOGUE",
    "ErrorInput",
    "OpDecl",
    "OpInfo",
    "SampleInput",
    "SparseInput",
    "Ufunc",
    "defop",
    "impl_kernel",
    "structured_variants",
]


@dataclass
class SampleInput:
    """One call of an op in the OpInfo sweep: ``op(*args, **kwargs)``.

    Tensor arguments are NumPy arrays here; the sweep converts them to tensors on the
    device under test and the NumPy reference receives them as they are.
    """

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: str = ""


class SparseInput(np.ndarray):
    """A sample argument the OpInfo sweep passes as a sparse tensor of ``layout`` (the
    reference receives the dense NumPy array): ``SparseInput.of(array, layout_name)``."""

    layout: str = "sparse_coo"

    @classmethod
    def of(cls, array, layout: str = "sparse_coo") -> SparseInput:
        out = np.asarray(array).view(cls)
        out.layout = layout
        return out


@dataclass
class ErrorInput:
    """A call that must raise ``error`` with a message matching ``match`` (a regex)."""

    sample: SampleInput
    error: type = Exception
    match: str = ""


@dataclass
class OpInfo:
    """Test data for the OpInfo sweep.

    Attributes:
        ref: NumPy reference taking the sample's arguments (NumPy arrays) and returning
            what the op returns (arrays).  None: no reference comparison.
        dtypes: the dtypes the op supports (mdtensor DTypes).
        samples: ``samples(dtype, rng) -> iterable of SampleInput``.
        errors: ``errors() -> iterable of ErrorInput``.
        rtol/atol: comparison tolerances per dtype kind ('f', 'c'), or overrides.
        differentiable: gradcheck the op in float64.
        supports_out/inplace: sweep the generated variants (structured ops).
    """

    ref: Callable | None = None
    dtypes: tuple = ()
    samples: Callable | None = None
    errors: Callable | None = None
    rtol: float | None = None
    atol: float | None = None
    differentiable: bool = True
    skip: tuple = ()  # names of sweep checks to skip, each with a reason in a comment


@dataclass
class OpDecl:
    """A catalogue entry (see the module docstring)."""

    name: str
    overloads: list = field(default_factory=list)  # every OpOverload it defined
    functional: list = field(default_factory=list)
    inplace: list = field(default_factory=list)
    out: list = field(default_factory=list)
    impl: Callable | None = None
    #: the NumPy-only computation (Note [NumPy fast impls], Note [Hand-written CPU kernels]),
    #: ``cpu_impl(xp, *args)``; a hand-written kernel's returns None where its generic
    #: kernel decides
    cpu_impl: Callable | None = None
    meta: Callable | None = None
    tags: tuple = ()
    info: OpInfo | None = None
    names: tuple = ()  # namespace function names
    methods: tuple = ()  # Tensor method names
    kwarg_aliases: dict = field(default_factory=dict)
    varargs: bool = False  # methods take x.view(2, 3) as well as x.view((2, 3))
    star_args: bool = False  # the namespace function takes *tensors (meshgrid, ...)
    #: the overloads Tensor methods resolve among (Note [Torch methods] in ops/_methods.py);
    #: empty: all of them
    method_overloads: tuple = ()
    accepts: str | None = None  # Note [Accepted dtypes] in ops/_accepted.py


CATALOGUE: dict[str, OpDecl] = {}


# ---------------------------------------------------------------------------------------
# Registration


def register(op, fn, key, **kw) -> None:
    op.register_kernel(Kernel(fn, key, origin="mdtensor", **kw))


def register_leaf(op, fn, key) -> None:
    """A kernel built from an ``impl``: it computes on raw arrays and calls no op."""
    register(op, fn, key, leaf=True)


def defop(
    schema: str,
    *,
    impl: Callable | None = None,
    structured: bool = False,
    inplace_impl: Callable | None = None,
    composite: Callable | None = None,
    explicit: Callable | None = None,
    kernels: dict | None = None,
    meta: Callable | None = None,
    tags: Iterable[str] = (),
    info: OpInfo | None = None,
    names: Iterable[str] | None = None,
    methods: Iterable[str] | None = None,
    kwarg_aliases: dict | None = None,
    decl: OpDecl | None = None,
    varargs: bool = False,
    cpu_impl: Callable | None = None,
    star_args: bool = False,
    promote_scalars: bool | str = True,
    method_overloads: Iterable[str] = (),
    accepts: str | None = None,
) -> OpDecl:
    """Declare an op (see the module docstring).

    Args:
        schema: the functional schema (for structured ops) or the op's only schema.
        impl: ``impl(xp, *args, **kwargs)`` on raw arrays; registered for ArrayAPI.
        structured: also define the in-place and ``out=`` variants from ``impl`` (Note
            [Structured ops] in ops/_impl_kernels.py).
        inplace_impl: ``inplace_impl(xp, out_array, *args, **kwargs)`` writing into
            ``out_array`` with the backend's ``out=`` (backends with ``ufunc_out``); it
            returns False when this backend's function takes no ``out=``, and the kernel
            computes and copies instead.
        composite: CompositeImplicitAutograd kernel (in terms of other md ops).
        explicit: CompositeExplicitAutograd kernel (other md ops; own derivative).
        kernels: extra kernels, ``{key name: fn}`` (e.g. a NumPy-specific ``"CPU"``).
        meta: ``meta(*args, **kwargs)`` -> ``(shape, dtype)`` (or a list/tuple of them).
        tags: PyTorch-style tags: pointwise, reduction, view, inplace, factory, ...
        info: OpInfo test data.
        names: namespace function names (default: the op name).
        methods: Tensor method names (default: none).
        kwarg_aliases: torch-style keyword spellings, ``{"dim": "axis"}``.
        decl: add this schema as one more overload of an existing declaration.
        varargs: Tensor methods also accept the int list as separate arguments.
        method_overloads: the overloads (names) Tensor methods resolve among, where the
            Array API and PyTorch give one call two meanings (Note [Torch methods] in
            ops/_methods.py).
        cpu_impl: an impl for the NumPy backend only (a direct CPU kernel, rung 1), where
            NumPy's own function is much faster than the generic one (Note [NumPy fast
            impls]).
        promote_scalars: the kernels bring a ``Scalar self``/``Scalar other`` and the other
            operand into the pairs the Array API specifies before calling ``impl`` (Note
            [Python scalars on strict backends] in ops/_promotion.py); False for an impl
            that converts its operands itself; ``"exact"`` for a comparison (Note
            [Integers out of range]).
        accepts: the dtype kinds the op's ``self`` and ``other`` may have (``"biuf"``:
            real; ``"fc"``: floating or complex); others raise TypeError naming the op
            (Note [Accepted dtypes] in ops/_accepted.py).  None: whatever the backend takes.
    """
    fschema = parse_schema(schema)
    tags = tuple(tags)
    if decl is None:
        decl = OpDecl(name=fschema.name, impl=impl, meta=meta, tags=tags, info=info,
                      names=tuple(names) if names is not None else (fschema.name,),
                      methods=tuple(methods or ()), kwarg_aliases=dict(kwarg_aliases or {}),
                      varargs=varargs, star_args=star_args,
                      method_overloads=tuple(method_overloads), accepts=accepts)
        key = f"{fschema.namespace}::{fschema.name}"
        if key in CATALOGUE:
            raise RuntimeError(f"{key} is declared twice in the catalogue")
        CATALOGUE[key] = decl
    view = fschema.is_view
    if view and "view" not in tags:
        tags = tags + ("view",)
    op = define(fschema, tags=tags)
    op.decl = decl
    decl.overloads.append(op)
    (decl.inplace if fschema.is_inplace else decl.out if fschema.is_out
     else decl.functional).append(op)
    # the impl the kernels call (the structured variants below wrap ``impl`` for their own
    # schemas)
    accepts = decl.accepts
    kimpl = prepared_impl(impl, fschema, accepts, promote_scalars)
    raw_inplace_impl = inplace_impl  # for the structured variants, which check for themselves
    inplace_impl = with_accepted_kinds(inplace_impl, fschema, accepts, offset=2)
    if isinstance(cpu_impl, Ufunc) and accepts:
        # the ufunc serves the accepted kinds only; the rest reach the checking impl
        cpu_impl = Ufunc(cpu_impl.fn, True, "".join(k for k in cpu_impl.kinds if k in accepts)
                         if cpu_impl.floats_only else accepts)
    elif cpu_impl is not None:
        cpu_impl = with_accepted_kinds(cpu_impl, fschema, accepts)
    if impl is not None:
        register_leaf(op, prepared_kernel(fschema, kimpl, inplace_impl), DispatchKey.ArrayAPI)
    if cpu_impl is not None and not (fschema.is_inplace or fschema.is_out):
        decl.cpu_impl = decl.cpu_impl or cpu_impl
        cpu_kernel = (ufunc_kernel(fschema, cpu_impl, kimpl) if isinstance(cpu_impl, Ufunc)
                      else array_api_kernel(fschema, cpu_impl))
        register_leaf(op, cpu_kernel, DispatchKey.CPU)
    elif (isinstance(cpu_impl, Ufunc) and fschema.is_inplace and impl is not None
          and cpu_impl.fn.signature is None):
        # Elementwise ufuncs only: a generalized ufunc (matmul) broadcasts its result into
        # ``out``, where PyTorch's in-place rule wants an error.
        generic = prepared_kernel(fschema, kimpl, inplace_impl)
        register_leaf(op, ufunc_inplace_kernel(fschema, cpu_impl, generic), DispatchKey.CPU)
    elif (isinstance(cpu_impl, Ufunc) and fschema.is_out and impl is not None
          and cpu_impl.fn.signature is None):
        generic = prepared_kernel(fschema, kimpl, inplace_impl)
        register_leaf(op, ufunc_out_kernel(fschema, cpu_impl, generic), DispatchKey.CPU)
    if composite is not None:
        register(op, composite, DispatchKey.CompositeImplicitAutograd)
    if explicit is not None:
        register(op, explicit, DispatchKey.CompositeExplicitAutograd)
    for key_name, fn in (kernels or {}).items():
        register(op, fn, DispatchKey[key_name])
    if meta is None and "dynamic_output_shape" in tags:
        meta = _data_dependent(fschema.name)
    if meta is not None and "Meta" not in (kernels or {}):
        register(op, meta_kernel(fschema, with_accepted_kinds(meta, fschema, accepts, 0)),
                  DispatchKey.Meta)
    _packet_aliases(op, decl)
    if structured:
        if not impl:
            raise ValueError(f"{fschema.full_name}: a structured op needs impl=")
        inplace_s, out_s = structured_variants(fschema)
        for s in (inplace_s, out_s):
            defop(s, impl=impl, inplace_impl=raw_inplace_impl, meta=meta, tags=tags, decl=decl,
                  cpu_impl=cpu_impl if isinstance(cpu_impl, Ufunc) else None,
                  promote_scalars=promote_scalars)
        if not any(t == "inplace" for t in tags):
            decl.inplace[-1].tags = decl.inplace[-1].tags | {"inplace"}
    return decl


def structured_variants(schema: FunctionSchema) -> tuple[str, str]:
    """The in-place and out= schema strings of a functional schema."""
    args = [str(a) for a in schema.arguments]
    positional = [str(a) for a in schema.arguments if not a.kwarg_only]
    kwonly = [str(a) for a in schema.arguments if a.kwarg_only]
    ns = "" if schema.namespace == "aten" else schema.namespace + "::"
    ov = schema.overload_name
    self_arg = schema.arguments[0]
    inplace_first = str(self_arg).replace(str(self_arg.type), "Tensor(a!)", 1)
    inplace = (f"{ns}{schema.name}_{'.' + ov if ov else ''}"
               f"({', '.join([inplace_first] + args[1:])}) -> Tensor(a!)")
    out_ov = "out" if ov in ("", "Tensor") else f"{ov}_out"
    out_args = positional + ["*"] + kwonly + ["Tensor(a!) out"]
    out = f"{ns}{schema.name}.{out_ov}({', '.join(out_args)}) -> Tensor(a!)"
    return inplace, out


def _data_dependent(name: str) -> Callable:
    """The meta function of an op whose output shape depends on the values (nonzero,
    unique): it raises, as PyTorch's Meta kernels of such ops do, saying why."""
    def meta(*args, **kwargs):
        raise NotImplementedError(f"{name}: the output shape is data-dependent; meta and "
                                  f"fake tensors cannot compute it")
    return meta


def _packet_aliases(op, decl) -> None:
    if decl.kwarg_aliases:
        op.overloadpacket.add_kwarg_aliases(decl.kwarg_aliases)
