"""Dispatch keys and dispatch key sets.

Note [Key set layout]
~~~~~~~~~~~~~~~~~~~~~
A key set is a plain Python ``int`` on the hot path (``DispatchKeySet`` wraps it for the
public API).  As in PyTorch, the low bits are *backend components* (CPU, CUDA, JAX, Dask,
PrivateUse1..3, Meta) and the bits above them are *functionalities* (Dense, Sparse,
BackendSelect, ...), ordered so that a higher bit means a higher priority.  A *runtime
key* is one functionality, combined with one backend when the functionality is
per-backend (Dense, Sparse, Autograd): ``AutogradCPU`` is the set
``{AutogradFunctionality, CPUBit}``.  The highest-priority runtime key of a set is its
highest functionality bit, paired with its highest backend bit when that functionality is
per-backend.

The priority order lives in exactly one place: ``FUNCTIONALITIES`` below, lowest first.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator

__all__ = [
    "BACKEND_COMPONENTS",
    "FUNCTIONALITIES",
    "DispatchKey",
    "DispatchKeySet",
]

#: Backend components, lowest bit first: the built-in backends (NumPy, CuPy, JAX, Dask),
#: the three keys left to third-party plug-ins, then Meta.  Meta is the highest backend
#: bit, so a Meta tensor mixed with another backend dispatches to Meta (PyTorch does the
#: same).
BACKEND_COMPONENTS: tuple[str, ...] = (
    "CPU",
    "CUDA",
    "JAX",
    "Dask",
    "PrivateUse1",
    "PrivateUse2",
    "PrivateUse3",
    "Meta",
)

#: Functionality keys, LOWEST priority first: (name, is_per_backend).
#: This tuple *is* the priority order of DESIGN.md section 2 (read it bottom-up).
FUNCTIONALITIES: tuple[tuple[str, bool], ...] = (
    ("Dense", True),  # backend compute kernels
    ("Sparse", True),  # sparse-layout kernels
    ("BackendSelect", False),  # factories pick the backend from device=
    ("Python", False),  # dispatch modes and __md_dispatch__ subclasses
    ("Functionalize", False),  # mutations -> functional ops + write-back
    ("ADInplaceOrView", False),  # version counters and view metadata
    ("AutogradFunctionality", True),  # records the autograd graph
    ("Autocast", False),  # casts inputs for ops on the autocast list
    ("Batched", False),  # vmap batching rules
    ("PreDispatch", False),  # pre-dispatch modes see calls as written
)

NUM_BACKENDS = len(BACKEND_COMPONENTS)
BACKEND_MASK = (1 << NUM_BACKENDS) - 1

#: bit index of each functionality and backend component
FUNC_BIT: dict[str, int] = {n: NUM_BACKENDS + i for i, (n, _) in enumerate(FUNCTIONALITIES)}
BACKEND_BIT: dict[str, int] = {n: i for i, n in enumerate(BACKEND_COMPONENTS)}
PER_BACKEND_MASK = 0
for _name, _per in FUNCTIONALITIES:
    if _per:
        PER_BACKEND_MASK |= 1 << FUNC_BIT[_name]
FULL = (1 << (NUM_BACKENDS + len(FUNCTIONALITIES))) - 1

# Spelling of per-backend runtime keys: (functionality, backend) -> name.
_RUNTIME_PREFIX = {"Dense": "", "Sparse": "Sparse", "AutogradFunctionality": "Autograd"}

# Renamed PrivateUse backends (see mdtensor.backends.rename_privateuse1): bit -> name.
_backend_display: dict[str, str] = {}


_FUNC_OF_BIT = {1 << FUNC_BIT[n]: n for n, _ in FUNCTIONALITIES}
_ALIASES = ("Autograd", "CompositeExplicitAutograd", "CompositeImplicitAutograd", "ArrayAPI")


def _build_members() -> dict[str, int]:
    members: dict[str, int] = {}
    for name in BACKEND_COMPONENTS:
        members[name + "Bit"] = 1 << BACKEND_BIT[name]
    for fname, per_backend in FUNCTIONALITIES:
        fbit = 1 << FUNC_BIT[fname]
        members[fname] = fbit
        if per_backend:
            for bname in BACKEND_COMPONENTS:
                members[_RUNTIME_PREFIX[fname] + bname] = fbit | (1 << BACKEND_BIT[bname])
    for i, alias in enumerate(_ALIASES):  # registration-only; see runtime_keys()
        members[alias] = -(i + 1)
    return members


class _DispatchKeyBase(enum.Enum):
    """Behaviour of ``DispatchKey``; the members are generated from the tables above."""

    @property
    def is_alias(self) -> bool:
        """Alias keys are valid for registration only and expand to runtime keys."""
        return self.value < 0

    @property
    def is_backend_component(self) -> bool:
        return self.value > 0 and not self.value & ~BACKEND_MASK

    @property
    def functionality(self) -> str | None:
        """The functionality of a runtime key (``'AutogradFunctionality'`` for AutogradCPU)."""
        if self.value <= 0:
            return None
        return _FUNC_OF_BIT.get(self.value & ~BACKEND_MASK)

    @property
    def backend(self) -> str | None:
        """The backend component of a per-backend runtime key or a backend bit, else None."""
        if self.value <= 0:
            return None
        b = self.value & BACKEND_MASK
        return BACKEND_COMPONENTS[b.bit_length() - 1] if b else None

    @property
    def is_runtime(self) -> bool:
        """True for keys a kernel can be registered for and dispatched to directly."""
        if self.value <= 0 or self.is_backend_component:
            return False
        per_backend = bool(self.value & PER_BACKEND_MASK)
        return per_backend == bool(self.value & BACKEND_MASK)

    def display_name(self) -> str:
        """The name shown in reprs, traces and dumps (follows PrivateUse renames)."""
        backend = self.backend
        if backend is None or backend not in _backend_display:
            return self.name
        shown = _backend_display[backend]
        if self.is_backend_component:
            return shown + "Bit"
        return _RUNTIME_PREFIX[self.functionality] + shown

    def __repr__(self) -> str:
        return f"DispatchKey.{self.display_name()}"

    def __str__(self) -> str:
        return self.display_name()


DispatchKey = _DispatchKeyBase("DispatchKey", _build_members(), module=__name__)
DispatchKey.__doc__ = """A dispatch key.

Functionality keys (``Dense``, ``AutogradFunctionality``, ``Python``, ...), backend
components (``CPUBit``, ..., ``MetaBit``), runtime keys (``CPU``, ``SparseCPU``,
``AutogradCPU``, ``BackendSelect``, ...) and alias keys (``Autograd``,
``CompositeExplicitAutograd``, ``CompositeImplicitAutograd``, ``ArrayAPI``).  The value of a
non-alias key is the int key set it stands for.
"""


def key_from_name(name: str) -> DispatchKey:
    """Look a key up by name, accepting renamed PrivateUse spellings (``AutogradMydevice``)."""
    try:
        return DispatchKey[name]
    except KeyError:
        pass
    for backend, shown in _backend_display.items():
        for prefix in _RUNTIME_PREFIX.values():
            if name == prefix + shown:
                return DispatchKey[prefix + backend]
    raise ValueError(f"unknown dispatch key {name!r}")


def rename_backend(backend: str, new_name: str) -> None:
    """Show backend component ``backend`` (a PrivateUse one) as ``new_name`` everywhere."""
    _backend_display[backend] = new_name


# ---------------------------------------------------------------------------------------
# Runtime keys, highest priority first, and the sets the alias keys expand to.


def _all_runtime_keys() -> tuple[DispatchKey, ...]:
    keys = []
    for fname, per_backend in reversed(FUNCTIONALITIES):
        if per_backend:
            for bname in reversed(BACKEND_COMPONENTS):
                keys.append(DispatchKey[_RUNTIME_PREFIX[fname] + bname])
        else:
            keys.append(DispatchKey[fname])
    return tuple(keys)


RUNTIME_KEYS: tuple[DispatchKey, ...] = _all_runtime_keys()
BACKEND_KEYS = frozenset(DispatchKey[b] for b in BACKEND_COMPONENTS) | frozenset(
    DispatchKey["Sparse" + b] for b in BACKEND_COMPONENTS
)
DENSE_KEYS = frozenset(DispatchKey[b] for b in BACKEND_COMPONENTS)
AUTOGRAD_KEYS = frozenset(DispatchKey["Autograd" + b] for b in BACKEND_COMPONENTS)

#: alias key -> the runtime keys a registration for it covers (DESIGN.md section 2)
ALIAS_RUNTIME_KEYS: dict[DispatchKey, frozenset[DispatchKey]] = {
    DispatchKey.Autograd: AUTOGRAD_KEYS,
    DispatchKey.CompositeExplicitAutograd: BACKEND_KEYS,
    # Also Python: see "Differences from PyTorch" in docs/ARCHITECTURE.md.
    DispatchKey.CompositeImplicitAutograd: BACKEND_KEYS
    | AUTOGRAD_KEYS
    | {DispatchKey.Functionalize, DispatchKey.Python},
    # ArrayAPI covers the Dense key of backends that declare they speak the standard;
    # mdtensor.backends narrows it per backend (see _ops.Registry.array_api_backends).
    DispatchKey.ArrayAPI: DENSE_KEYS,
}


def runtime_keys(key: DispatchKey) -> frozenset[DispatchKey]:
    """The runtime keys a registration for ``key`` covers."""
    if key.is_alias:
        return ALIAS_RUNTIME_KEYS[key]
    if not key.is_runtime:
        raise ValueError(
            f"{key.name} is not a runtime or alias key; register kernels for a runtime key "
            f"such as CPU or AutogradCPU, or an alias such as CompositeExplicitAutograd"
        )
    return frozenset((key,))


def highest_key(ks: int) -> DispatchKey | None:
    """The highest-priority runtime key of the int key set ``ks`` (None if it has none)."""
    func = ks & ~BACKEND_MASK
    if not func:
        return None
    fbit = 1 << (func.bit_length() - 1)
    if fbit & PER_BACKEND_MASK:
        backends = ks & BACKEND_MASK
        if not backends:
            return None
        return DispatchKey(fbit | (1 << (backends.bit_length() - 1)))
    return DispatchKey(fbit)


def remove_key(ks: int, key: DispatchKey) -> int:
    """``ks`` without the functionality of runtime key ``key`` (backend bits stay)."""
    return ks & ~(key.value & ~BACKEND_MASK)


def after_mask(functionality: str) -> int:
    """The mask that keeps only keys strictly below ``functionality`` (for redispatch)."""
    return BACKEND_MASK | ((1 << FUNC_BIT[functionality]) - 1)


AFTER_AUTOGRAD = after_mask("AutogradFunctionality")
AFTER_AD_INPLACE_OR_VIEW = after_mask("ADInplaceOrView")
AFTER_FUNCTIONALIZE = after_mask("Functionalize")
AFTER_PYTHON = after_mask("Python")
AFTER_BACKEND_SELECT = after_mask("BackendSelect")
AFTER_AUTOCAST = after_mask("Autocast")
AFTER_BATCHED = after_mask("Batched")
AFTER_PRE_DISPATCH = after_mask("PreDispatch")
AUTOGRAD_FUNCTIONALITY = 1 << FUNC_BIT["AutogradFunctionality"]


# ---------------------------------------------------------------------------------------


class DispatchKeySet:
    """An immutable set of dispatch keys, stored as an int bitset.

    Examples:
        >>> ks = DispatchKeySet(DispatchKey.CPU) | DispatchKey.AutogradCPU
        >>> ks
        DispatchKeySet(AutogradCPU, CPU)
        >>> ks.highest_priority_key()
        DispatchKey.AutogradCPU
    """

    __slots__ = ("_bits",)

    def __init__(self, keys: int | DispatchKey | DispatchKeySet | Iterable[DispatchKey] = 0):
        if isinstance(keys, int):
            bits = keys
        elif isinstance(keys, DispatchKeySet):
            bits = keys._bits
        elif isinstance(keys, _DispatchKeyBase):
            bits = _bits_of(keys)
        else:
            bits = 0
            for k in keys:
                bits |= _bits_of(k)
        object.__setattr__(self, "_bits", bits & FULL)

    def __setattr__(self, name, value):
        raise AttributeError("DispatchKeySet is immutable")

    @property
    def raw(self) -> int:
        """The underlying int bitset (what the dispatcher uses on the hot path)."""
        return self._bits

    def __or__(self, other) -> DispatchKeySet:
        return DispatchKeySet(self._bits | DispatchKeySet(other)._bits)

    __ror__ = __or__

    def __and__(self, other) -> DispatchKeySet:
        return DispatchKeySet(self._bits & DispatchKeySet(other)._bits)

    def __sub__(self, other) -> DispatchKeySet:
        """Difference: removes the *functionalities* of ``other`` (backend bits stay
        unless ``other`` is made only of backend bits), as PyTorch's ``remove`` does."""
        obits = DispatchKeySet(other)._bits
        func = obits & ~BACKEND_MASK
        return DispatchKeySet(self._bits & ~(func if func else obits))

    def __contains__(self, key: DispatchKey) -> bool:
        bits = _bits_of(key)
        return bool(bits) and (self._bits & bits) == bits

    def __eq__(self, other) -> bool:
        return isinstance(other, DispatchKeySet) and other._bits == self._bits

    def __hash__(self) -> int:
        return hash(self._bits)

    def __bool__(self) -> bool:
        return bool(self._bits)

    def highest_priority_key(self) -> DispatchKey | None:
        """The runtime key a call with this key set dispatches to first."""
        return highest_key(self._bits)

    def highest_backend(self) -> str | None:
        b = self._bits & BACKEND_MASK
        return BACKEND_COMPONENTS[b.bit_length() - 1] if b else None

    def __iter__(self) -> Iterator[DispatchKey]:
        """Runtime keys in the set, highest priority first."""
        for key in RUNTIME_KEYS:
            v = key.value
            if (self._bits & v) == v:
                yield key

    def remove_functionality(self, key: DispatchKey) -> DispatchKeySet:
        return DispatchKeySet(remove_key(self._bits, key))

    def __repr__(self) -> str:
        return "DispatchKeySet(" + ", ".join(k.display_name() for k in self) + ")"


def _bits_of(key) -> int:
    if isinstance(key, DispatchKeySet):
        return key._bits
    if isinstance(key, int):
        return key
    if key.is_alias:
        bits = 0
        for k in ALIAS_RUNTIME_KEYS[key]:
            bits |= k.value
        return bits
    return key.value
