"""``md.linalg``: the Array API linear-algebra extension.

Every name is the function of a catalogue operator (``md.linalg.inv.op is
md.ops.aten.linalg_inv``), bound from ``mdtensor.ops.linalg.LINALG_NAMES``.
"""

from __future__ import annotations

from mdtensor.ops import aten_calls as _aten
from mdtensor.ops.linalg import LINALG_NAMES as _NAMES

__all__ = sorted(_NAMES)

globals().update({_name: getattr(_aten, _aten_name) for _name, _aten_name in _NAMES.items()})
