"""``python -m tests.programs.onnx_step --compile NAME script.py [args...]``: run a PyTorch
script as ``python -m staged.torch_compat`` does, its function NAME compiled, but with each
compiled graph exported as ONNX and run in onnxruntime where IREE's module would run.

The compatibility suite's ``onnx`` mode (``runner.py``): the ONNX exporter checked on whole
training steps of real programs (forward, backward, hooks and the optimizer's update in one
graph), the way ``staged.onnx.export`` writes them, through the compiled step's own binding
of arguments, parameters and optimizer state. A step's index checks raise at the call, as
background mode's interpreter raises them (``runtime/background.py``).
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort

from staged.lower.onnx_lowering import to_onnx
from staged.runtime import compiled
from staged.runtime.checks import StepCheck
from staged.torch_compat import run

_PREFIX = {"out": "", "grad": "grad.", "state": "updated.", "escaped": "escaped."}


class OnnxModule:
    """A loaded module's ``invoke``, run by an onnxruntime session of ``graph``."""

    def __init__(self, graph, checks, check_output):
        outs = [
            f"{_PREFIX.get(o.kind, o.kind + '.')}{o.name}#{k}" for k, o in enumerate(graph.outputs)
        ]
        model = to_onnx(graph, input_names=[i.name for i in graph.inputs], output_names=outs)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self.names = [i.name for i in self.session.get_inputs()]
        self.rows, self.check_output = list(checks), check_output

    def invoke(self, fn_name, args, result_dtypes=None, undo=None) -> list:
        res = self.session.run(None, {n: np.asarray(a) for n, a in zip(self.names, args)})
        if self.rows:
            StepCheck(res[self.check_output], self.rows)()
        return res


def _build(self, p, builder=None, graph=None, stats=None) -> tuple:
    c = self.captured
    graph = c.graph if graph is None else graph
    return OnnxModule(graph, c.checks, c.check_output), ""


_bind = compiled.CompiledGraph._bind


def _bind_raising_at_the_call(self, device) -> None:
    _bind(self, device)
    self._checks = None  # OnnxModule raises them (as background mode's interpreter)


def main(argv) -> None:
    flag, step, script, *args = argv
    assert flag == "--compile", "usage: python -m tests.programs.onnx_step --compile NAME script"
    compiled.CompiledGraph.build = _build
    compiled.CompiledGraph._bind = _bind_raising_at_the_call
    run(script, args, step=step)


if __name__ == "__main__":
    main(sys.argv[1:])
