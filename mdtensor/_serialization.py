"""``md.save`` and ``md.load``: tensors and nested containers in a file that runs no code.

The file is a zip archive (readable by ``np.load`` as an ``.npz``): one ``.npy`` member per
*storage* and a JSON ``manifest.json`` describing everything else (Note [The file format]).
Loading reads the manifest with ``json`` and the arrays with ``allow_pickle=False``, so a
file from elsewhere can describe tensors, dicts, lists, tuples, strings, numbers, booleans
and None, and nothing else (Note [Nothing runs on load]).
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings
import zipfile
from collections import OrderedDict

import numpy as np

from mdtensor.tensors.factories import asarray
from mdtensor.tensors.layout import sparse_csr, strided
from mdtensor.tensors.tensor import Tensor

from .autograd import no_grad
from .dispatch.namespaces import aten_calls as aten
from .nn import Parameter

__all__ = ["load", "save"]

# Note [The file format]
# ~~~~~~~~~~~~~~~~~~~~~~~
# ``manifest.json`` holds
#
#     {"format": "mdtensor", "version": 1,
#      "storages": [{"file": "storages/0.npy", "dtype": "float32", "shape": [4, 3],
#                    "device": "cpu"}, ...],
#      "tensors": [{"storage": 0, "view": null | [step, ...], "dtype": "float32",
#                   "shape": [3], "requires_grad": false, "parameter": false}, ...],
#      "object": <value>}
#
# A storage is the whole array of a tensor that is not a view (a *root*); tensors that share
# it -- the root itself, its views, ``detach()``-ed aliases -- are entries of ``tensors``
# naming it, and a view carries the steps that make it from its root (Note [Views in the
# file]).  Values are JSON scalars (null, true/false, ints, floats with NaN/Infinity, strings)
# or one-key objects: {"tensor": i}, {"list": [...]}, {"tuple": [...]}, {"dict": [[key,
# value], ...]} and {"odict": [...]} (keys are values too, so int keys stay ints), and
# {"complex": [re, im]}.  The same tensor object saved twice is one entry, and loads as one
# object, as PyTorch's pickles do.
#
# A sparse tensor's entry has no storage: {"sparse": "sparse_coo" | "sparse_csr", "parts":
# [tensor, ...], "coalesced": bool, "dtype", "shape", "requires_grad", "parameter"}, whose
# parts are tensor entries of its dense parts (COO: indices and values; CSR: crow_indices,
# col_indices and values); loading makes it again with ``md.sparse_coo_tensor`` /
# ``md.sparse_csr_tensor``, which check the parts as for any caller.
#
# Note [Nothing runs on load]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``md.load`` reads the archive with ``zipfile`` (members are read into memory, never
# extracted, so member names cannot reach the file system), the manifest with ``json``,
# and each storage with ``np.lib.format.read_array(..., allow_pickle=False)`` after checking
# that its size matches the manifest's shape and dtype.  Object, string, structured and
# datetime arrays are refused, a pickle file (``pickle.dump``'s, or ``torch.save``'s
# ``data.pkl``) is refused, and a manifest value of any other shape than the ones above is
# refused, each with a ``ValueError`` naming ``load``, the file and what was found.
# View steps are checked to be one of five view kinds with integer arguments.

_FORMAT, _VERSION = "mdtensor", 1
# Note [bfloat16 in .npy files]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The .npy format writes ml_dtypes' bfloat16 as raw bytes (``|V2``), which read back as a
# void array.  A bfloat16 storage is written as its bits, a uint16 array, with ``"dtype":
# "bfloat16"`` in the manifest, and read back as uint16 and viewed as bfloat16: no new
# kind of array is ever read.
_KINDS = "biufc"  # bool, signed/unsigned integers, floats, complex: the only arrays loaded
_MAX_DEPTH = 200  # containers nested deeper are refused before Python's recursion limit


def save(obj, f) -> None:
    """Save tensors, state dicts and nested containers to ``f`` without pickle.

    ``obj`` may be a Tensor or a dict, OrderedDict, list or tuple of such values, strings,
    ints, floats, complex numbers, booleans and None, nested.  Dtype, device,
    ``requires_grad``, ``md.nn.Parameter`` and aliasing are kept: a tensor saved twice
    loads as one object, and tensors sharing memory (views of one base, ``detach()``-ed
    aliases) load sharing memory.  As in PyTorch, a view is saved with its whole base.

    Args:
        obj: what to save.
        f: a path (``str`` or ``os.PathLike``) or a binary file object open for writing.

    Raises:
        TypeError: ``obj`` holds a value of another type (a Module: save its
            ``state_dict()``), or a dict key that is not a string, number, bool, None or
            tuple of those.
        ValueError: ``obj`` contains itself, or holds a meta tensor (no data).

    Example:
        >>> md.save({"w": md.ones(2), "step": 3}, path)
        >>> md.load(path)
        {'w': tensor([1., 1.]), 'step': 3}
    """
    writer = _Writer()
    manifest = {"format": _FORMAT, "version": _VERSION, "object": writer.encode(obj, ())}
    manifest["storages"], manifest["tensors"] = writer.storages, writer.tensors
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for record, array in zip(writer.storages, writer.arrays):
            buf = io.BytesIO()
            if record["dtype"] == "bfloat16":  # Note [bfloat16 in .npy files]
                array = array.view(np.uint16)
            np.lib.format.write_array(buf, array, allow_pickle=False)
            zf.writestr(record["file"], buf.getvalue())


def load(f, map_location=None, *, weights_only=True):
    """Load what ``md.save`` wrote, running no code from the file.

    Args:
        f: a path or a binary file object open for reading.
        map_location: where to put the tensors: None (the device each was saved from), a
            device (``"cpu"``, ``"jax"``, an ``md.Device``) for all of them, or a dict from
            saved device strings to devices (``{"jax:0": "cpu"}``; devices not named stay).
        weights_only: accepted for PyTorch's spelling; md.load is always weights-only, so
            False is refused.

    Returns:
        The saved object, with dicts, OrderedDicts, lists and tuples as they were saved.

    Raises:
        ValueError: the file is not an mdtensor file (a pickle, ``torch.save``'s zip), or
            its manifest or arrays are malformed (an object array, a size that does not
            match, an unknown value kind), or a saved device is not available here.
    """
    if weights_only is not True:
        raise ValueError("load: weights_only=False is not supported; md.load never unpickles "
                         "(it reads tensors and plain containers only)")
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file>")
    reader = _Reader(f, name, map_location)
    try:
        return reader.decode(reader.manifest["object"], 0)
    finally:
        reader.close()


# -- saving ---------------------------------------------------------------------------------


class _Writer:
    def __init__(self):
        self.storages: list[dict] = []
        self.arrays: list[np.ndarray] = []
        self.tensors: list[dict] = []
        self._tensor_ids: dict[int, int] = {}  # id(tensor) -> entry
        self._storage_ids: dict[int, tuple[int, object]] = {}  # id(root data) -> (i, root)
        self._keep: list = []  # what the id()s above refer to, alive while saving

    def encode(self, obj, path: tuple):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj)
        if isinstance(obj, complex):
            return {"complex": [obj.real, obj.imag]}
        if isinstance(obj, Tensor):
            return {"tensor": self._tensor(obj)}
        if any(obj is p for p in path):
            raise ValueError(f"save: the object contains itself (a {type(obj).__name__} "
                             f"inside itself); md.save stores trees of containers")
        path = (*path, obj)
        if isinstance(obj, (list, tuple)):
            kind = "tuple" if isinstance(obj, tuple) else "list"
            return {kind: [self.encode(v, path) for v in obj]}
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, OrderedDict) else "dict"
            return {kind: [[self._key(k), self.encode(v, path)] for k, v in obj.items()]}
        hint = "; save its state_dict() instead" if hasattr(obj, "state_dict") else ""
        raise TypeError(f"save: cannot save an object of type {type(obj).__name__}{hint}; "
                        f"md.save stores tensors, dict, list, tuple, str, int, float, "
                        f"complex, bool and None")

    def _key(self, key):
        if key is None or isinstance(key, (bool, str, int, float, complex)):
            return self.encode(key, ())
        if isinstance(key, tuple):
            return {"tuple": [self._key(k) for k in key]}
        raise TypeError(f"save: cannot save a dict key of type {type(key).__name__}; keys "
                        f"must be str, int, float, complex, bool, None or tuples of those")

    def _tensor(self, t) -> int:
        hit = self._tensor_ids.get(id(t))
        if hit is not None:
            return hit
        if t.is_meta:
            raise ValueError("save: meta tensors have no data (only a shape and a dtype); "
                             "make the tensor on a real device first")
        if t.layout is not strided:  # Note [The file format]: its parts
            return self._sparse(t)
        root = t._base if t._base is not None else t
        storage, root = self._storage(root)
        steps = None if t is root else _view_steps(t, root)
        if steps is False and t.numel() == 0:  # nothing to share
            storage, steps = self._storage(t, own=True)[0], None
        elif steps is False:  # Note [Views in the file]: not expressible, saved on its own
            warnings.warn(f"save: a view of shape {t.shape} is saved as a copy (its layout "
                          f"in its base is not a strided view md.load can rebuild); it "
                          f"will not share memory with its base after loading", UserWarning,
                          stacklevel=4)
            storage, steps = self._storage(t, own=True)[0], None

        entry = len(self.tensors)
        self.tensors.append({"storage": storage, "view": steps, "dtype": t.dtype.name,
                             "shape": list(t.shape), "requires_grad": t.requires_grad,
                             "parameter": isinstance(t, Parameter)})
        self._tensor_ids[id(t)] = entry
        self._keep.append(t)
        return entry

    def _sparse(self, t) -> int:
        with no_grad():
            if t.layout is sparse_csr:
                parts = [aten.crow_indices(t), aten.col_indices(t), aten._values(t)]
                coalesced = True
            else:
                parts = [aten._indices(t), aten._values(t)]
                coalesced = bool(aten.is_coalesced(t))
        refs = [self._tensor(p) for p in parts]
        entry = len(self.tensors)
        self.tensors.append({"sparse": t.layout.name, "parts": refs, "coalesced": coalesced,
                             "dtype": t.dtype.name, "shape": list(t.shape),
                             "requires_grad": t.requires_grad, "parameter": False})
        self._tensor_ids[id(t)] = entry
        self._keep.append(t)
        return entry

    def _storage(self, root, own: bool = False):
        key = id(root) if own else id(root._data)
        hit = self._storage_ids.get(key)
        if hit is not None:
            return hit
        i = len(self.storages)
        self.storages.append({"file": f"storages/{i}.npy", "dtype": root.dtype.name,
                              "shape": list(root.shape), "device": str(root.device)})
        data = root.detach() if own else root
        self.arrays.append(_c_order(data.numpy(force=True)))
        self._storage_ids[key] = (i, root)
        self._keep.append(root)
        return i, root


# Note [Views in the file]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Every view mdtensor makes selects its elements from its root at an affine position:
# element (i0, i1, ...) is root element ``offset + i0*s0 + i1*s1 + ...`` in row-major
# order (strides may be 0, from ``expand``, or negative, from ``x[::-1]``).  The file
# stores not the strides but the steps that make such a view from the root with public
# view ops, so ``md.load`` rebuilds a real view on every backend (on JAX, Functionalize's
# views): ``view`` the root as one dimension, then for each dimension from the largest
# stride down, cut a window and split it (``slice`` + ``view``), the innermost by a
# strided slice; then ``permute`` into the saved order, ``unsqueeze`` the size-1 and
# stride-0 dimensions, ``expand`` and ``flip`` (a slice with step -1).  The layout is found
# from the arrays' pointers and strides on NumPy, else by replaying the view on
# ``arange(root.numel())`` (a temporary of the root's size).  The steps are checked before
# they are written: they are replayed on the root and must give the same layout.  A view
# whose layout is not of this form (none of mdtensor's view ops makes one) is saved as its
# own storage with a warning.

_STEP_ARITY = {"view": 1, "slice": 4, "permute": 1, "unsqueeze": 1, "expand": 1}
_FIELDS = {"storage": {"file": str, "dtype": str, "shape": list, "device": str},
           "tensor": {"storage": int, "view": (list, type(None)), "dtype": str,
                      "shape": list, "requires_grad": bool, "parameter": bool},
           "sparse": {"sparse": str, "parts": list, "coalesced": bool, "dtype": str,
                      "shape": list, "requires_grad": bool}}


def _view_steps(t, root):
    """The steps making ``t`` from ``root`` (Note [Views in the file]), or False."""
    layout = _layout(t, root)
    if layout is None:
        return False
    steps = _plan(root.numel(), tuple(t.shape), *layout)
    if steps is None:
        return False
    steps = _simplify(steps, tuple(root.shape)) or [["view", list(t.shape)]]  # an alias

    try:
        with no_grad():
            rebuilt = _apply_steps(root.detach(), steps)
    except Exception:  # noqa: BLE001  (a plan the view ops refuse: save a copy)
        return False
    if rebuilt.shape != t.shape or _layout(rebuilt, root) != layout:
        return False
    return steps


def _layout(t, root):
    """``(offset, strides)`` of view ``t`` in ``root``'s row-major elements, or None."""
    a, r = t._data, root._data
    if type(a) is np.ndarray and type(r) is np.ndarray and r.flags.c_contiguous:
        start = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
        size = r.itemsize
        if t.numel() == 0 or start % size or any(s % size for s in a.strides):
            return None
        strides = tuple(0 if n == 1 else s // size for n, s in zip(a.shape, a.strides))
        return start // size, strides
    return _layout_by_replay(t, root)


def _layout_by_replay(t, root):
    if t._view is None and t._data is root._data and t.numel():  # an alias (detach())
        return 0, _contiguous_strides(t.shape)
    view = t._view
    if view is None or view.base._data is not root._data or t.numel() == 0:
        return None
    try:
        with no_grad():
            idx = view.replay(aten.arange(root.numel(), device=root.device).reshape(root.shape))
        idx = idx.numpy(force=True)
    except Exception:  # noqa: BLE001  (a view that does not replay on integers)
        return None
    if idx.shape != t.shape:
        return None
    offset = int(idx.flat[0])
    strides = []
    for d, n in enumerate(idx.shape):
        unit = tuple(1 if k == d else 0 for k in range(idx.ndim))
        strides.append(0 if n == 1 else int(idx[unit]) - offset)
    grid = np.full(idx.shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(idx.shape, strides)):
        grid = grid + (np.arange(n) * s).reshape([n if k == d else 1 for k in range(idx.ndim)])
    return (offset, tuple(strides)) if np.array_equal(grid, idx) else None


def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(0 if n == 1 else step)
        step *= n
    return tuple(reversed(strides))


def _plan(numel: int, shape: tuple, offset: int, strides: tuple):
    """The view steps for ``(offset, strides)`` (Note [Views in the file]), or None."""
    flips = [d for d, (n, s) in enumerate(zip(shape, strides)) if n > 1 and s < 0]
    for d in flips:  # a reversed dimension: walk it forward from its last element
        offset += (shape[d] - 1) * strides[d]
    dims = sorted((d for d, n in enumerate(shape) if n > 1 and strides[d] != 0),
                  key=lambda d: -abs(strides[d]))
    sizes = [shape[d] for d in dims]
    steps_ = [abs(strides[d]) for d in dims]
    if any(a == b for a, b in zip(steps_, steps_[1:])):
        return None  # two dimensions over the same elements: not a strided view of ours
    plan = [["view", [numel]]]
    length, pos = numel, offset
    for j, (n, s) in enumerate(zip(sizes, steps_)):
        if j == len(dims) - 1:
            plan.append(["slice", -1, pos, pos + (n - 1) * s + 1, s])
            break
        inner = sum((m - 1) * u for m, u in zip(sizes[j + 1:], steps_[j + 1:])) + 1
        back = max(0, pos + n * s - length)  # start the window earlier if it runs past the end
        if inner > s or back > pos or back > s - inner:
            return None
        plan.append(["slice", -1, pos - back, pos - back + n * s, 1])
        plan.append(["view", [*sizes[:j], n, s]])
        length, pos = s, back
    if not dims:
        plan += [["slice", -1, pos, pos + 1, 1], ["view", []]]
    order = sorted(range(len(dims)), key=lambda k: dims[k])
    if order != list(range(len(dims))):
        plan.append(["permute", order])
    kept = sorted(dims)
    for d in range(len(shape)):
        if d not in kept:
            plan.append(["unsqueeze", d])
    if any(n > 1 and s == 0 for n, s in zip(shape, strides)):
        plan.append(["expand", list(shape)])
    for d in flips:
        plan.append(["slice", d, None, None, -1])
    return plan


def _simplify(plan: list, shape: tuple) -> list:
    """``plan`` without slices that keep everything, with consecutive views merged, and
    without a first view to the root's own shape."""
    out = []
    for step in plan:
        if step[0] == "slice" and step[2] == 0 and step[4] == 1 and step[3] == _length(out, shape):
            continue
        if step[0] == "view" and out and out[-1][0] == "view":
            out.pop()
        out.append(step)
    if out and out[0] == ["view", list(shape)]:
        out.pop(0)
    return out


def _length(plan: list, shape: tuple):
    """The size of the last dimension after ``plan`` when it ends in a view (else None)."""
    for step in reversed(plan):
        if step[0] == "view":
            return step[1][-1] if step[1] else None
        return None
    return shape[-1] if shape else None


def _apply_steps(x, steps):
    for kind, *args in steps:
        if kind == "view":
            x = x.view(tuple(args[0]))
        elif kind == "slice":
            axis, start, stop, step = args
            key = [slice(None)] * x.ndim
            key[axis] = slice(start, stop, step)
            x = x[tuple(key)]
        elif kind == "permute":
            x = x.permute(tuple(args[0]))
        elif kind == "unsqueeze":
            x = x.unsqueeze(args[0])
        else:
            x = x.expand(tuple(args[0]))
    return x


# -- loading --------------------------------------------------------------------------------


class _Reader:
    def __init__(self, f, name: str, map_location):
        self.name = name
        self.map_location = map_location
        try:
            self.zf = zipfile.ZipFile(f, "r")
        except zipfile.BadZipFile:
            raise self._error(f"{_what_is(f)}; md.load reads only files written by md.save "
                              f"(a zip archive with manifest.json) and never unpickles"
                              ) from None
        try:
            self.manifest = self._manifest()
            self.storages: dict[int, object] = {}
            self.tensors: dict[int, object] = {}
        except BaseException:
            self.zf.close()
            raise

    def close(self) -> None:
        self.zf.close()

    def _error(self, what: str) -> ValueError:
        return ValueError(f"load: {self.name!r}: {what}")

    def _manifest(self) -> dict:
        names = set(self.zf.namelist())
        if "manifest.json" not in names:
            pickles = sorted(n for n in names if n.endswith(".pkl"))
            found = (f"it holds a pickle ({pickles[0]}), as torch.save writes"
                     if pickles else "it has no manifest.json")
            raise self._error(f"not an mdtensor file: {found}; md.load never unpickles")
        try:
            manifest = json.loads(self.zf.read("manifest.json"))
        except (ValueError, RecursionError) as e:
            raise self._error(f"manifest.json is not valid JSON ({e})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
            raise self._error("manifest.json does not describe an mdtensor file")
        if manifest.get("version") != _VERSION:
            raise self._error(f"format version {manifest.get('version')!r} is not supported "
                              f"(this mdtensor reads version {_VERSION})")
        for key in ("storages", "tensors"):
            if not isinstance(manifest.get(key), list):
                raise self._error(f"manifest.json: expected a list of {key}, got "
                                  f"{type(manifest.get(key)).__name__}")
        if "object" not in manifest:
            raise self._error("manifest.json has no object")
        return manifest

    # -- values
    def decode(self, node, depth: int):
        if depth > _MAX_DEPTH:
            raise self._error(f"the saved object is nested more than {_MAX_DEPTH} levels deep")
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if isinstance(node, dict) and len(node) == 1:
            (kind, body), = node.items()
            if kind == "tensor" and type(body) is int:
                return self._tensor(body)
            if kind in ("list", "tuple") and isinstance(body, list):
                items = [self.decode(v, depth + 1) for v in body]
                return tuple(items) if kind == "tuple" else items
            if kind in ("dict", "odict") and isinstance(body, list):
                out = OrderedDict() if kind == "odict" else {}
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2):
                        raise self._error(f"a dict item must be a [key, value] pair, got "
                                          f"{_short(pair)}")
                    out[self._key(pair[0], depth + 1)] = self.decode(pair[1], depth + 1)
                return out
            if kind == "complex" and isinstance(body, list) and len(body) == 2 and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in body):
                return complex(body[0], body[1])
        raise self._error(f"unknown value in manifest.json: {_short(node)} (md.load reads "
                          f"tensors, dict, list, tuple, str, int, float, complex, bool and "
                          f"None only)")

    def _key(self, node, depth: int):
        key = self.decode(node, depth)
        if isinstance(key, (list, dict)) or (
                isinstance(key, tuple) and not _hashable(key)) or _is_tensor(key):
            raise self._error(f"a dict key must be a scalar or a tuple, got {_short(node)}")
        return key

    # -- tensors
    def _tensor(self, i: int):
        hit = self.tensors.get(i)
        if hit is not None:
            return hit
        rec = self._record("tensor", i)
        if "sparse" in rec:
            t = self._sparse(i, rec)
        elif rec["view"] is None:  # the storage's own tensor (registered by _storage)
            t = self.tensors.setdefault(i, self._storage(rec["storage"]))
        else:
            t = self._view(i, self._storage(rec["storage"]), rec)
            if rec["requires_grad"] and not t.requires_grad and t.is_leaf:
                t.requires_grad_(True)
        if list(t.shape) != rec["shape"] or t.dtype.name != rec["dtype"]:
            raise self._error(f"tensor {i}: the manifest says {rec['dtype']} of shape "
                              f"{rec['shape']}, its storage gives {t.dtype.name} of shape "
                              f"{list(t.shape)}")
        self.tensors[i] = t
        return t

    def _record(self, kind: str, i: int) -> dict:
        records = self.manifest[f"{kind}s"]
        if not 0 <= i < len(records):
            raise self._error(f"{kind} {i} is not in the manifest ({len(records)} {kind}s)")
        rec = records[i]
        if not isinstance(rec, dict):
            raise self._error(f"{kind} {i}: expected an object, got {_short(rec)}")
        fields = _FIELDS["sparse" if kind == "tensor" and "sparse" in rec else kind]
        for key, types in fields.items():
            value = rec.get(key)
            if not isinstance(value, types) or (types is int and isinstance(value, bool)):
                raise self._error(f"{kind} {i}: field {key!r} is {_short(value)}")
        return rec

    def _sparse(self, i: int, rec: dict):
        """Sparse tensor entry ``i``, made from its parts (Note [The file format])."""
        want = {"sparse_coo": 2, "sparse_csr": 3}.get(rec["sparse"])
        if want is None or len(rec["parts"]) != want or not all(
                type(k) is int and k != i for k in rec["parts"]):
            raise self._error(f"tensor {i}: bad sparse tensor {_short(rec)}")
        parts = [self._tensor(k) for k in rec["parts"]]
        try:
            if want == 3:
                t = aten.sparse_csr_tensor(*parts, rec["shape"])
            else:
                t = aten.sparse_coo_tensor(*parts, rec["shape"],
                                           is_coalesced=rec["coalesced"])
        except (ValueError, TypeError) as e:
            raise self._error(f"tensor {i}: its parts do not make a sparse tensor ({e})"
                              ) from None
        return t.requires_grad_(True) if rec["requires_grad"] else t

    def _view(self, i: int, root, rec: dict):
        steps = rec["view"]
        for step in steps:
            if not (isinstance(step, list) and step and step[0] in _STEP_ARITY
                    and len(step) == 1 + _STEP_ARITY[step[0]]
                    and all(_is_int_arg(a) for a in step[1:])):
                raise self._error(f"tensor {i}: bad view step {_short(step)}")
        try:
            if root.requires_grad:  # the view is part of its base's graph, as it was
                return _apply_steps(root, steps)
            with no_grad():
                return _apply_steps(root, steps)
        except Exception as e:  # noqa: BLE001  (steps from a file: report, don't trust)
            raise self._error(f"tensor {i}: its view steps do not apply to its storage "
                              f"({type(e).__name__}: {e})") from None

    def _storage(self, j: int):
        """Storage ``j`` as a tensor: the tensor entry saved as this storage's own (a
        Parameter if it was one), or a base its views share."""
        hit = self.storages.get(j)
        if hit is not None:
            return hit
        rec = self._record("storage", j)
        t = self._place(self._array(rec), rec["device"])
        if t.dtype.name != rec["dtype"]:
            raise self._error(f"storage {j}: the manifest says {rec['dtype']}, the array on "
                              f"{t.device} is {t.dtype.name}")
        mine = [(k, r) for k, r in enumerate(self.manifest["tensors"])
                if isinstance(r, dict) and r.get("storage") == j]
        own = next(((k, r) for k, r in mine if r.get("view") is None), None)
        if own is not None and own[1].get("parameter") is True:
            t = Parameter(t, requires_grad=own[1].get("requires_grad") is True)
        elif any(r.get("requires_grad") is True for k, r in ([own] if own else mine)):
            t.requires_grad_(True)
        if own is not None:
            self.tensors[own[0]] = t
        self.storages[j] = t
        return t

    def _array(self, rec: dict) -> np.ndarray:
        name = rec["file"]
        shape = rec["shape"]
        if not all(type(n) is int and n >= 0 for n in shape):
            raise self._error(f"{name}: bad shape {_short(shape)}")
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise self._error(f"{name} is named in manifest.json but not in the archive"
                              ) from None
        bits = rec["dtype"] == "bfloat16"  # Note [bfloat16 in .npy files]
        try:
            dtype = np.dtype(np.uint16 if bits else rec["dtype"])
        except TypeError:
            raise self._error(f"{name}: unknown dtype {rec['dtype']!r}") from None
        if dtype.kind not in _KINDS:
            raise self._error(f"{name}: dtype {rec['dtype']!r} is not a tensor dtype")
        expected = math.prod(shape) * dtype.itemsize
        if info.file_size > expected + 65536:
            raise self._error(f"{name} holds {info.file_size} bytes, more than its shape "
                              f"{shape} of {dtype.name} needs ({expected})")
        try:
            array = np.lib.format.read_array(io.BytesIO(self.zf.read(name)),
                                             allow_pickle=False)
        except ValueError as e:
            if "allow_pickle" in str(e) or "Object arrays" in str(e):
                raise self._error(f"{name} holds an object array (pickled Python objects); "
                                  f"md.load never unpickles") from None
            raise self._error(f"{name} is not a valid .npy array ({e})") from None
        if array.dtype.kind not in _KINDS or array.dtype != dtype:
            raise self._error(f"{name} holds a {array.dtype} array, the manifest says "
                              f"{dtype.name}")
        if list(array.shape) != shape:
            raise self._error(f"{name} holds an array of shape {list(array.shape)}, the "
                              f"manifest says {shape}")
        if bits:
            from mdtensor._dtypes import bfloat16

            array = array.view(bfloat16.numpy)
        return _c_order(array)

    def _place(self, array: np.ndarray, saved: str):
        target = self.map_location
        if isinstance(target, dict):
            target = target.get(saved, saved)
        elif target is None:
            target = saved
        elif callable(target):
            raise TypeError("load: map_location must be None, a device or a dict of "
                            "device strings; callables are not supported")
        try:
            return asarray(array, device=target)
        except (ValueError, TypeError) as e:
            raise self._error(f"cannot place a tensor saved on {saved!r} on {target!r} ({e}); "
                              f"pass map_location='cpu'") from None


def _c_order(array: np.ndarray) -> np.ndarray:
    """``array`` in row-major order (``np.ascontiguousarray`` would make a 0-d array 1-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


def _is_int_arg(a) -> bool:
    if a is None or (type(a) is int):
        return True
    return isinstance(a, list) and all(type(v) is int for v in a)


def _hashable(key) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return not any(_is_tensor(k) for k in key)


def _is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _what_is(f) -> str:
    try:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as fh:
                head = fh.read(2)
        else:
            pos = f.tell()
            head = f.read(2)
            f.seek(pos)
    except OSError:
        return "not a zip archive"
    if head[:1] == b"\x80" or head[:1] in (b"(", b"c", b"]", b"}"):
        return "it is a pickle, not a zip archive"
    return "not a zip archive"
