"""A saved step with collectives (Note [segments]), loaded: its segments run as the live
step's do (``Segments``), the collectives on the host through ``staged.distributed``'s
process group (a world of one without it); the state lives on the device here, between
calls, instead of in the module's globals."""

from __future__ import annotations

from typing import Any

import numpy as np

from .compiler import narrowing
from .deploy import Deployed
from .segmented import Segments


class DeployedSegments(Deployed):
    """``Deployed`` for a manifest with a ``program``."""

    _segments: Any = None  # a Segments, made on the first load

    def _load(self, archive=None, arrays=None) -> None:
        """(Re)set the state from the parameter archive file ``archive`` or from ``arrays``
        (name -> array at the module's edge)."""
        import iree.runtime as rt

        m = self.manifest
        if self._segments is None:
            module = self.device.load((self.directory / m["module"]).read_bytes())
            self._segments = Segments(m["program"], module, narrowing(m["backend"]))
        if archive is not None:
            index = rt.ParameterIndex()
            index.load(archive)
            views = dict(index.items())
            arrays = {
                s["name"]: np.frombuffer(views[s["name"]].file_view, s["device_dtype"]).reshape(
                    s["shape"]
                )
                for s in m["state"]
            }
        self._state = {
            s["name"]: self._segments.to_device(arrays[s["name"]].astype(s["dtype"]), s["dtype"])
            for s in m["state"]
        }

    def _invoke(self, arrays) -> list:
        args, program = iter(arrays), self.manifest["program"]
        res = self._segments.run(
            [
                next(args) if kind == "arg" else self._state[name]
                for _, kind, name in program["inputs"]
            ]
        )
        out = []
        for r, (_, _, kind, name) in zip(res, program["outputs"]):
            if kind == "state":
                self._state[name] = r
            elif kind in ("out", "check"):
                out.append(r)
        return out

    def state_dict(self) -> dict:
        return {k: np.asarray(v) for k, v in self._state.items()}
