"""Pytrees: nested tuples, lists and dicts, flattened to their leaves and rebuilt.

Note [Pytrees]
~~~~~~~~~~~~~~
A pytree is a tuple, list (named tuples included) or dict of pytrees, or a leaf: anything
else (a Tensor, a number, None).  ``tree_flatten(tree)`` gives the leaves in order (a
dict's in its insertion order, as Python iterates it) and a ``TreeSpec``, the containers
without the leaves; ``tree_unflatten(leaves, spec)`` puts any objects back in their
places.  The function transforms (``md.func.grad`` and the others, Note
[Differentiation transforms] in mdtensor/_grad_transforms.py) flatten their arguments
and outputs once, work on flat lists, and rebuild the caller's structure at the end;
``vmap`` will match its ``in_dims``/``out_dims`` against the same specs.  Specs compare
equal when the structures are the same (container types, dict keys, lengths), and print
with ``*`` for each leaf: ``({'w': *, 'b': *}, [*])``.  ``leaf_paths(spec)`` names each
leaf as an index expression (``[0]['w']``), for error messages.  ``tree_map`` maps a
function over the leaves (modes and tensor subclasses use it to unwrap arguments).
"""

from __future__ import annotations

__all__ = ["TreeSpec", "leaf_paths", "tree_flatten", "tree_leaves", "tree_map",
           "tree_unflatten"]


def tree_map(fn, tree):
    """Apply ``fn`` to every leaf of nested lists/tuples/dicts."""
    if isinstance(tree, (list, tuple)):
        mapped = [tree_map(fn, x) for x in tree]
        return type(tree)(mapped) if not hasattr(tree, "_fields") else type(tree)(*mapped)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


class TreeSpec:
    """The structure of a pytree: ``kind`` is None for a leaf, else the container type;
    ``keys`` a dict's keys; ``children`` the specs of the items."""

    __slots__ = ("children", "keys", "kind", "num_leaves")

    def __init__(self, kind=None, keys=(), children=()):
        self.kind, self.keys, self.children = kind, tuple(keys), tuple(children)
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in self.children)

    def is_leaf(self) -> bool:
        return self.kind is None

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.kind is other.kind
                and self.keys == other.keys and self.children == other.children)

    def __hash__(self) -> int:
        return hash((self.kind, self.keys, self.children))

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        items = [repr(c) for c in self.children]
        if issubclass(self.kind, dict):
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.keys, items)) + "}"
        if issubclass(self.kind, list):
            return "[" + ", ".join(items) + "]"
        name = self.kind.__name__ if hasattr(self.kind, "_fields") else ""
        return f"{name}({', '.join(items)}{',' if len(items) == 1 and not name else ''})"


_LEAF = TreeSpec()


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    """``(leaves, spec)`` of ``tree`` (Note [Pytrees])."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves: list) -> TreeSpec:
    if isinstance(tree, (list, tuple)):
        return TreeSpec(type(tree), (), [_flatten(x, leaves) for x in tree])
    if isinstance(tree, dict):
        return TreeSpec(type(tree), tree.keys(), [_flatten(v, leaves) for v in tree.values()])
    leaves.append(tree)
    return _LEAF


def tree_leaves(tree) -> list:
    """The leaves of ``tree``, in order."""
    return tree_flatten(tree)[0]


def tree_unflatten(leaves, spec: TreeSpec):
    """The pytree of structure ``spec`` with ``leaves`` in its places, in order."""
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"tree_unflatten: the structure {spec} has {spec.num_leaves} "
                         f"leaves, got {len(leaves)}")
    return _unflatten(iter(leaves), spec)


def _unflatten(it, spec: TreeSpec):
    if spec.kind is None:
        return next(it)
    items = [_unflatten(it, c) for c in spec.children]
    if issubclass(spec.kind, dict):
        return spec.kind(zip(spec.keys, items))
    if hasattr(spec.kind, "_fields"):  # a named tuple
        return spec.kind(*items)
    return spec.kind(items)


def leaf_paths(spec: TreeSpec, prefix: str = "") -> list[str]:
    """Each leaf's place as an index expression after ``prefix``: ``x[0]['w']``."""
    if spec.kind is None:
        return [prefix]
    keys = spec.keys if spec.keys else range(len(spec.children))
    return [path for k, c in zip(keys, spec.children)
            for path in leaf_paths(c, f"{prefix}[{k!r}]")]
