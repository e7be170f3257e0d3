"""Linear algebra: matmul and friends (Array API linear algebra functions)."""

from __future__ import annotations

import numpy as np

from . import _meta_fns as mf
from ._decl import OpInfo, SampleInput, Ufunc, defop
from ._samples import make_array
from .elementwise import NUMERIC


def _matmul(xp, a, b):
    return xp.matmul(a, b)


def _matmul_samples(dtype, rng):
    shapes = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
              ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))]
    return [SampleInput((make_array(a, dtype, rng), make_array(b, dtype, rng)),
                        name=f"{a}@{b}") for a, b in shapes]


defop("matmul(Tensor self, Tensor other) -> Tensor", impl=_matmul, structured=True,
      cpu_impl=Ufunc(np.matmul),  # Note [NumPy fast impls]: compat wraps matmul
      meta=mf.matmul, methods=("matmul",),
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_matmul_samples))


# ---------------------------------------------------------------------------------------
# The Array API linear-algebra extension (md.linalg), plus tensordot/vecdot/outer.
# Ops live in aten as linalg_<name>; mdtensor/linalg.py exposes them as md.linalg.<name>.

from operator import attrgetter  # noqa: E402

from .elementwise import FLOATS  # noqa: E402

#: md.linalg name -> aten packet name (filled by _linalg below)
LINALG_NAMES: dict[str, str] = {"matmul": "matmul", "matrix_transpose": "matrix_transpose"}


#: ops whose formula the OpInfo sweep gradchecks on its samples (cholesky, eigh and
#: eigvalsh read one triangle of the input; their symmetric gradients are tested on
#: symmetrized inputs in tests/test_autograd_formulas.py)
_WITH_FORMULA = {"inv", "det", "solve", "outer", "vecdot", "trace", "cross", "diagonal",
                 "matrix_norm", "matrix_power", "pinv", "slogdet", "svdvals", "tensordot",
                 "vector_norm"}


def _linalg(name, schema_args, returns="Tensor", *, top_level=False, samples=None, ref=None,
            dtypes=FLOATS, meta=None, xp_fn=None):
    getter = xp_fn or attrgetter(f"linalg.{name}")
    aten_name = name if top_level else f"linalg_{name}"

    def impl(xp, *args, **kwargs):
        out = getter(xp)(*args, **kwargs)
        return tuple(out) if isinstance(out, tuple) else out

    impl.__name__ = name
    defop(f"{aten_name}({schema_args}) -> {returns}", impl=impl, meta=meta,
          names=(name,) if top_level else (), methods=(),
          info=OpInfo(ref=ref, dtypes=dtypes, samples=samples,
                      differentiable=name in _WITH_FORMULA) if ref else None)
    if not top_level or name in ("tensordot", "vecdot", "outer"):
        LINALG_NAMES[name] = aten_name


def _square(n=3, batch=()):
    def samples(dtype, rng):
        a = make_array(batch + (n, n), dtype, rng)
        return [SampleInput((a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=a.dtype),))]
    return samples


def _pair(sa, sb):
    def samples(dtype, rng):
        return [SampleInput((make_array(sa, dtype, rng), make_array(sb, dtype, rng)))]
    return samples


_linalg("cholesky", "Tensor self, *, bool upper=False", samples=_square(),
        ref=lambda a, upper=False: np.linalg.cholesky(a))
_linalg("cross", "Tensor self, Tensor other, *, int axis=-1", samples=_pair((4, 3), (4, 3)),
        ref=lambda a, b, axis=-1: np.cross(a, b, axis=axis))
_linalg("det", "Tensor self", samples=_square(), ref=np.linalg.det,
        meta=lambda a: (tuple(a.shape[:-2]), a.dtype))
_linalg("diagonal", "Tensor self, *, int offset=0", samples=_square(),
        ref=lambda a, offset=0: np.diagonal(a, offset, -2, -1))
_linalg("eigh", "Tensor self", "(Tensor eigenvalues, Tensor eigenvectors)")
_linalg("eigvalsh", "Tensor self", samples=_square(), ref=np.linalg.eigvalsh)
_linalg("eig", "Tensor self", "(Tensor eigenvalues, Tensor eigenvectors)")
_linalg("eigvals", "Tensor self")
_linalg("inv", "Tensor self", samples=_square(), ref=np.linalg.inv,
        meta=lambda a: (tuple(a.shape), a.dtype))


def _matrix_norm_samples(dtype, rng):
    # Every ord has a derivative; the sweep gradchecks the first three samples.  A random
    # non-square matrix has no ties among its column or row sums.
    a = make_array((3, 4), dtype, rng)
    return [SampleInput((a,), {"ord": o}, name=f"ord={o}")
            for o in ("fro", 1, -np.inf, np.inf, -1, "nuc", 2, -2)] + [
        SampleInput((make_array((2, 3, 3), dtype, rng),), {"ord": 1, "keepdims": True},
                    name="batched ord=1 keepdims")]


_linalg("matrix_norm", "Tensor self, *, bool keepdims=False, Any ord=\"fro\"",
        samples=_matrix_norm_samples, ref=lambda a, keepdims=False, ord="fro": np.linalg.norm(
            a, ord=ord, axis=(-2, -1), keepdims=keepdims))
_linalg("matrix_power", "Tensor self, int n", samples=lambda d, rng: [
    SampleInput((s.args[0], 3)) for s in _square()(d, rng)],
    ref=np.linalg.matrix_power)
_linalg("matrix_rank", "Tensor self, *, Any? rtol=None", samples=_square(),
        ref=lambda a, rtol=None: np.linalg.matrix_rank(a))
_linalg("outer", "Tensor self, Tensor other", samples=_pair((3,), (4,)), ref=np.outer,
        top_level=True, xp_fn=attrgetter("linalg.outer"))
_linalg("pinv", "Tensor self, *, Any? rtol=None", samples=_square(),
        ref=lambda a, rtol=None: np.linalg.pinv(a))
_linalg("qr", "Tensor self, *, str mode=\"reduced\"", "(Tensor Q, Tensor R)")
_linalg("slogdet", "Tensor self", "(Tensor sign, Tensor logabsdet)", samples=_square(),
        ref=lambda a: tuple(np.linalg.slogdet(a)))
_linalg("solve", "Tensor self, Tensor other", samples=lambda d, rng: [
    SampleInput((_square()(d, rng)[0].args[0], make_array((3,), d, rng)))],
    ref=np.linalg.solve)
_linalg("svd", "Tensor self, *, bool full_matrices=True", "(Tensor U, Tensor S, Tensor Vh)")
_linalg("svdvals", "Tensor self", samples=_square(),
        ref=lambda a: np.linalg.svd(a, compute_uv=False))
_linalg("tensordot", "Tensor self, Tensor other, *, Any axes=2", top_level=True,
        samples=_pair((2, 3, 4), (3, 4, 5)), xp_fn=attrgetter("tensordot"),
        ref=lambda a, b, axes=2: np.tensordot(a, b, axes))
_linalg("trace", "Tensor self, *, int offset=0, ScalarType? dtype=None", samples=_square(),
        ref=lambda a, offset=0: np.trace(a, offset, axis1=-2, axis2=-1))
_linalg("vecdot", "Tensor self, Tensor other, *, int axis=-1", top_level=True,
        samples=_pair((2, 3), (2, 3)), xp_fn=attrgetter("vecdot"),
        ref=lambda a, b, axis=-1: np.sum(a * b, axis=axis))
_linalg("vector_norm", "Tensor self, *, int[1]? axis=None, bool keepdims=False, "
        "Any ord=2", samples=_pair((2, 3), (1,)) and (lambda d, rng: [
            SampleInput((make_array((2, 3), d, rng),))]),
        ref=lambda a, axis=None, keepdims=False, ord=2: np.linalg.norm(
            a.reshape(-1) if axis is None else a, ord=ord, axis=axis, keepdims=keepdims))


def _mm(xp, a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return xp.matmul(a, b)


def _bmm(xp, a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"bmm: expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return xp.matmul(a, b)


def _dot(xp, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dot: expected 1-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return xp.vecdot(a, b)


defop("mm(Tensor self, Tensor mat2) -> Tensor", impl=_mm, meta=mf.matmul, methods=("mm",),
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_pair((2, 3), (3, 4))))
defop("bmm(Tensor self, Tensor mat2) -> Tensor", impl=_bmm, meta=mf.matmul, methods=("bmm",),
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_pair((2, 2, 3), (2, 3, 4))))
defop("dot(Tensor self, Tensor tensor) -> Tensor", impl=_dot, methods=("dot",),
      info=OpInfo(ref=np.dot, dtypes=FLOATS, samples=_pair((3,), (3,))))


def _einsum(xp, equation, operands):
    fn = getattr(xp, "einsum", None)
    if fn is None:
        raise NotImplementedError("einsum: this backend's namespace has no einsum")
    return fn(equation, *operands)


defop("einsum(str equation, Tensor[] tensors) -> Tensor", impl=_einsum,
      info=OpInfo(ref=lambda e, ts: np.einsum(e, *ts), dtypes=FLOATS,
                  samples=lambda d, rng: [SampleInput(("ij,jk->ik", [make_array((2, 3), d, rng),
                                                                   make_array((3, 4), d, rng)]))]))
