"""Fused Dask tasks reusing their dying temporaries (backends/dask_buffers.py, Note
[Temporaries in fused Dask tasks]): the values are bit for bit those of the graph Dask
would run, no input, constant or result is written to, and the reuse happens (less NumPy
memory at the peak).  Skips as a whole without Dask."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mdtensor as md

pytest.importorskip("dask.array", reason="Dask not installed (pip install -e '.[dask]')")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from mdtensor.backends.dask_buffers import IntoOperand, reusing_buffers  # noqa: E402


def plain(*tensors):
    """The values of Dask tensors from the graph Dask optimises and runs by itself."""
    return [np.asarray(v) for v in dask.compute(*(md.dask.to_dask(t) for t in tensors),
                                                scheduler="sync")]


def reusing(*tensors):
    """The same through md.dask.compute (which reuses), as NumPy arrays."""
    with md.dask.use("synchronous"):
        return [t.numpy() for t in md.dask.compute(*tensors)]


def assert_bitwise(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes(), (g, w)


def rewritten_calls(*tensors) -> list:
    """The ufunc nodes of the graph md.dask.compute runs that write into an operand."""
    from dask._task_spec import Task, _execute_subgraph
    from dask.highlevelgraph import HighLevelGraph

    arrays = [md.dask.to_dask(t) for t in tensors]
    with reusing_buffers():
        graph = da.Array.__dask_optimize__(
            HighLevelGraph.merge(*(a.__dask_graph__() for a in arrays)),
            [a.__dask_keys__() for a in arrays])
    found = []

    def visit(node):
        if isinstance(node, Task) and node.func is _execute_subgraph:
            for inner in node.args[0].values():
                visit(inner)
        elif isinstance(node, Task) and isinstance(node.func, IntoOperand):
            found.append(node.func)

    for node in graph.values():
        visit(node)
    return found


# ---------------------------------------------------------------------------------------
# The same values


_UNARY = ["exp", "neg", "abs", "sqrt", "tanh", "square"]
_BINARY = ["add", "sub", "mul", "div", "maximum", "pow"]


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_chains_of_elementwise_ops_give_the_same_bits(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int8, np.int32]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6))
    other = data.draw(hnp.broadcastable_shapes(shape, min_dims=0, max_side=6))
    elements = (st.integers(-5, 5) if np.dtype(dtype).kind == "i"
                else st.floats(-3, 3, width=32))
    a0 = data.draw(hnp.arrays(dtype, shape, elements=elements))
    b0 = data.draw(hnp.arrays(data.draw(st.sampled_from([dtype, np.float32, np.float64])),
                              other, elements=st.integers(-3, 3)))
    chunks = tuple(max(1, s // 2) for s in shape)
    a = md.asarray(a0, device="dask", chunks=chunks)
    b = md.asarray(b0, device="dask")
    x = a
    for _ in range(data.draw(st.integers(1, 6))):
        name = data.draw(st.sampled_from(_UNARY + _BINARY))
        if name in _UNARY:
            x = getattr(md, name)(x.to(md.float32) if name in ("sqrt", "tanh") else x)
        else:
            operand = data.draw(st.sampled_from(["b", "x", "int", "float"]))
            y = {"b": b, "x": x, "int": 2, "float": 0.5}[operand]
            if name == "pow":  # a float base: PyTorch refuses negative integer powers
                x, y = md.abs(x).to(md.float32), {"b": 2, "x": 0.5}.get(operand, y)
            x = getattr(md, name)(x, y)
    with np.errstate(all="ignore"):
        want, extra = plain(x, a + b)
        got, got_extra = reusing(x, a + b)
    assert_bitwise([got, got_extra], [want, extra])
    assert_bitwise(plain(a, b), [a0, b0])  # the inputs, as made


def test_the_logistic_gradient_step_gives_the_same_bits():
    from benchmarks.dask_bench import md_step

    X = da.random.default_rng(0).standard_normal((4000, 32), dtype=np.float32,
                                                 chunks=(500, 32))
    y = (X[:, 0] > 0).astype(np.float32)
    X, y = dask.persist(X, y)
    X0, y0 = dask.compute(X, y)
    step = md_step(md, md.dask.from_dask(X), md.dask.from_dask(y))
    assert rewritten_calls(*step)  # the gradient's chains write into their temporaries
    assert_bitwise(reusing(*step), plain(*step))
    assert_bitwise(dask.compute(X, y), [X0, y0])  # the persisted chunks, untouched


# ---------------------------------------------------------------------------------------
# Nothing seen is written to


def test_inputs_constants_and_results_read_elsewhere_keep_their_values():
    host = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    x = md.asarray(host, device="dask", chunks=4)   # a constant of the graph
    p = md.dask.persist(md.exp(md.asarray(host, device="dask", chunks=4)))  # computed chunks
    e = md.exp(x * 2)                               # a result, and read by f
    f = (e + 1) * 3
    g = md.sqrt(md.abs(p - 1)) + 1                  # from persisted chunks
    for _ in range(2):                              # the same graph twice: constants intact
        got = reusing(e, f, g, p, x)
        want = [np.exp(host * 2), (np.exp(host * 2) + 1) * 3,
                np.sqrt(np.abs(np.exp(host) - 1)) + 1, np.exp(host), host]
        for a, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, w)


def test_operands_the_result_cannot_live_in_are_left_alone():
    col = md.asarray(np.arange(4.0).reshape(4, 1), device="dask")
    row = md.asarray(np.arange(3.0).reshape(1, 3), device="dask")
    wider = md.exp(col) + md.exp(row)          # (4, 1) and (1, 3) temporaries: (4, 3) result
    ints = md.asarray(np.arange(6, dtype=np.int8), device="dask", chunks=3)
    halves = (ints * 3) / 2                    # int8 temporary, float32 result
    flags = md.exp(md.asarray([1.0, 2.0], device="dask")) > 3   # float temporary, bool result
    assert_bitwise(reusing(wider, halves, flags), plain(wider, halves, flags))
    np.testing.assert_array_equal(reusing(wider)[0], np.exp(np.arange(4.0))[:, None]
                                  + np.exp(np.arange(3.0))[None, :])


# ---------------------------------------------------------------------------------------
# The reuse happens


def _numpy_peak(fn) -> int:
    """The peak of NumPy's traced memory while ``fn`` runs, above its start."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_a_chain_on_a_chunk_holds_one_temporary_instead_of_two():
    n = 1 << 20  # 8 MB of float64 in one chunk
    x = md.dask.persist(md.asarray(np.linspace(0.0, 1.0, n), device="dask", chunks=n))
    s = md.sqrt(md.exp(x) * 2 + 1).sum()
    with md.dask.use("synchronous"):
        reused = _numpy_peak(lambda: md.dask.compute(s))
    fresh = _numpy_peak(lambda: plain(s))
    assert reused < 1.5 * 8 * n <= fresh, (reused, fresh)


def test_deeply_nested_fused_tasks_are_spliced_with_the_same_bits():
    x = md.asarray(np.linspace(0.5, 5.0, 12).reshape(3, 4), device="dask", chunks=2)
    y = md.digamma(x)  # a composite: fused tasks nested some 26 deep
    assert_bitwise(reusing(y), plain(y))
