"""The CuPy backend's own CUDA kernels, for the hot contiguous cases.

Note [CUDA kernels of the CuPy backend]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Measured on an H200 (tools/gpu_check.sh), CuPy's own functions leave two costs that
PyTorch's CUDA kernels do not:

* **Bandwidth.** CuPy's generic elementwise kernels load one element per thread with
  64-bit index arithmetic: a 16M-element float32 ``add``, ``exp`` and in-place ``add``
  each took 82.6 us, where the memory's limit is about 45 us for ``add`` (192 MB at 4.3
  TB/s) and PyTorch took 50, 35 and 50 us.  The elementwise kernels here move 16 bytes per
  operand per load (four float32 or two float64 elements) in a grid-stride loop, as
  PyTorch's vectorised kernels do: 50.6, 37.6 and 51.0 us.
* **Launches.** A small-array op costs its launch, and CuPy spends 9-10 us of host time
  on an elementwise call, 15-19 us on a reduction (``sum(m, axis=0)`` of a (2, 4) array:
  18.8 us; PyTorch 9.6 us).  A composite (``log_softmax`` is a max, a subtract, an exp, a
  sum, a log and another subtract) pays it for each part, and so does a backward formula
  (``tanh_backward`` is ``g * (1 - y * y)``: three calls).  The kernels here launch a
  ``RawKernel`` directly (about 6 us) and do such an op in one launch: the fused
  ``tanh_backward``/``sigmoid_backward``, softmax and log-softmax and their backward over
  the last dimension (one block per row), and ``sum`` over all, the last or the leading
  dimensions of small inputs.

They serve those cases only: every tensor operand C-contiguous, 16-byte aligned (the
elementwise ones), on the current device, of one shape (elementwise) and one dtype
(float32 or float64; int32 and int64 for ``+ - *`` and ``neg``), no keyword argument
(``alpha=``), a non-empty input, and for in-place ops an operand that is the written buffer
itself or does not overlap it.  Anything else -- broadcasting, strides, mixed dtypes,
Python scalars, large reductions (where CuPy's kernels run at the memory's speed) --
takes the op's generic ArrayAPI kernel on CuPy's functions, so results and errors there
are the generic path's.  The arithmetic is CUDA's, as in CuPy's own kernels (IEEE
division, CUDA's libm, reductions accumulating in the input's dtype; rows of at most 32
elements are added in sequence in double, as the CPU backend's small sums); a reduction
sums in another order than CuPy's, so its last bits may differ.  Tests compare each
kernel with CuPy's results.

The kernels are compiled (NVRTC) on first use of a dtype, all of one dtype at once, and
cached by CuPy on disk.  They are registered for the CUDA key when the backend loads (rung
1, as the NumPy backend's ufunc kernels and the JAX backend's jitted ones), so a kernel a
user registers for CUDA still wins.
"""

from __future__ import annotations

import numpy as np

__all__ = ["install"]

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_CTYPES = {_F32: "float", _F64: "double", np.dtype(np.int32): "int",
           np.dtype(np.int64): "long long"}
_FLOATS = (_F32, _F64)
_ALL = tuple(_CTYPES)

# name -> (C expression of x (and y), dtypes it serves)
_UNARY = {
    "exp": ("exp(x)", _FLOATS),
    "log": ("log(x)", _FLOATS),
    "sqrt": ("sqrt(x)", _FLOATS),
    "tanh": ("tanh(x)", _FLOATS),
    "sin": ("sin(x)", _FLOATS),
    "cos": ("cos(x)", _FLOATS),
    "neg": ("-x", _ALL),
}
_BINARY = {
    "add": ("x + y", _ALL),
    "sub": ("x - y", _ALL),
    "mul": ("x * y", _ALL),
    "div": ("x / y", _FLOATS),
    # the fused backward formulas, in the generic impls' order (ops/nn.py)
    "tanh_backward": ("x * ((T)1 - y * y)", _FLOATS),
    "sigmoid_backward": ("x * (y * ((T)1 - y))", _FLOATS),
}
_ROWS = ("log_softmax", "softmax", "log_softmax_backward", "softmax_backward", "sum_rows",
         "sum_cols")

# Sizes above which the reductions leave the work to CuPy (their kernels are made for
# launch-bound inputs: one block per row, one thread per column).
_MAX_REDUCE = 1 << 20
_MAX_FULL_SUM = 1 << 16
# ... and above which a broadcast operand's kernel (an index modulo per element) does
_MAX_BROADCAST = 1 << 22
# Python ints up to this magnitude are exact as a double (a scalar operand's transport)
_EXACT_INT = 1 << 53

_COMMON = r"""
template <typename T> struct alignas(16) Vec { T v[16 / sizeof(T)]; };

template <typename T> __device__ T md_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ T md_inf();
template <> __device__ float md_inf<float>() { return __int_as_float(0x7f800000); }
template <> __device__ double md_inf<double>() {
    return __longlong_as_double(0x7ff0000000000000LL);
}
template <typename T> __device__ T md_add(T a, T b) { return a + b; }

// Reduce v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result.
template <typename T, T (*op)(T, T)>
__device__ T block_reduce(T v, T identity) {
    __shared__ T part[32];
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : identity;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) part[0] = v;
    __syncthreads();
    v = part[0];
    __syncthreads();
    return v;
}

#define MD_ROW(p) (p + (long long)blockIdx.x * cols)
#define MD_FOR_COLS for (long long c = threadIdx.x; c < cols; c += blockDim.x)

template <typename T>
__global__ void log_softmax(const T* x, T* out, long long cols) {
    const T* r = MD_ROW(x); T* o = MD_ROW(out);
    T m = -md_inf<T>();
    MD_FOR_COLS m = md_max(m, r[c]);
    m = block_reduce<T, md_max<T>>(m, -md_inf<T>());
    T s = 0;
    MD_FOR_COLS s += exp(r[c] - m);
    s = log(block_reduce<T, md_add<T>>(s, 0));
    MD_FOR_COLS o[c] = (r[c] - m) - s;
}

template <typename T>
__global__ void softmax(const T* x, T* out, long long cols) {
    const T* r = MD_ROW(x); T* o = MD_ROW(out);
    T m = -md_inf<T>();
    MD_FOR_COLS m = md_max(m, r[c]);
    m = block_reduce<T, md_max<T>>(m, -md_inf<T>());
    T s = 0;
    MD_FOR_COLS s += exp(r[c] - m);
    s = block_reduce<T, md_add<T>>(s, 0);
    MD_FOR_COLS o[c] = exp(r[c] - m) / s;
}

template <typename T>
__global__ void log_softmax_backward(const T* g, const T* y, T* out, long long cols) {
    const T* gr = MD_ROW(g); const T* yr = MD_ROW(y); T* o = MD_ROW(out);
    T s = 0;
    MD_FOR_COLS s += gr[c];
    s = block_reduce<T, md_add<T>>(s, 0);
    MD_FOR_COLS o[c] = gr[c] - exp(yr[c]) * s;
}

template <typename T>
__global__ void softmax_backward(const T* g, const T* y, T* out, long long cols) {
    const T* gr = MD_ROW(g); const T* yr = MD_ROW(y); T* o = MD_ROW(out);
    T s = 0;
    MD_FOR_COLS s += gr[c] * yr[c];
    s = block_reduce<T, md_add<T>>(s, 0);
    MD_FOR_COLS o[c] = gr[c] * yr[c] - yr[c] * s;
}

template <typename T>
__global__ void sum_rows(const T* x, T* out, long long cols) {
    const T* r = MD_ROW(x);
    if (cols <= 32) {  // in sequence, in double (Note [Small sums] in ops/reductions.py)
        if (threadIdx.x == 0) {
            double s = 0;
            for (long long c = 0; c < cols; ++c) s += r[c];
            out[blockIdx.x] = (T)s;
        }
        return;
    }
    T s = 0;
    MD_FOR_COLS s += r[c];
    s = block_reduce<T, md_add<T>>(s, 0);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

template <typename T>
__global__ void sum_cols(const T* x, T* out, long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    T s = 0;
    for (long long i = 0; i < rows; ++i) s += x[i * cols + c];
    out[c] = s;
}
"""

_ELEMENTWISE = r"""
template <typename T>
__global__ void {name}({params}, T* out, long long n) {{
    constexpr int W = 16 / sizeof(T);
    const long long nv = n / W;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = first; i < nv; i += step) {{
        {loads}
        Vec<T> r;
#pragma unroll
        for (int k = 0; k < W; ++k) {{
            {lanes}
            r.v[k] = {expr};
        }}
        reinterpret_cast<Vec<T>*>(out)[i] = r;
    }}
    const long long t = nv * W + first;  // the last n % W elements
    if (t < n) {{
        {tail}
        out[t] = {expr};
    }}
}}
"""


def _elementwise_source(name: str, expr: str, inputs: str) -> str:
    """A vectorised elementwise kernel of ``expr`` in ``x`` (and ``y``); ``inputs`` says
    what each of them is: ``a`` an array (``"a"``, ``"ab"``), ``s`` a scalar passed as a
    double and rounded to ``T`` once (a Python scalar's weak type: ``"as"``, ``"sa"``)."""
    params, loads, lanes, tail = [], [], [], []
    for var, (i, kind) in zip("xy", enumerate(inputs)):
        if kind == "s":
            params.append(f"double s{i}")
            lanes.append(f"const T {var} = (T)s{i};")
            tail.append(f"const T {var} = (T)s{i};")
        else:
            p = f"p{i}"
            params.append(f"const T* {p}")
            loads.append(f"const Vec<T> {p}v = reinterpret_cast<const Vec<T>*>({p})[i];")
            lanes.append(f"const T {var} = {p}v.v[k];")
            tail.append(f"const T {var} = {p}[t];")
    return _ELEMENTWISE.format(name=name, expr=expr, params=", ".join(params),
                               loads=" ".join(loads), lanes=" ".join(lanes),
                               tail=" ".join(tail))


_BROADCAST = r"""
// out[i] = op(a[i], b[i % m]): b broadcast along the leading dimensions of a
template <typename T>
__global__ void {name}(const T* a, const T* b, T* out, long long n, long long m) {{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {{
        const T x = a[i];
        const T y = b[i % m];
        out[i] = {expr};
    }}
}}
"""

_ARITHMETIC = ("add", "sub", "mul", "div")
_SOURCE = _COMMON + "".join(
    [_elementwise_source(f"ew_{n}", expr, "a") for n, (expr, _) in _UNARY.items()]
    + [_elementwise_source(f"ew_{n}", expr, "aa") for n, (expr, _) in _BINARY.items()]
    + [_elementwise_source(f"sc_{n}", _BINARY[n][0], "as") for n in _ARITHMETIC]
    + [_elementwise_source(f"rs_{n}", _BINARY[n][0], "sa") for n in _ARITHMETIC]
    + [_BROADCAST.format(name=f"bc_{n}", expr=_BINARY[n][0]) for n in _ARITHMETIC])


class _Kernels:
    """The compiled kernels, one CuPy ``RawModule`` per dtype, built on first use."""

    def __init__(self, cupy):
        self._cupy = cupy
        self._by_dtype: dict = {}
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        # Enough resident threads to fill every multiprocessor (2048 each on Hopper).
        self.max_blocks = sms * 8

    def get(self, dtype) -> dict:
        """``{kernel name: RawKernel}`` for ``dtype``."""
        table = self._by_dtype.get(dtype)
        if table is None:
            table = self._by_dtype[dtype] = self._compile(dtype)
        return table

    def _compile(self, dtype) -> dict:
        ctype = _CTYPES[dtype]
        names = [f"ew_{n}" for table in (_UNARY, _BINARY)
                 for n, (_, dtypes) in table.items() if dtype in dtypes]
        if dtype in _FLOATS:
            names += list(_ROWS)
            names += [f"{v}_{n}" for v in ("sc", "rs", "bc") for n in _ARITHMETIC]
        module = self._cupy.RawModule(code=_SOURCE, options=("-std=c++14",),
                                      name_expressions=[f"{n}<{ctype}>" for n in names])
        return {n: module.get_function(f"{n}<{ctype}>") for n in names}


# Note: ``_c_contiguous`` is CuPy's read-only attribute behind ``flags.c_contiguous``
# (which builds a Flags object per call: 0.27 us).


def _aligned(x, device: int) -> bool:
    """A C-contiguous array on the current device whose buffer starts on a 16-byte
    boundary."""
    data = x.data
    return x._c_contiguous and data.ptr % 16 == 0 and data.device_id == device


def _apart(x, y) -> bool:
    """``x`` and ``y`` are the same buffer or do not overlap (a kernel writing ``x`` while
    reading a shifted ``y`` would race)."""
    px, py = x.data.ptr, y.data.ptr
    return px == py or px + x.nbytes <= py or py + y.nbytes <= px


def _threads(cols: int) -> int:
    """Threads per row: a power of two from one warp to 512, about one per column."""
    t = 32
    while t < cols and t < 512:
        t *= 2
    return t


class _Builder:
    """Makes the kernels of the ops; each falls back to its op's generic kernel."""

    def __init__(self, cupy):
        self.k = _Kernels(cupy)
        self.empty = cupy.ndarray  # the constructor: cupy.empty is Python over it (2.2 us)
        self.current = cupy.cuda.runtime.getDevice

    def _grid(self, n: int, dtype) -> int:
        per_thread = 16 // dtype.itemsize
        return min(max(1, -(-(n // per_thread) // 256)), self.k.max_blocks)

    def unary(self, name, dtypes, generic):
        kname, serves, get, empty, current = f"ew_{name}", frozenset(dtypes), self.k.get, \
            self.empty, self.current
        grid = self._grid

        def kernel(a, *rest, **kwargs):
            x = a._data
            dtype = x.dtype
            if rest or kwargs or dtype not in serves or not x.size or not _aligned(
                    x, current()):
                return generic(a, *rest, **kwargs)
            out = empty(x.shape, dtype)
            n = x.size
            get(dtype)[kname]((grid(n, dtype),), (256,), (x, out, n))
            return a._device.wrap(out)
        return kernel

    def binary(self, name, dtypes, generic, inplace=False):
        kname, serves, get, empty, current = f"ew_{name}", frozenset(dtypes), self.k.get, \
            self.empty, self.current
        grid = self._grid

        def kernel(a, b, *rest, **kwargs):
            x = a._data
            y = b._data
            dtype = x.dtype
            if (rest or kwargs or b._device is not a._device or dtype != y.dtype
                    or x.shape != y.shape or not x.size or dtype not in serves):
                return generic(a, b, *rest, **kwargs)
            dev = current()
            if not (_aligned(x, dev) and _aligned(y, dev)) or inplace and not _apart(x, y):
                return generic(a, b)
            n = x.size
            out = x if inplace else empty(x.shape, dtype)
            get(dtype)[kname]((grid(n, dtype),), (256,), (x, y, out, n))
            return a if inplace else a._device.wrap(out)
        return kernel

    def scalar(self, name, generic, reverse=False):
        """``tensor op python_scalar`` (``.Scalar``), or reversed (``.Scalar_Tensor``), for
        float tensors: the scalar rounded to the tensor's dtype, as a weak scalar is."""
        kname, get, empty, current = f"{'rs' if reverse else 'sc'}_{name}", self.k.get, \
            self.empty, self.current
        grid = self._grid

        def kernel(*args, **kwargs):
            if len(args) != 2 or kwargs:
                return generic(*args, **kwargs)
            s, a = args if reverse else args[::-1]
            x = a._data
            dtype = x.dtype
            if (type(s) not in (float, int) or dtype not in _FLOATS or not x.size
                    or type(s) is int and abs(s) > _EXACT_INT or not _aligned(x, current())):
                return generic(*args)
            out = empty(x.shape, dtype)
            n = x.size
            operands = (float(s), x) if reverse else (x, float(s))
            get(dtype)[kname]((grid(n, dtype),), (256,), (*operands, out, n))
            return a._device.wrap(out)
        return kernel

    def broadcast(self, name, generic, commutes):
        """``x op y`` with ``y`` of ``x``'s trailing shape (a bias), or -- for ``+`` and
        ``*``, whose IEEE results do not depend on the order -- ``x`` of ``y``'s; the
        other cases go to ``same_shape``, a kernel for operands of one shape."""
        kname, get, empty, current = f"bc_{name}", self.k.get, self.empty, self.current
        same_shape = generic

        def kernel(a, b, *rest, **kwargs):
            x = a._data
            y = b._data
            dtype = x.dtype
            if (rest or kwargs or x.shape == y.shape or b._device is not a._device
                    or dtype != y.dtype or dtype not in _FLOATS):
                return same_shape(a, b, *rest, **kwargs)
            if commutes and x.ndim < y.ndim:
                x, y = y, x
            n, m = x.size, y.size
            if (not m or not n or y.ndim > x.ndim or x.shape[x.ndim - y.ndim:] != y.shape
                    or n > _MAX_BROADCAST):
                return same_shape(a, b)
            dev = current()
            if not (x._c_contiguous and y._c_contiguous and x.data.device_id == dev
                    and y.data.device_id == dev):
                return same_shape(a, b)
            out = empty(x.shape, dtype)
            get(dtype)[kname]((min(-(-n // 256), self.k.max_blocks),), (256,),
                              (x, y, out, n, m))
            return a._device.wrap(out)
        return kernel

    def rows(self, kname, arity, generic):
        """An op over the last dimension of its (one or two) inputs, one block per row:
        ``kernel(x[, y], dim)``."""
        get, empty, current = self.k.get, self.empty, self.current

        def kernel(*args, **kwargs):
            tensors = args[:arity]
            dim = args[arity] if len(args) > arity else kwargs.get("dim", -1)
            x = tensors[0]._data
            dtype = x.dtype
            ndim = x.ndim
            if (len(args) > arity + 1 or len(kwargs) > ("dim" in kwargs) or not ndim
                    or type(dim) is not int or dim not in (-1, ndim - 1)
                    or dtype not in _FLOATS or not x.size):
                return generic(*args, **kwargs)
            dev = current()
            arrays = [t._data for t in tensors]
            if any(t._device is not tensors[0]._device or a.dtype != dtype
                   or a.shape != x.shape or not a._c_contiguous
                   or a.data.device_id != dev for t, a in zip(tensors, arrays)):
                return generic(*args, **kwargs)
            cols = x.shape[-1]
            out = empty(x.shape, dtype)
            get(dtype)[kname]((x.size // cols,), (_threads(cols),), (*arrays, out, cols))
            return tensors[0]._device.wrap(out)
        return kernel

    def sum(self, generic):
        get, empty, current = self.k.get, self.empty, self.current

        def kernel(a, axis=None, keepdims=False, *, dtype=None):
            x = a._data
            ndim = x.ndim
            n = x.size
            if (dtype is not None or not ndim or x.dtype not in _FLOATS or not n
                    or n > _MAX_REDUCE or type(keepdims) is not bool or not (
                        x._c_contiguous and x.data.device_id == current())):
                return generic(a, axis, keepdims, dtype=dtype)
            axes = _axes(axis, ndim)
            if axes is None:
                return generic(a, axis, keepdims)
            k = len(axes)
            if axes == tuple(range(ndim - k, ndim)):  # trailing: one block per row
                cols = 1
                for s in x.shape[ndim - k:]:
                    cols *= s
                if k == ndim and n > _MAX_FULL_SUM:
                    return generic(a, axis, keepdims)
                out = empty(x.shape[:ndim - k], x.dtype)
                get(x.dtype)["sum_rows"]((n // cols,), (_threads(cols),), (x, out, cols))
            elif axes == tuple(range(k)):  # leading: one thread per column
                rows = 1
                for s in x.shape[:k]:
                    rows *= s
                cols = n // rows
                out = empty(x.shape[k:], x.dtype)
                get(x.dtype)["sum_cols"]((-(-cols // 256),), (256,), (x, out, rows, cols))
            else:
                return generic(a, axis, keepdims)
            if keepdims:
                out = out.reshape(tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
            return a._device.wrap(out)
        return kernel


class _Gemm:
    """2-D float matrix products with cuBLAS's gemm called directly: ``cupy.matmul``
    spends 25-50 us of host time per call on its generalised-ufunc machinery, several
    times the launch (Note [CUDA kernels of the CuPy backend])."""

    def __init__(self, cupy):
        from cupy_backends.cuda.libs import cublas

        self._cublas = cublas
        self._handle = cupy.cuda.device.get_cublas_handle
        self._empty = cupy.ndarray
        self._gemm = {_F32: cublas.sgemm, _F64: cublas.dgemm}
        # alpha = 1 and beta = 0 in host memory, kept alive with their addresses
        self._consts = {}
        for dt in _FLOATS:
            one, zero = np.ones((), dt), np.zeros((), dt)
            self._consts[dt] = (one, zero, one.ctypes.data, zero.ctypes.data)

    def __call__(self, a, b):
        """``a @ b`` of 2-D arrays of one float dtype on the current device, or None
        where this does not apply (empty, strides cuBLAS cannot take, huge)."""
        la, lb = _layout(a), _layout(b)
        m, k = a.shape
        n = b.shape[1]
        if la is None or lb is None or not (m and n and k) or max(m, n, k) >= 1 << 31:
            return None
        out = self._empty((m, n), a.dtype)
        _, _, one, zero = self._consts[a.dtype]
        handle = self._handle()
        self._cublas.setPointerMode(handle, _POINTER_MODE_HOST)
        # Row-major C = A B is column-major C^T = B^T A^T (Note [Row-major gemm])
        self._gemm[a.dtype](handle, lb[0], la[0], n, m, k, one, b.data.ptr, lb[1],
                            a.data.ptr, la[1], zero, out.data.ptr, n)
        return out


# Note [Row-major gemm]
# ~~~~~~~~~~~~~~~~~~~~~
# cuBLAS reads column-major matrices.  A row-major matrix X (r x c, rows contiguous,
# leading stride ld >= c) is, in memory, the column-major X^T with that ld, so the
# row-major product C = A B (C fresh and C-contiguous, ldc = n) is computed as the
# column-major C^T = B^T A^T, each operand passed untransposed (OP_N).  A matrix whose
# columns are contiguous (a transposed view: ``w.T``, ``x.mT``) is the column-major X
# itself and is passed with OP_T.  ``_layout`` gives (op, ld) for either; other strides
# (steps, negative strides) take the generic kernel.


def _layout(x):
    r, c = x.shape
    sr, sc = x.strides
    isz = x.itemsize
    if c == 1 or sc == isz:  # rows contiguous
        ld = sr // isz if r > 1 else c
        if r == 1 or (sr % isz == 0 and ld >= c):
            return _OP_N, max(ld, 1)
    if r == 1 or sr == isz:  # columns contiguous
        ld = sc // isz if c > 1 else r
        if c == 1 or (sc % isz == 0 and ld >= r):
            return _OP_T, max(ld, 1)
    return None


_OP_N, _OP_T = 0, 1  # cublasOperation_t
_POINTER_MODE_HOST = 0  # cublasPointerMode_t: alpha and beta in host memory


def _gemm_operands(tensors, current):
    """Whether the tensors are 2-D, on one device (the current one), of one float
    dtype."""
    d = tensors[0]._device
    dtype = tensors[0]._data.dtype
    dev = current()
    for t in tensors:
        x = t._data
        if t._device is not d or x.ndim != 2 or x.dtype != dtype or x.data.device_id != dev:
            return False
    return dtype in _FLOATS


def _matmul_kernels(gemm, current, generic_mm, generic_bw):
    def matmul(a, b):
        if _gemm_operands((a, b), current) and a._data.shape[1] == b._data.shape[0]:
            r = gemm(a._data, b._data)
            if r is not None:
                return a._device.wrap(r)
        return generic_mm(a, b)

    def matmul_backward(g, a, b, mask):
        # as the CPU kernel (ops/linalg.py): the gradients of two real matrices
        if len(mask) == 2 and _gemm_operands((g, a, b), current):
            gd, ad, bd = g._data, a._data, b._data
            ga = gemm(gd, bd.T) if mask[0] else None
            gb = gemm(ad.T, gd) if mask[1] else None
            if (ga is not None or not mask[0]) and (gb is not None or not mask[1]):
                wrap = g._device.wrap
                return (None if ga is None else wrap(ga)), (None if gb is None else wrap(gb))
        return generic_bw(g, a, b, mask)
    return matmul, matmul_backward


def _axes(axis, ndim):
    """The sorted, non-negative, distinct axes of ``axis`` (None: all), or None when they
    are not valid (the generic kernel then raises its error)."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if type(axis) is int else axis
    if type(items) not in (tuple, list) or any(type(i) is not int for i in items):
        return None
    if any(not -ndim <= i < ndim for i in items):
        return None
    axes = tuple(sorted({i % ndim for i in items}))
    return axes if len(axes) == len(items) else None


def kernels(cupy, aten):
    """``(overload, kernel)`` pairs for the CUDA key; each falls back to the op's generic
    ArrayAPI kernel (the one the CUDA key has without them)."""
    from mdtensor.dispatch.keys import DispatchKey

    def generic(op):
        kernel, _ = op.resolve(DispatchKey.ArrayAPI)
        return kernel.fn

    b = _Builder(cupy)
    pairs = []
    for name, (_, dtypes) in _UNARY.items():
        op = getattr(aten, name).default
        pairs.append((op, b.unary(name, dtypes, generic(op))))
    for name, (_, dtypes) in _BINARY.items():
        packet = getattr(aten, name)
        if name.endswith("_backward"):
            pairs.append((packet.default, b.binary(name, dtypes, generic(packet.default))))
            continue
        same_shape = b.binary(name, dtypes, generic(packet.Tensor))
        if name in _ARITHMETIC:  # and a bias broadcast along the leading dimensions
            same_shape = b.broadcast(name, same_shape, commutes=name in ("add", "mul"))
        pairs.append((packet.Tensor, same_shape))
        inplace = getattr(aten, name + "_").Tensor
        pairs.append((inplace, b.binary(name, dtypes, generic(inplace), inplace=True)))
    for op_name, kname, arity in (("log_softmax", "log_softmax", 1),
                                  ("softmax", "softmax", 1),
                                  ("_log_softmax_backward_data", "log_softmax_backward", 2),
                                  ("_softmax_backward_data", "softmax_backward", 2)):
        op = getattr(aten, op_name).default
        pairs.append((op, b.rows(kname, arity, generic(op))))
    op = aten.sum.default
    pairs.append((op, b.sum(generic(op))))
    for name in _ARITHMETIC:
        packet = getattr(aten, name)
        pairs.append((packet.Scalar, b.scalar(name, generic(packet.Scalar))))
        pairs.append((packet.Scalar_Tensor,
                      b.scalar(name, generic(packet.Scalar_Tensor), reverse=True)))
    mm, bw = aten.matmul.default, aten.matmul_backward.default
    pairs += zip((mm, bw), _matmul_kernels(_Gemm(cupy), b.current, generic(mm), generic(bw)))
    for op, fn in pairs:
        fn.__name__ = fn.__qualname__ = f"cuda_kernel[{op.name}]"
    return pairs


def install(cupy) -> None:
    """Register the kernels for the CUDA key."""
    from mdtensor.backends._base import push_backend_kernel

    from mdtensor import ops

    for op, fn in kernels(cupy, ops.aten):
        push_backend_kernel(op, fn, "CUDA", "mdtensor (CuPy backend)")
