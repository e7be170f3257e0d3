"""The Autograd layer: reverse-mode autograd as a dispatcher layer.

``kernels`` (the layer's kernel per op and its fallback), ``formulas`` (the registry of
derivative formulas the catalogue fills), ``graph`` (the graph's nodes and the engine that
runs them), ``grad_mode`` (no_grad, inference mode), ``api`` (``backward``, ``grad`` and
Tensor's autograd methods).  ``md.autograd`` (mdtensor/autograd/) is the public face.
"""

__all__: list[str] = []
