"""Random numbers: ``md.manual_seed``, per-device generators, ``rand``/``randn``/``randint``.

Each device type has a default ``Generator`` (as in PyTorch).  Generators draw with NumPy's
PCG64 on the host and move the numbers to the device, so every backend gives the same
numbers for the same seed -- except Dask, whose chunks draw from streams of their own so
that no array is ever whole in memory (Note [Random numbers on Dask] in
backends/dask_backend.py).
"""

from __future__ import annotations

import threading as _threading

import numpy as _np

from mdtensor.tensors.device import as_device
from mdtensor.tensors.factories import asarray, check_size
from mdtensor.tensors.tensor import capture_hooks

from ._dtypes import as_dtype, get_default_dtype, int64

__all__ = ["Generator", "default_generator", "manual_seed", "rand", "randint", "randn", "seed"]

_lock = _threading.Lock()
_defaults: dict[str, Generator] = {}


class Generator:
    """A random number generator for one device (state: a NumPy PCG64 bit generator)."""

    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self._rng = _np.random.Generator(_np.random.PCG64())
        self._seed = None

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, (int, _np.integer)):
            raise TypeError(f"manual_seed: expected an int seed, got {type(seed).__name__}")
        self._seed = int(seed)
        self._rng = _np.random.Generator(_np.random.PCG64(int(seed) & ((1 << 64) - 1)))
        return self

    def initial_seed(self):
        return self._seed

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self._rng.bit_generator.state = state
        return self

    def __repr__(self) -> str:
        return f"<md.Generator device={self.device}>"


def default_generator(device=None) -> Generator:
    dev = as_device(device)
    with _lock:
        gen = _defaults.get(dev.type)
        if gen is None:
            gen = _defaults[dev.type] = Generator(dev)
        return gen


def manual_seed(seed: int) -> None:
    """Seed the default generator of every device type (loaded or not yet)."""
    if not isinstance(seed, (int, _np.integer)):
        raise TypeError(f"manual_seed: expected an int seed, got {type(seed).__name__}")
    with _lock:  # the seed and the generators change together (Note [Seeding threads])
        _seed_all[0] = int(seed)
        for gen in _defaults.values():
            gen.manual_seed(seed)


_seed_all = [None]


def seed() -> int:
    s = int(_np.random.SeedSequence().entropy % (1 << 63))
    manual_seed(s)
    return s


# Note [Seeding threads]
# ~~~~~~~~~~~~~~~~~~~~~~
# ``manual_seed`` seeds the default generators of every device type, also those made later:
# a default generator made after the call is seeded on first use.  The seed and the
# generators are read and changed under ``_lock``, so threads drawing while another seeds
# never reseed a generator twice or see a half-changed state.


def _gen(generator, device) -> Generator:
    if generator is not None:
        return generator
    gen = default_generator(device)
    if _seed_all[0] is not None and gen._seed != _seed_all[0]:
        with _lock:  # Note [Seeding threads]
            if _seed_all[0] is not None and gen._seed != _seed_all[0]:
                gen.manual_seed(_seed_all[0])
    return gen


def _shape(name, size, dtype):
    """The shape ``size`` names, checked before anything is generated (Note [Allocation
    sizes] in ops/_factory.py)."""
    if isinstance(size, (int, _np.integer)):
        size = (size,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if isinstance(s, bool) or not isinstance(s, (int, _np.integer)):
            raise TypeError(f"{name}: size must be a tuple of ints, got {size!r}")
        if s < 0:
            raise ValueError(f"{name}: negative dimension {s} in size {tuple(size)}")
    shape = tuple(int(s) for s in size)
    check_size(name, shape, dtype)
    return shape


#: ``(random_batch, wrap_levels)`` of the Batched layer, which registers them when it is
#: installed (mdtensor/layers/vmap.py; this floor does not import the layers)
_under_vmap: list = []


def _draw(generator, device, method: str, shape: tuple, dtype, params: dict):
    """Draw on the device's backend (``Backend.random``: on the host, except where a
    backend draws its own way, e.g. Dask chunk by chunk).  Inside ``vmap``, one draw per
    batch element with ``randomness="different"`` (``_finish`` wraps them), an error with
    ``"error"`` (mdtensor/layers/vmap.py)."""
    hooks = capture_hooks.get()
    if hooks is not None:  # Note [Capture hooks] in mdtensor/tensors/tensor.py
        hooks.random_draw(method)
    lead, levels = _under_vmap[0]() if _under_vmap else ((), ())
    gen = _gen(generator, device)
    arr = as_device(device).backend.random(gen._rng, method, (*lead, *shape), dtype.numpy,
                                           params)
    return (arr, levels) if levels else arr


def _finish(arr, dtype, device, requires_grad):
    if isinstance(arr, tuple):  # batched draws inside vmap
        arr, levels = arr
        return _under_vmap[1](asarray(arr, dtype=dtype, device=device,
                                   requires_grad=requires_grad), levels)
    return asarray(arr, dtype=dtype, device=device, requires_grad=requires_grad)


def rand(*size, dtype=None, device=None, generator=None, requires_grad=False):
    """Uniform samples in [0, 1) of shape ``size``."""
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    if dt.kind not in "fc":
        raise TypeError(f"rand: expected a floating dtype, got {dt.name}")
    shape = _shape("rand", size, dt)
    arr = _draw(generator, device, "random", shape, dt, {})
    return _finish(arr, dt, device, requires_grad)


def randn(*size, dtype=None, device=None, generator=None, requires_grad=False):
    """Standard-normal samples of shape ``size``."""
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    if dt.kind not in "fc":
        raise TypeError(f"randn: expected a floating dtype, got {dt.name}")
    shape = _shape("randn", size, dt)
    arr = _draw(generator, device, "standard_normal", shape, dt, {})
    return _finish(arr, dt, device, requires_grad)


def randint(low, high=None, size=(), *, dtype=None, device=None, generator=None):
    """Integers in [low, high) (``randint(high, size)`` as in PyTorch)."""
    if isinstance(high, (tuple, list)) and size == ():  # randint(high, size), PyTorch's
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, _np.integer)):
            raise TypeError(f"randint: {name} must be an int, got {type(v).__name__}")
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    dt = as_dtype(dtype) if dtype is not None else int64
    shape = _shape("randint", size, dt)
    arr = _draw(generator, device, "integers", shape, dt, {"low": low, "high": high})
    return _finish(arr, dt, device, False)
