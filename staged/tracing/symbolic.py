"""The symbolic payload: a value of the graph being captured (shape and dtype, no data)."""

from __future__ import annotations

import numpy as np

from .._where import user_site


class CaptureError(RuntimeError):
    """Data was needed from a tensor under capture (``.item()``, ``bool()``, ``.numpy()``)."""


def user_location() -> str:
    """``file:line`` of the innermost frame outside the staged package."""
    return user_site()


class Symbolic:
    """Payload of a Tensor under capture; has ``shape`` and ``dtype`` like an ndarray."""

    __slots__ = ("value", "tracer", "__weakref__")

    def __init__(self, value, tracer):
        self.value = value
        self.tracer = tracer

    @property
    def shape(self):
        return self.value.aval.shape

    @property
    def dtype(self):
        return self.value.aval.dtype.np

    @property
    def ndim(self):
        return len(self.value.aval.shape)

    @property
    def size(self):
        n = 1
        for s in self.value.aval.shape:
            n *= s
        return n

    def __array__(self, *args, **kwargs):
        if not self.tracer.finished:
            data = self.tracer.data_of(self.value, args=True)  # Note [constant data]
            if data is not None:
                return np.asarray(data, *args, **kwargs)
        where = user_location()
        if self.tracer.finished:
            raise CaptureError(
                f"{where}: this tensor was made by a staged trace and stored outside it "
                "(e.g. self.cache = t), and the step it belongs to never ran (its trace, "
                "compile or call failed, or it was only captured): it has no data. Make it "
                "outside the traced function, or keep it in an optimizer's state, which a "
                "failed trace leaves as it was."
            )
        raise CaptureError(
            f"{where}: this needs the data of a tensor that is being captured by "
            "staged.compile/capture (e.g. .item(), bool(t), .numpy(), printing it, or a "
            "Python branch on its value). A compiled function cannot look at values while it "
            "is traced: move such code outside the compiled function."
        )

    @property
    def order(self):
        """Eager's order of this value's dims in memory, outermost first, where it is not
        row-major; else None (Note [traced layouts] in ``tracing/capture.py``)."""
        return self.tracer.orders.get(self.value.id) or None  # (a broadcast's mark: ())

    def traced_item(self, t):
        """``t.item()`` of ``t``, a tensor holding this value (Note [traced items] in
        ``tracing/scalars.py``)."""
        return self.tracer.traced_item(t)

    def __repr__(self) -> str:
        return f"<symbolic {self.value!r}: {self.value.aval}>"
