"""The Tensor and what it is made of: its fields (version counter, autograd meta, view
info), its devices, and the factories that make tensors from data.

These modules sit above the dispatcher (they import its keys and call ops through its
namespaces) and below the functionality layers and the op catalogue.
"""

__all__: list[str] = []
