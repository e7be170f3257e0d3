"""``md.nn.Module``: parameters, buffers and submodules, state dicts, modes, hooks.

PyTorch's ``nn.Module`` API on mdtensor tensors.  The deliberate differences (docs/NN.md):
``to()`` and the dtype methods replace parameters with new ``Parameter`` objects
(PyTorch swaps their data in place), and ``load_state_dict`` checks every entry before it
copies any (PyTorch copies the matching ones, then raises).
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import Any

from mdtensor.tensors.tensor import Tensor

from ._parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle", "zero_grad_"]

_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_*_hook``: ``handle.remove()`` unregisters the hook; also a
    context manager that removes it on exit."""

    def __init__(self, *dicts: dict):
        self.id = next(_hook_ids)
        self._dicts = [weakref.ref(d) for d in dicts]

    def remove(self) -> None:
        for ref in self._dicts:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class _HookDict(dict):
    """A dict that a weak reference can point to (plain dicts cannot)."""

    __slots__ = ("__weakref__",)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class of every layer and model.

    A subclass calls ``super().__init__()`` first, assigns ``Parameter``s, submodules and
    buffers (``register_buffer``) as attributes, and defines ``forward``; calling the
    module runs the forward pre-hooks, ``forward`` and the forward hooks.

    Example:
        >>> class Affine(md.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.scale = md.nn.Parameter(md.ones(3))
        ...     def forward(self, x):
        ...         return x * self.scale
        >>> [name for name, _ in Affine().named_parameters()]
        ['scale']
    """

    training: bool
    _version = 1

    def __init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", _HookDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks", _HookDict())
        setattr_(self, "_forward_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks_always_called", set())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    # -- registration ---------------------------------------------------------------------
    def _check_name(self, what: str, name, table: dict) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if hasattr(self, name) and name not in table:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) named ``name``.

        Raises:
            TypeError: ``param`` is not a Parameter or None.
            ValueError: ``param`` is not a leaf (it has a ``grad_fn``).
        """
        self._check_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (md.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as "
                             f"a function of another Tensor, compute the value in the forward() "
                             f"method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None,
                        persistent: bool = True) -> None:
        """Add a buffer: a tensor that is module state but not a parameter (running
        statistics); ``persistent=False`` keeps it out of ``state_dict``.

        Raises:
            TypeError: ``tensor`` is not a Tensor or None.
        """
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module named ``name`` (None is a placeholder)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, self._buffers, self._modules,
                         self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (md.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, params, self._buffers,
                         self._non_persistent_buffers_set)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (md.nn.Module or None expected)")
            self._modules[name] = value
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            _remove_from(name, d, params, self._modules)
            self.register_buffer(name, value.data, value.persistent)
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            members = d.get(table)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # -- traversal ------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True):
        """Yield ``(name, module)`` for this module and every module below it (each once
        unless ``remove_duplicate=False``)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """Yield this module and every module below it."""
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """Yield ``(name, module)`` for the direct children."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """Yield ``(dotted name, parameter)``; a parameter shared by two modules once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        """Yield every parameter (what an optimizer takes), each once."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        """Yield ``(dotted name, buffer)``, persistent or not (``state_dict`` has the
        persistent ones only)."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``""`` is this module).

        Raises:
            AttributeError: no module there.
        """
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if not isinstance(child, Module):
                raise AttributeError(f"{type(module).__name__} has no attribute `{part}`")
            module = child
        return module

    def _member(self, table: str, target: str, what: str):
        path, _, name = target.rpartition(".")
        members = getattr(self.get_submodule(path), table)
        if name not in members:
            raise AttributeError(f"`{name}` is not {what}")
        return members[name]

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"0.weight"``).

        Raises:
            AttributeError: no parameter there.
        """
        return self._member("_parameters", target, "an nn.Parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        return self._member("_buffers", target, "a buffer")

    def apply(self, fn) -> Module:
        """Call ``fn`` on every submodule (children first), then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- state dicts ----------------------------------------------------------------------
    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of every parameter and persistent buffer by dotted name.

        Values are ``detach()``-ed (sharing memory with the module's tensors) unless
        ``keep_vars=True``.
        """
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _local_state(self) -> dict:
        state = {n: p for n, p in self._parameters.items() if p is not None}
        state.update((n, b) for n, b in self._buffers.items()
                     if b is not None and n not in self._non_persistent_buffers_set)
        return state

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from ``state_dict`` into this module.

        Every entry is checked (type, shape) before anything is copied, so a failing call
        changes nothing.  Values are copied in place under ``no_grad`` (converted to each
        parameter's device and dtype); ``assign=True`` puts the given tensors in instead.

        Returns:
            A named tuple ``(missing_keys, unexpected_keys)``.

        Raises:
            TypeError: ``state_dict`` is not a mapping.
            ValueError: a value is not a Tensor or has another shape, or (``strict``) keys
                are missing or unexpected.  The message lists every problem, as PyTorch's.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected state_dict to be dict-like, got "
                            f"{type(state_dict).__name__}")
        missing, errors, copies = [], [], []
        unexpected = [k for k in state_dict if not isinstance(k, str)]
        for prefix, module in self.named_modules(remove_duplicate=False):
            prefix = prefix + "." if prefix else ""
            local = module._local_state()
            for name, current in local.items():
                key = prefix + name
                if key not in state_dict:
                    missing.append(key)
                    continue
                value = state_dict[key]
                if not isinstance(value, Tensor):
                    errors.append(f'While copying the parameter named "{key}", expected '
                                  f'Tensor from checkpoint but received {type(value).__name__}')
                elif value.shape != current.shape:
                    errors.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{list(value.shape)} from checkpoint, the shape in current "
                                  f"model is {list(current.shape)}.")
                else:
                    copies.append((module, name, current, value))
            for key in state_dict:
                if isinstance(key, str) and key.startswith(prefix):
                    head, dot, _ = key[len(prefix):].partition(".")
                    if head not in (module._modules if dot else local):
                        unexpected.append(key)
        if strict:
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if errors:
            raise ValueError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                             + "\n\t".join(errors))
        for module, name, current, value in copies:
            _load_one(module, name, current, value, assign)
        return _IncompatibleKeys(missing, unexpected)

    # -- modes, devices, gradients -------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (``training``) on this module and every submodule."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: training mode is expected to be a bool, got "
                             f"{type(mode).__name__}")
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (``set_to_none=True``, the default) or zero every parameter's ``.grad``."""
        for p in self.parameters():
            zero_grad_(p, set_to_none)

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)`` or keywords.  Only floating and complex
        tensors change dtype.  Parameters that change are *replaced* by new Parameter
        objects (with their ``.grad`` moved too): make optimizers after moving a module.

        Raises:
            TypeError: the dtype is not a floating or complex dtype, or the arguments do
                not name a device or a dtype.
        """
        device, dtype = _parse_to(args, kwargs)
        if dtype is not None and dtype.kind not in "fc":
            raise TypeError(f"Module.to: only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        def convert(t):
            if dtype is not None and t.dtype.kind in "fc":
                return t.to(device, dtype) if device is not None else t.to(dtype)
            return t.to(device) if device is not None else t

        return self._apply(convert)

    def _apply(self, fn) -> Module:
        from ..autograd import no_grad

        for module in self.modules():
            with no_grad():
                for name, p in module._parameters.items():
                    if p is None:
                        continue
                    new = fn(p)
                    if new is p:
                        continue
                    replacement = Parameter(new, p.requires_grad)
                    if p.grad is not None:
                        replacement.grad = fn(p.grad)
                    module._parameters[name] = replacement
                for name, b in module._buffers.items():
                    if b is not None:
                        module._buffers[name] = fn(b)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def float(self) -> Module:
        from .. import float32

        return self.to(float32)

    def double(self) -> Module:
        from .. import float64

        return self.to(float64)

    def half(self) -> Module:
        from .. import float16

        return self.to(float16)

    # -- hooks and calls ------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with ``with_kwargs``)
        runs before ``forward``; it may return new args (a tuple, or one value), or with
        ``with_kwargs`` a tuple ``(args, kwargs)``."""
        handle = RemovableHandle(self._forward_pre_hooks)
        _insert(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) runs
        after ``forward``; a non-None result replaces the output.  ``always_call`` hooks
        run even when ``forward`` raised."""
        handle = RemovableHandle(self._forward_hooks)
        _insert(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise TypeError(f"forward pre-hook must return None or a tuple of "
                                        f"(new_args, new_kwargs), but got {result!r}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        called = set()
        try:
            output = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, output)
                else:
                    result = hook(self, args, output)
                if result is not None:
                    output = result
        except BaseException:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001, S110  (the forward's error is reported)
                        pass
            raise
        return output

    # -- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override it)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(module), 2)
                       for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def zero_grad_(p: Tensor, set_to_none: bool) -> None:
    """Drop or zero ``p.grad`` (``Module.zero_grad``, ``Optimizer.zero_grad``): zeroing
    detaches the gradient and writes zeros into it in place, as PyTorch's ``zero_()``."""
    grad = p.grad
    if grad is None:
        return
    if set_to_none:
        p.grad = None
        return
    from .. import zeros_like
    from ..autograd import no_grad

    if grad.grad_fn is not None:
        grad = p.grad = grad.detach()
    else:
        grad.requires_grad_(False)
    with no_grad():
        grad.copy_(zeros_like(grad))


def _remove_from(name: str, d: dict, *tables) -> None:
    """Forget ``name`` as a plain attribute and in ``tables`` (dicts or sets): it is about
    to be registered as another kind of member."""
    d.pop(name, None)
    for table in tables:
        if isinstance(table, set):
            table.discard(name)
        else:
            table.pop(name, None)


def _insert(hooks: dict, key: int, hook, prepend: bool) -> None:
    hooks[key] = hook
    if prepend:
        items = list(hooks.items())
        hooks.clear()
        hooks.update([items[-1], *items[:-1]])


def _indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _load_one(module: Module, name: str, current: Tensor, value: Tensor, assign: bool) -> None:
    from ..autograd import no_grad

    if assign:
        if isinstance(current, Parameter):
            value = value if isinstance(value, Parameter) else Parameter(
                value, current.requires_grad)
            module._parameters[name] = value
        else:
            module._buffers[name] = value
        return
    with no_grad():
        if value.device != current.device or value.dtype != current.dtype:
            value = value.to(current.device, current.dtype)
        current.copy_(value)


def _parse_to(args: tuple, kwargs: dict):
    """``(device, dtype)`` from ``Module.to``'s arguments, as ``Tensor.to`` reads them."""
    from mdtensor.tensors.device import Device

    from .._dtypes import DType, as_dtype

    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword argument(s) {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, (DType,)) or (isinstance(a, type) and a in (float, complex)):
            dtype = a
        elif isinstance(a, (str, Device)):
            device = a
        else:
            raise TypeError(f"Module.to: expected a device, a dtype or a Tensor, got "
                            f"{type(a).__name__}")
    return device, (as_dtype(dtype) if dtype is not None else None)
