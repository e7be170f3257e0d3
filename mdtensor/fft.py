"""``md.fft``: the Array API FFT extension (the functions of aten ``fft_<name>`` ops)."""

from __future__ import annotations

from mdtensor.ops import aten_calls as _aten
from mdtensor.ops.fft import FFT_NAMES as _NAMES

__all__ = sorted(_NAMES)

globals().update({_name: getattr(_aten, _aten_name) for _name, _aten_name in _NAMES.items()})
