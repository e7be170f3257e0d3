"""Pytrees (mdtensor/_pytree.py): flattening, rebuilding, specs and leaf paths."""

from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mdtensor as md
from mdtensor._pytree import leaf_paths, tree_flatten, tree_leaves, tree_map, tree_unflatten

Pair = namedtuple("Pair", "a b")

trees = st.recursive(
    st.one_of(st.integers(), st.none(), st.floats(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from("wxyz"), inner, max_size=3),
        st.tuples(inner, inner).map(lambda t: Pair(*t)),
    ),
    max_leaves=12,
)


@given(trees)
def test_unflatten_rebuilds_what_flatten_took_apart(tree):
    leaves, spec = tree_flatten(tree)
    assert spec.num_leaves == len(leaves)
    rebuilt = tree_unflatten(leaves, spec)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    assert tree_flatten(rebuilt)[1] == spec
    assert tree_map(lambda v: v, tree) == tree
    assert len(leaf_paths(spec)) == len(leaves)


def test_leaves_in_order_and_paths_name_them():
    tree = ({"w": 1, "b": [2, 3]}, Pair(4, (5,)))
    leaves, spec = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5] == tree_leaves(tree)
    assert repr(spec) == "({'w': *, 'b': [*, *]}, Pair(*, (*,)))"
    assert leaf_paths(spec, "x") == ["x[0]['w']", "x[0]['b'][0]", "x[0]['b'][1]",
                                     "x[1][0]", "x[1][1][0]"]
    for path, leaf in zip(leaf_paths(spec, "tree"), leaves):
        assert eval(path) == leaf


def test_specs_compare_by_structure():
    t = md.asarray([1.0])
    assert tree_flatten((t, [t]))[1] == tree_flatten((0, [1]))[1]
    assert tree_flatten((t, [t]))[1] != tree_flatten((t, (t,)))[1]
    assert tree_flatten({"a": t})[1] != tree_flatten({"b": t})[1]
    assert tree_flatten([t, t])[1] != tree_flatten([t])[1]
    assert tree_flatten(t)[1].is_leaf()


def test_unflatten_with_the_wrong_number_of_leaves_raises():
    _, spec = tree_flatten((1, [2, 3]))
    with pytest.raises(ValueError, match=r"tree_unflatten: the structure \(\*, \[\*, \*\]\) "
                                         r"has 3 leaves, got 2"):
        tree_unflatten([1, 2], spec)


def test_modes_tree_map_is_the_pytree_one():
    assert md.modes.tree_map is tree_map
