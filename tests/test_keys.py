"""DispatchKey and DispatchKeySet."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.dispatch import keys as _keys
from mdtensor.dispatch.keys import DispatchKey as K
from mdtensor.dispatch.keys import DispatchKeySet

_DESIGN_ORDER = ["PreDispatch", "Batched", "Autocast", "AutogradFunctionality",
                 "ADInplaceOrView", "Functionalize", "Python", "BackendSelect", "Sparse",
                 "Dense"]


def test_functionality_order_is_design_order():
    assert [n for n, _ in reversed(_keys.FUNCTIONALITIES)] == _DESIGN_ORDER
    values = [K[n].value for n in _DESIGN_ORDER]
    assert values == sorted(values, reverse=True)
    assert _keys.BACKEND_COMPONENTS[-1] == "Meta"


def test_key_kinds():
    assert K.CPU.is_runtime and K.AutogradCPU.is_runtime and K.SparseMeta.is_runtime
    assert K.Python.is_runtime and K.BackendSelect.is_runtime
    assert not K.Dense.is_runtime and not K.CPUBit.is_runtime
    assert K.CPUBit.is_backend_component and not K.CPU.is_backend_component
    for alias in ("Autograd", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
                  "ArrayAPI"):
        assert K[alias].is_alias and not K[alias].is_runtime
    assert K.AutogradJAX.functionality == "AutogradFunctionality"
    assert K.AutogradJAX.backend == "JAX" and K.Python.backend is None
    assert _keys.runtime_keys(K.Autograd) == {K["Autograd" + b] for b in
                                              _keys.BACKEND_COMPONENTS}
    assert K.Functionalize in _keys.runtime_keys(K.CompositeImplicitAutograd)
    assert K.AutogradCPU not in _keys.runtime_keys(K.CompositeExplicitAutograd)
    with pytest.raises(ValueError, match="not a runtime or alias key"):
        _keys.runtime_keys(K.Dense)
    with pytest.raises(ValueError, match="unknown dispatch key 'Nope'"):
        _keys.key_from_name("Nope")


def test_keyset_ops_and_repr():
    ks = DispatchKeySet([K.CPU, K.ADInplaceOrView]) | K.AutogradCPU
    assert repr(ks) == "DispatchKeySet(AutogradCPU, ADInplaceOrView, CPU)"
    assert ks.highest_priority_key() is K.AutogradCPU
    assert K.CPU in ks and K.AutogradCPU in ks and K.Meta not in ks
    assert (ks - K.AutogradCPU).highest_priority_key() is K.ADInplaceOrView
    assert K.CPU in (ks - K.AutogradCPU)  # difference keeps backend bits
    assert ks - DispatchKeySet(K.CPUBit) == DispatchKeySet(
        [K.AutogradFunctionality, K.ADInplaceOrView, K.Dense])
    assert DispatchKeySet(ks.raw) == ks and hash(DispatchKeySet(ks.raw)) == hash(ks)
    assert not DispatchKeySet() and DispatchKeySet().highest_priority_key() is None
    with pytest.raises(AttributeError, match="immutable"):
        ks._bits = 0
    assert DispatchKeySet(K.Python).raw & _keys.AFTER_PYTHON == 0
    assert (ks.raw & _keys.AFTER_AUTOGRAD) == (ks - K.AutogradCPU).raw


def test_meta_wins_over_cpu():
    ks = DispatchKeySet([K.CPU, K.Meta])
    assert ks.highest_priority_key() is K.Meta


def test_tensor_keyset():
    x = md.asarray([1.0], device="cpu")
    assert K.CPU in x.keyset and K.AutogradCPU not in x.keyset
    y = md.asarray([1.0], requires_grad=True, device="cpu")
    assert K.AutogradCPU in y.keyset


_RUNTIME = list(_keys.RUNTIME_KEYS)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(_RUNTIME), min_size=1, max_size=5))
def test_iteration_priority_order_and_highest_key(keys):
    ks = DispatchKeySet(keys)
    listed = list(ks)
    assert set(keys) <= set(listed)
    ranks = [_RUNTIME.index(k) for k in listed]
    assert ranks == sorted(ranks)
    assert ks.highest_priority_key() is listed[0]
    # the highest key is the one with the highest functionality, then the highest backend
    funcs = [_keys.FUNC_BIT[k.functionality] for k in keys]
    assert _keys.FUNC_BIT[listed[0].functionality] == max(funcs)
