"""Helpers for CompositeImplicitAutograd kernels written in terms of other ops.

Note [Composite errors name the op]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A composite runs other ops, whose errors name themselves: ``hstack`` of tensors that do not
fit would say ``aten::cat: tensors must have the same shape ...``, ``nansum`` with an axis
out of range ``sum: axis 5 is out of range ...``.  The user called ``hstack``, so
``names_op`` puts its name in place of the inner op's (``hstack: tensors must have the
same shape ...``), keeping the type and the words that say what was wrong, as the backend
kernels do for the backend's errors (Note [Errors from the backend] in ops/_errors.py).
"""

from __future__ import annotations

import functools
import re

__all__ = ["names_op"]


def names_op(name: str):
    """Decorate a composite kernel so the errors of the ops it runs name ``name`` (Note
    [Composite errors name the op])."""
    def decorate(fn):
        @functools.wraps(fn)
        def composite(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except (ValueError, TypeError, IndexError, RuntimeError) as e:
                msg = str(e)
                if type(e) not in _PLAIN or msg.startswith(f"{name}:"):
                    raise  # a class of its own may take other arguments: as it is
                raise type(e)(f"{name}: {_INNER.sub('', msg, count=1)}") from None
        return composite
    return decorate


#: the inner op's name at the start of its message (``aten::cat: ``, ``sum: ``)
_INNER = re.compile(r"^(aten::)?[A-Za-z_][\w.]*: ")
_PLAIN = (ValueError, TypeError, IndexError, RuntimeError, NotImplementedError)
