"""The ``staged`` command line.

    staged export-onnx [MODEL ...] [--out DIR] [--opset N] [--static] [--no-gradients]
                       [--training-step]

``export-onnx`` writes ``<out>/<model>.onnx`` for each model module in ``models/`` (run
from the repository root) that defines ``export_spec()``: a dict of keyword arguments of
``staged.onnx.export`` (``fn_or_module``, ``example_args``, and optionally ``loss_fn``,
``dynamic_axes``), plus an optional ``optimizer`` factory (parameters -> optimizer) used
with ``--training-step``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import time


def model_specs() -> dict:
    """``{name: models.<name>.export_spec}`` for every module of the ``models`` package
    that defines one."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        import models
    except ImportError:
        raise SystemExit("staged export-onnx: no `models` package here; run it from the "
                         "repository root") from None
    specs = {}
    for info in pkgutil.iter_modules(models.__path__):
        mod = importlib.import_module(f"models.{info.name}")
        if callable(getattr(mod, "export_spec", None)):
            specs[info.name] = mod.export_spec
    return specs


def export_onnx(a) -> int:
    import staged.onnx

    specs = model_specs()
    names = a.models or sorted(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"staged export-onnx: unknown model(s) {unknown}; models with an "
                         f"export_spec(): {sorted(specs)}")
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        spec = dict(specs[name]())
        make_opt = spec.pop("optimizer", None)
        if a.static:
            spec.pop("dynamic_axes", None)
        if a.training_step:
            if make_opt is None:
                raise SystemExit(f"staged export-onnx: {name}'s export_spec() has no optimizer")
            spec["training_step"] = make_opt(spec["fn_or_module"].parameters())
        path = os.path.join(a.out, f"{name}{'_step' if a.training_step else ''}.onnx")
        t0 = time.perf_counter()
        model = staged.onnx.export(**spec, path=path, opset=a.opset,
                                   with_gradients=not a.no_gradients)
        print(f"{path}: {len(model.graph.node)} nodes, inputs "
              f"{[i.name for i in model.graph.input]}, outputs "
              f"{[o.name for o in model.graph.output]} ({time.perf_counter() - t0:.1f} s)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="staged", description="staged's command line")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export-onnx", help="export the models in models/ as ONNX with gradients")
    e.add_argument("models", nargs="*", help="model modules to export (default: all)")
    e.add_argument("--out", default="out/onnx", help="output directory (default: out/onnx)")
    e.add_argument("--opset", type=int, default=21, help="ai.onnx opset, 18 to 26 (default 21)")
    e.add_argument("--static", action="store_true", help="no dynamic batch dimension")
    e.add_argument("--no-gradients", action="store_true", help="the forward (loss) only")
    e.add_argument("--training-step", action="store_true",
                   help="export one optimizer step (updated parameters and state)")
    e.set_defaults(run=export_onnx)
    a = p.parse_args(argv)
    return a.run(a)


if __name__ == "__main__":
    sys.exit(main())
