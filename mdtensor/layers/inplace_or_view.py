"""The ADInplaceOrView layer: version counters and view metadata.

For every mutating overload (in-place or ``out=``) the layer bumps the version counter of
each mutated argument after the kernel ran; for every view overload it records on the
result which base it views and how to replay the view from that base (``ViewInfo``), and
shares the base's version counter.  Every other op falls through (its backend fallback is
``fallthrough_kernel``), so plain ops never see this layer.

Kernels are generated per overload from its schema when the overload is defined (a hook
in ``dispatcher.define_hooks``), so user-defined ops with ``(a!)``/``(a)`` annotations get
them too.
"""

from __future__ import annotations

from mdtensor.dispatch.callers import _NO
from mdtensor.dispatch.kernel import Kernel, fallthrough_kernel
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.operators import dispatcher, register_fallback
from mdtensor.layers.functionalize import track_view
from mdtensor.tensors.tensor import Tensor, ViewInfo
from mdtensor.tensors.version_counter import INFERENCE, VersionCounter, counter, new_counter

__all__ = ["bump_version", "check_inference_inplace", "install"]

_new = object.__new__

_FZ = DispatchKey.Functionalize.value


def bump_version(t: Tensor) -> None:
    vc = counter(t)
    if vc is not INFERENCE:  # Note [Inference tensors] in mdtensor/tensors/version_counter.py
        vc.value += 1


def check_inference_inplace(op, t: Tensor) -> None:
    """An in-place op on an inference tensor is allowed only in inference mode (Note
    [Inference tensors] in mdtensor/tensors/version_counter.py); checked before the op runs."""
    if t._vc is INFERENCE and new_counter() is not INFERENCE:
        raise RuntimeError(
            f"{op.name}: Inplace update to inference tensor outside InferenceMode is not "
            f"allowed. You can make a clone to get a normal tensor before doing inplace "
            f"update.")


# Note [Cell variables]
# ~~~~~~~~~~~~~~~~~~~~~
# A local variable that a nested function, lambda or generator expression uses is a *cell*,
# allocated when the enclosing function is entered -- on every call, whether or not the
# nested code runs.  In a hot function that costs 0.05-0.15 us per call (measured: the view
# kernel below went from 2.95 to 2.61 us, on a machine where calling it empty costs 0.24 us),
# so hot functions keep their rare branches that need closures in separate helpers
# (``_mark_views`` here, ``derivatives._broadcast_ones``).  Python 3.11 also builds a
# function for every comprehension; 3.12 inlines list comprehensions, not generators.


def _mutated_positions(schema):
    out = []
    for i, a in enumerate(schema.arguments):
        if a.type.alias is not None and a.type.alias.is_write:
            out.append((i, a.name, a.kwarg_only, a.type.is_tensor_list))
    return out


def _inplace_kernel(op):
    """The in-place/out= kernel of ``op``, as a wrapper factory (Note [Wrapper kernels] in
    mdtensor/dispatch/operators.py): ``factory(kernel)`` is the entry that calls ``kernel``, the
    entry below ADInplaceOrView, then bumps the mutated arguments' version counters."""
    mutated = _mutated_positions(op.schema)
    name = f"ADInplaceOrView[{op.name}]"
    if mutated == [(0, op.schema.arguments[0].name, False, False)]:
        def factory(kernel):  # the common case: only ``self`` is mutated
            def ad_inplace_self(self, b=_NO, /, *args, **kwargs):  # Note [Star calls]
                vc = self._vc
                if vc is None:
                    if self._view is None:  # counter(self), inlined for a fresh tensor
                        vc = self._vc = VersionCounter()
                        vc.value = 0
                        vc.views = None
                    else:
                        vc = counter(self)
                elif vc is INFERENCE:
                    # See Note [Inference tensors] in mdtensor/tensors/version_counter.py
                    check_inference_inplace(op, self)
                    return kernel(self, **kwargs) if b is _NO else kernel(self, b, *args,
                                                                          **kwargs)
                if b is _NO:
                    result = kernel(self, **kwargs)
                elif args or kwargs:
                    result = kernel(self, b, *args, **kwargs)
                else:
                    result = kernel(self, b)
                vc.value += 1
                return result

            ad_inplace_self.__qualname__ = name
            return ad_inplace_self
    else:
        def factory(kernel):
            def ad_inplace(*args, **kwargs):
                targets = []
                for i, arg_name, kwarg_only, is_list in mutated:
                    v = args[i] if (i < len(args) and not kwarg_only) else kwargs.get(arg_name)
                    if v is None:
                        continue
                    for t in (v if is_list else (v,)):
                        if t is not None:
                            check_inference_inplace(op, t)
                            targets.append(t)
                result = kernel(*args, **kwargs)
                for t in targets:
                    bump_version(t)
                return result

            ad_inplace.__qualname__ = name
            return ad_inplace

    factory.__qualname__ = name
    return factory


def _view_kernel(op):
    """The view kernel of ``op``, as a wrapper factory: the entry calls ``kernel``, the
    entry below ADInplaceOrView, then records the result's ViewInfo."""
    name = f"ADInplaceOrView[{op.name}]"

    def factory(kernel):
        impl = getattr(kernel, "array_impl", None)
        if impl is not None:
            return _fused_view_kernel(op, impl, name)
        impl = getattr(kernel, "list_impl", None)
        if impl is not None:
            return _fused_views_kernel(op, impl, kernel, name)

        def ad_view(*args, **kwargs):
            result = kernel(*args, **kwargs) if kwargs else kernel(*args)
            # (a source given by keyword was made positional by the caller)
            _mark_views(op, result, args[0], args[1:], kwargs)
            return result

        ad_view.__qualname__ = name
        return ad_view

    factory.__qualname__ = name
    return factory


# Note [Fused view kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Over a view op's generic one-Tensor kernel (``ops._impl_kernels._fast_kernel``: wrap what
# ``impl(xp, array, *rest)`` returns), the view kernel does both steps in one frame: the
# array op, then the ViewInfo.  ``x[1:3]`` and ``x.mT`` are the most frequent ops of a
# backward pass (matmul's gradient transposes), and the frame cost 0.3 us of their 4 us on
# the 2-core EPYC.  Only that exact kernel is fused: a user kernel, a traced entry (which
# must show the backend kernel) or a gated one stays a separate call below the wrapper.
# For a view of a non-view whose array needs no conversion, the kernel also builds the
# result Tensor itself rather than calling ``device.wrap`` (whose fresh version counter
# the view would replace at once): 0.86 -> 0.75 us for ``transpose`` (16x16 float32).


def _fused_view_kernel(op, impl, name):
    def ad_view_fused(src, b=_NO, c=_NO, /, *rest, **kwargs):  # Note [Star calls]
        # (two arguments after the source are named too: transpose's dims, diagonal's)
        d = src._device
        if b is _NO:
            data = impl(d.xp, src._data, **kwargs) if kwargs else impl(d.xp, src._data)
        elif c is _NO and not kwargs:
            data = impl(d.xp, src._data, b)
            rest = (b,)
        elif rest or kwargs:
            rest = (b, *rest) if c is _NO else (b, c, *rest)
            data = impl(d.xp, src._data, *rest, **kwargs)
        else:
            data = impl(d.xp, src._data, b, c)
            rest = (b, c)
        if src._view is not None or type(data) is not d.backend.array_type:
            # a view of a view (Note [Replays of views of views]), or an array wrap must
            # convert
            result = d.wrap(data)
            _set_view(result, src, op, rest, kwargs)
            return result
        # ``d.wrap(data)`` and ``_set_view``'s common case, inlined (Note [Class calls] in
        # mdtensor/tensors/tensor.py): the replay is built lazily from (op, args, kwargs)
        vc = src._vc
        if vc is None:
            vc = counter(src)
        info = ViewInfo()
        info.base = src
        info._replay = info.index = None
        info._op = op
        info._args = rest
        info._kwargs = kwargs
        info.ag_version = vc.value
        result = _new(Tensor)
        result._data = data
        result._ks = d.ks
        result._device = d
        result._vc = vc
        result._view = info
        result._ag = None
        if src._ks & _FZ:
            track_view(src, result)
        return result

    ad_view_fused.__qualname__ = name
    return ad_view_fused


# Note [Fused list views]
# ~~~~~~~~~~~~~~~~~~~~~~~
# ``split``, ``chunk`` and ``unbind`` return one view per piece, so their per-piece cost is
# multiplied: the generic kernel wrapped each array (``device.wrap``: a frame, a fresh
# version counter read from the ContextVar) in a generator, and ``_mark_views`` then
# replaced that counter and set the ViewInfo, a loop more.  Over the generic one-Tensor
# kernel (``list_impl``), the view kernel makes each piece itself, complete, in one loop
# (``md.unbind(x)`` of 16x16 float32: 114.1K -> 87.1K instructions).  A view of a view, a
# functional wrapper (whose views Functionalize tracks), an array that needs converting
# and any error take the two steps apart: the generic kernel raises the op's errors.


def _fused_views_kernel(op, impl, kernel, name):
    def unfused(src, rest, kwargs):
        result = kernel(src, *rest, **kwargs)
        _mark_views(op, result, src, rest, kwargs)
        return result

    def ad_views_fused(src, b=_NO, /, *rest, **kwargs):  # Note [Star calls]
        one = b is not _NO and not rest and not kwargs  # chunk(x, 4): no star call
        rest = (b,) if one else () if b is _NO else (b, *rest)
        if src._view is not None or src._ks & _FZ:
            return unfused(src, rest, kwargs)
        d = src._device
        try:
            arrays = impl(d.xp, src._data, b) if one else impl(d.xp, src._data, *rest, **kwargs)
        except Exception:  # the generic kernel's errors, named after the op
            return unfused(src, rest, kwargs)
        array_type = d.backend.array_type
        ks = d.ks
        vc = src._vc
        if vc is None:
            vc = counter(src)
        version = vc.value
        out = []
        append = out.append
        j = 0
        for data in arrays:
            if type(data) is not array_type:
                t = d.wrap(data)
            else:
                t = _new(Tensor)
                t._data = data
                t._ks = ks
                t._device = d
                t._ag = None
            info = ViewInfo()
            info.base = src
            info._replay = info.index = None
            info._op = _pick
            info._args = (op, j, rest, kwargs)
            info._kwargs = _NO_KWARGS
            info.ag_version = version
            t._view = info
            t._vc = vc
            append(t)
            j += 1
        return tuple(out)

    ad_views_fused.__qualname__ = name
    return ad_views_fused


# Note [Replays of views of views]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A view records its base (always a non-view) and how to replay it from that base.  For a
# view of a view the replay is the parent's, then the op: recorded as ``_replay_on`` with
# the parent's ViewInfo among its arguments, and built only when used, like a view of a
# base's (``ViewInfo.replay``).  Composing closures on every view of a view (as the
# removed ``mark_view`` did) cost two function objects, their cells and three frames:
# ``md.squeeze(x[None], 0)`` went from 36.0K to 27.3K instructions (``x[1:3].T``: 30.0K ->
# 22.3K).


def _replay_on(b, parent, op, rest, /, **kwargs):
    """The replay of a view of a view: ``op(parent's replay of b, *rest, **kwargs)``."""
    return op(parent.replay(b), *rest, **kwargs)


def _set_view(t, src, op, rest, kwargs) -> None:
    """Record that ``t`` is the view ``op(src, *rest, **kwargs)`` of ``src``: its ViewInfo,
    replayed lazily, and its base's version counter."""
    info = ViewInfo()
    parent = src._view
    if parent is None:
        base = src
        info._op = op
        info._args = rest
    else:  # Note [Replays of views of views]
        base = parent.base
        info._op = _replay_on
        info._args = (parent, op, rest)
    vc = base._vc
    if vc is None:
        vc = counter(base)
    info.base = base
    info._replay = info.index = None
    info._kwargs = kwargs
    info.ag_version = vc.value
    t._view = info
    t._vc = vc
    if base._ks & _FZ:
        track_view(base, t)


def _mark_views(op, result, src, rest, kwargs) -> None:
    """ViewInfo for the result of a view op that no fused kernel made: one view, or each
    of several (split, unbind; Note [Fused list views])."""
    if isinstance(result, Tensor):
        if result is not src:  # a view kernel may return its input itself (e.g. contiguous)
            _set_view(result, src, op, rest, kwargs)
        return
    for j, r in enumerate(result):  # each replayed by ``_pick`` with its index
        if r is not src:
            _set_view(r, src, _pick, (op, j, rest, kwargs), _NO_KWARGS)


def _pick(b, op, j, rest, kwargs):
    """The replay of the ``j``-th of several views: ``op(b, *rest, **kwargs)[j]``."""
    return op(b, *rest, **kwargs)[j]


_NO_KWARGS: dict = {}  # shared, never written: ``_pick``'s replay takes no keywords


def register_for(op) -> None:
    schema = op.schema
    if schema.is_mutable:
        fn = _inplace_kernel(op)
    elif schema.is_view:
        fn = _view_kernel(op)
    else:
        return
    # Both kernels call only the entry below them (plus version counters and view
    # metadata, no op): wrapper kernels (Note [Wrapper kernels] in mdtensor/dispatch/operators.py)
    op.register_kernel(Kernel(fn, DispatchKey.ADInplaceOrView, name=fn.__qualname__,
                           factory=True, leaf=True))



def install() -> None:
    """Register the layer: a fallthrough fallback, plus kernels for every existing op."""
    # Called once, by mdtensor.layers.install (which is guarded).
    register_fallback(Kernel(fallthrough_kernel, DispatchKey.ADInplaceOrView,
                             name="fallthrough"))
    for op in list(dispatcher.overloads.values()):
        register_for(op)
    dispatcher.define_hooks.append(register_for)
