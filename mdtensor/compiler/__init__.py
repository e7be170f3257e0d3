"""``md.compile`` and the program capture it shares with ``md.func.trace``.

- ``capture``: the recording mode and the ``Graph`` it writes (``md.func.trace``);
- ``program``: a capture compiled into one Python function calling the recorded kernels;
- ``compiled``: ``md.compile``'s guards, cache, graph breaks and side effects.

docs/COMPILE.md is the user's guide.
"""

from .capture import Graph, GraphBreak
from .compiled import CompiledFunction, compile

__all__ = ["CompiledFunction", "Graph", "GraphBreak", "compile"]
