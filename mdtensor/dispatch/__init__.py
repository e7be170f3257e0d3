"""The dispatcher: what routes every operator call (docs/ARCHITECTURE.md, "Layout").

It imports nothing of mdtensor outside this package but ``_dtypes``: the Tensor, the
layers and the op catalogue sit above it and register into it.
"""

__all__: list[str] = []
