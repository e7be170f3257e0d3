"""mdtensor: a NumPy-like tensor library with a PyTorch-style dispatcher.

``import mdtensor as md`` gives an Array API standard namespace (``md.asarray``, ``md.add``,
``md.linalg``, ``md.fft``, ...) with torch-style tensors: autograd, in-place ``_`` methods,
``out=``, views and devices.  Every op is declared once in the catalogue (``mdtensor.ops``)
and dispatched by key set through the functionality layers (docs/ARCHITECTURE.md).

``__all__`` is the public namespace: the catalogue's namespace functions (bound by
``ops._methods.install``, listed from the catalogue at import) plus the names bound below.
"""

__version__ = "0.1.0"
__array_api_version__ = "2025.12"
_SUPPORTED_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")

from mdtensor.dispatch.keys import DispatchKey, DispatchKeySet  # noqa: E402
from mdtensor.tensors.device import Device, set_default_device  # noqa: E402
from mdtensor.tensors.factories import asarray, from_numpy, tensor  # noqa: E402
from mdtensor.tensors.tensor import Tensor  # noqa: E402

from . import _dtypes as _dtypes_mod  # noqa: E402
from ._dtypes import (  # noqa: E402
    DType,
    bfloat16,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._dtypes import (
    bool_ as bool,  # noqa: A001  (the Array API spells it md.bool)
)

# PyTorch spellings of dtypes.
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

from . import layers, ops  # noqa: E402  (ops: the catalogue declares its ops on import)
from .ops import _methods  # noqa: E402
from .ops.manipulation import broadcast_shapes  # noqa: E402  (namespace functions, not ops)
from .ops.sparse import sparse_coo_tensor, sparse_csr_tensor  # noqa: E402
from .tensors.factories import from_dlpack  # noqa: E402
from .tensors.layout import Layout, sparse_coo, sparse_csr, strided  # noqa: E402

layers.install()  # every layer's fallback and per-op kernels, the catalogue's ops included
_methods.install(globals())

from . import (  # noqa: E402,F401  # noqa: E402,F401
    _namespace,  # noqa: E402
    autograd,
    backends,  # noqa: E402,F401
    fft,
    func,  # noqa: E402,F401
    library,  # noqa: E402,F401
    linalg,
    modes,  # noqa: E402,F401
    testing,
)
from ._namespace import *  # noqa: E402,F401,F403  (constants, dtype functions, info)
from ._sampling import (  # noqa: E402,F401
    bernoulli,
    multinomial,
    normal,
    rand_like,
    randint_like,
    randn_like,
    randperm,
)
from .autograd import (  # noqa: E402,F401
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .compiler import compile  # noqa: E402,F401,A004  (md.compile, as torch.compile)
from .modes import DispatchMode  # noqa: E402,F401
from .random import Generator, manual_seed, rand, randint, randn  # noqa: E402,F401
from .tensors.format import get_printoptions, set_printoptions  # noqa: E402,F401

__all__ = sorted(
    {name for decl in ops.CATALOGUE.values() for name in decl.names
     if decl.overloads and decl.overloads[0].overloadpacket._namespace == "aten"}
    | set(_namespace.__all__)
    | {"DType", "Device", "DispatchKey", "DispatchKeySet", "DispatchMode", "Generator",
       "Tensor", "Layout", "asarray", "sparse_coo", "sparse_csr", "sparse_coo_tensor",
       "sparse_csr_tensor", "strided", "broadcast_shapes", "from_dlpack", "from_numpy", "tensor",
       "set_default_device", "get_default_dtype", "set_default_dtype", "get_printoptions",
       "set_printoptions", "bool", "bfloat16", "complex64",
       "complex128", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
       "uint8", "uint16", "uint32", "uint64", "float", "double", "half", "long", "int",
       "short", "cfloat", "cdouble", "enable_grad", "inference_mode", "is_grad_enabled",
       "is_inference_mode_enabled", "no_grad", "set_grad_enabled", "manual_seed", "rand",
       "randint", "randn", "bernoulli", "multinomial", "normal", "rand_like", "randint_like",
       "randn_like", "randperm", "autograd", "backends", "compile", "dask", "fft", "func",
       "library", "linalg", "modes", "ops", "random", "testing", "nn", "optim", "save", "load",
       "sparse"})


# Note [Lazy submodules]
# ~~~~~~~~~~~~~~~~~~~~~~
# ``md.nn``, ``md.optim``, ``md.save``, ``md.load`` and ``md.dask`` are imported on first
# use, so ``import mdtensor`` pays nothing for them (tests/test_nn.py checks what it imports;
# md.dask imports no Dask itself, tests/test_backends.py).
_LAZY = {"nn": ("mdtensor.nn", None), "optim": ("mdtensor.optim", None),
         "save": ("mdtensor._serialization", "save"), "load": ("mdtensor._serialization", "load"),
         "dask": ("mdtensor.dask", None), "sparse": ("mdtensor.sparse", None)}


def __getattr__(name: str):
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'mdtensor' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(spec[0])
    value = module if spec[1] is None else getattr(module, spec[1])
    globals()[name] = value
    return value
