"""staged.onnx.export: every model in models/ checked at opsets 18/21/26, run in onnxruntime
against eager gradients at several batch sizes (one model, dynamic batch), a float64
finite-difference check of the exported graph, an SGD step run 10 times, the IREE round
trip, the CLI, metadata, external data and the errors raised before writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import staged
import staged.nn.functional as F
import staged.onnx
from staged import nn, optim
from staged.__main__ import main, model_specs

SPECS = model_specs()


def session(path):
    return ort.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])


def params_feed(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def eager_loss_and_grads(spec, args):
    model, loss_fn = spec["fn_or_module"], spec.get("loss_fn")
    model.zero_grad()
    loss = loss_fn(model(*args[:-1]), args[-1]) if loss_fn else model(*args)
    loss.backward()
    grads = {k: p.grad.numpy() for k, p in model.named_parameters()}
    model.zero_grad()
    return loss.item(), grads


def batch_like(args, n, seed):
    """Arguments shaped like ``args`` with batch ``n`` (ints drawn below the example's max)."""
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        a = a.numpy()
        shape = (n,) + a.shape[1:]
        if a.dtype.kind == "f":
            out.append(rng.standard_normal(shape).astype(a.dtype))
        else:
            out.append(rng.integers(0, int(a.max()) + 1, shape).astype(a.dtype))
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{model name: (spec, path of its dynamic-batch gradient model at opset 21)}."""
    d = tmp_path_factory.mktemp("onnx")
    out = {}
    for name, make in SPECS.items():
        spec = make()
        export_args = {k: v for k, v in spec.items() if k != "optimizer"}
        staged.onnx.export(**export_args, path=d / f"{name}.onnx")
        out[name] = (spec, d / f"{name}.onnx")
    return out


@pytest.mark.parametrize("opset", [18, 21, 26])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_models_pass_the_full_checker(name, opset, tmp_path):
    spec = {k: v for k, v in SPECS[name]().items() if k != "optimizer"}
    model = staged.onnx.export(**spec, path=tmp_path / "m.onnx", opset=opset)
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    assert model.opset_import[0].version == opset and model.opset_import[0].domain == ""
    assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
    strict = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    assert len(strict.graph.value_info) >= len(model.graph.value_info)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_gradients_match_eager_at_several_batch_sizes(name, exported):
    spec, path = exported[name]
    sess = session(path)
    inputs = [i.name for i in sess.get_inputs()][: len(spec["example_args"])]
    assert sess.get_inputs()[0].shape[0] == "batch"
    n0 = spec["example_args"][0].shape[0]
    for n in (n0, 1, 7, 2 * n0 + 3):
        args = batch_like(spec["example_args"], n, seed=n)
        res = sess.run(None, {**dict(zip(inputs, args)), **params_feed(spec["fn_or_module"])})
        outs = dict(zip([o.name for o in sess.get_outputs()], res))
        loss, grads = eager_loss_and_grads(spec, [staged.tensor(a) for a in args])
        np.testing.assert_allclose(outs["loss"], loss, rtol=1e-4)
        for k, g in grads.items():
            np.testing.assert_allclose(
                outs[f"grad.{k}"], g, rtol=1e-4, atol=1e-6, err_msg=f"{name} batch {n} grad.{k}"
            )


def test_float64_gradients_match_finite_differences(tmp_path):
    staged.manual_seed(3)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(staged.float64)
    x = staged.randn(4, 5, dtype=staged.float64)
    y = staged.tensor([0, 2, 1, 2])
    staged.onnx.export(model, (x, y), tmp_path / "m.onnx", loss_fn=F.cross_entropy)
    sess = session(tmp_path / "m.onnx")
    feed = {"input": x.numpy(), "target": y.numpy(), **params_feed(model)}
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    eps = 1e-6
    for k in ("0.weight", "2.bias"):
        fd = np.zeros_like(feed[k])
        for i in np.ndindex(fd.shape):
            hi, lo = dict(feed), dict(feed)
            hi[k], lo[k] = feed[k].copy(), feed[k].copy()
            hi[k][i] += eps
            lo[k][i] -= eps
            fd[i] = (sess.run(["loss"], hi)[0] - sess.run(["loss"], lo)[0]) / (2 * eps)
        assert outs[f"grad.{k}"].dtype == np.float64
        np.testing.assert_allclose(outs[f"grad.{k}"], fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_sgd_training_step_follows_eager_for_10_steps(name, tmp_path):
    """Parameters and (the CNN's BatchNorm) running statistics and batch count."""
    spec = SPECS[name]()
    model, (x, y) = spec["fn_or_module"], spec["example_args"]
    opt = optim.SGD(model.parameters(), lr=0.1)
    staged.onnx.export(
        model,
        (x, y),
        tmp_path / "step.onnx",
        loss_fn=F.cross_entropy,
        training_step=opt,
        dynamic_axes=spec["dynamic_axes"],
    )
    sess = session(tmp_path / "step.onnx")
    names = [o.name for o in sess.get_outputs()]
    params = params_feed(model)
    batches = [batch_like((x, y), 16, seed=s) for s in range(10)]
    onnx_losses = []
    for xb, yb in batches:
        outs = dict(zip(names, sess.run(None, {"input": xb, "target": yb, **params})))
        onnx_losses.append(float(outs["loss"]))
        params = {k: outs[f"updated.{k}"] for k in params}
    eager_losses = []
    for xb, yb in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(staged.tensor(xb)), staged.tensor(yb))
        loss.backward()
        opt.step()
        eager_losses.append(loss.item())
    np.testing.assert_allclose(onnx_losses, eager_losses, rtol=1e-4)
    assert params.keys() == params_feed(model).keys()
    for k, v in params_feed(model).items():
        np.testing.assert_allclose(params[k], v, rtol=1e-4, atol=1e-6, err_msg=k)


def test_momentum_state_is_an_input_and_an_output(tmp_path):
    staged.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = staged.randn(4, 3), staged.randn(4, 1)

    def loss_of(x, y):
        return ((model(x) - y) ** 2).mean()

    with pytest.raises(staged.onnx.ExportError, match="take one optimizer step"):
        staged.onnx.export(loss_of, (x, y), tmp_path / "a.onnx", training_step=opt)
    assert not (tmp_path / "a.onnx").exists()
    opt.zero_grad()
    loss_of(x, y).backward()
    opt.step()
    staged.onnx.export(
        loss_of, (x, y), tmp_path / "s.onnx", training_step=opt, dynamic_axes={"x": [0], "y": [0]}
    )
    sess = session(tmp_path / "s.onnx")
    ins, outs = [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]
    assert ins == [
        "x",
        "y",
        "weight",
        "bias",
        "state.weight.momentum_buffer",
        "state.bias.momentum_buffer",
    ]
    assert outs[-2:] == [
        "updated.state.weight.momentum_buffer",
        "updated.state.bias.momentum_buffer",
    ]
    feed = {
        "x": x.numpy()[:3],
        "y": y.numpy()[:3],
        **params_feed(model),
        **{
            f"state.{k}.momentum_buffer": opt.state[p]["momentum_buffer"].numpy()
            for k, p in model.named_parameters()
        },
    }
    got = dict(zip(outs, sess.run(None, feed)))
    opt.zero_grad()
    loss = loss_of(x[:3], y[:3])  # the mean's 1/batch follows the batch size
    loss.backward()
    opt.step()
    np.testing.assert_allclose(got["loss"], loss.item(), rtol=1e-5)
    np.testing.assert_allclose(got["updated.weight"], model.weight.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(
        got["updated.state.bias.momentum_buffer"],
        opt.state[model.bias]["momentum_buffer"].numpy(),
        rtol=1e-5,
    )


def test_iree_imports_compiles_and_runs_the_mlp(exported, tmp_path):
    from staged.runtime.compiler import compile_mlir
    from staged.runtime.device import device, to_host

    spec, path = exported["mlp"]
    mlir = tmp_path / "mlp.mlir"
    tool = os.path.join(os.path.dirname(sys.executable), "iree-import-onnx")
    subprocess.run([tool, str(path), "-o", str(mlir)], check=True, capture_output=True)
    m = device().load(compile_mlir(mlir.read_text(), "llvm-cpu", ["--iree-input-type=onnx"]))
    args = batch_like(spec["example_args"], 12, seed=5)
    feed = [*args, *params_feed(spec["fn_or_module"]).values()]
    res = [to_host(r) for r in m.invoke("staged", feed)]
    loss, grads = eager_loss_and_grads(spec, [staged.tensor(a) for a in args])
    np.testing.assert_allclose(res[0], loss, rtol=1e-4)
    for r, g in zip(res[1:], grads.values()):
        np.testing.assert_allclose(r, g, rtol=1e-4, atol=1e-6)


def test_function_names_metadata_and_argument_gradients(tmp_path):
    w = staged.randn(3, requires_grad=True)

    def energy(points, scale):
        return ((points * w).sum(1).tanh() * scale).sum()

    pts, scale = staged.randn(5, 3, requires_grad=True), staged.tensor(2.0)
    model = staged.onnx.export(energy, (pts, scale), tmp_path / "e.onnx", opset=18)
    assert [i.name for i in model.graph.input] == ["points", "scale"]  # w is no parameter
    assert [o.name for o in model.graph.output] == ["loss", "grad.points"]
    assert model.producer_name == "staged" and model.producer_version == staged.__version__
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props["staged.gradients"]) == {"grad.points": "points"}
    assert "gradient of loss with respect to points" in model.graph.output[1].doc_string
    assert all(vi.type.tensor_type.elem_type for vi in model.graph.value_info)
    (g,) = staged.autograd.grad(energy(pts, scale), pts)
    out = session(tmp_path / "e.onnx").run(
        None, {"points": pts.detach().numpy(), "scale": scale.numpy()}
    )
    # atol: where tanh saturates, 1 - tanh**2 keeps few correct digits in float32
    np.testing.assert_allclose(out[1], g.numpy(), rtol=1e-5, atol=1e-5)
    # an explicit list differentiates inputs that do not require grad
    model = staged.onnx.export(
        energy, (pts.detach(), scale), tmp_path / "s.onnx", with_gradients=["scale"]
    )
    assert [o.name for o in model.graph.output] == ["loss", "grad.scale"]


def test_captured_export_onnx(tmp_path):
    model = nn.Linear(4, 2)
    c = staged.capture(lambda x: model(x).relu().sum(), staged.randn(3, 4))
    c.export_onnx(tmp_path / "c.onnx")
    onnx.checker.check_model(str(tmp_path / "c.onnx"), full_check=True)
    sess = session(tmp_path / "c.onnx")
    x = np.random.randn(3, 4).astype(np.float32)
    feed = dict(
        zip([i.name for i in sess.get_inputs()], [x] + [w.tensor.detach().numpy() for w in c.state])
    )
    np.testing.assert_allclose(
        sess.run(None, feed)[0], model(staged.tensor(x)).relu().sum().item(), rtol=1e-5
    )


def test_large_constants_stream_to_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(staged.onnx, "EXTERNAL_ABOVE", 0)
    table = np.linspace(-1, 1, 600).astype(np.float32).reshape(200, 3)  # 2.4 KB

    def fn(x):
        return (x * staged.tensor(table)).sum()

    x = staged.randn(200, 3, requires_grad=True)
    model = staged.onnx.export(fn, (x,), tmp_path / "big.onnx")
    assert (tmp_path / "big.onnx.data").stat().st_size >= table.nbytes
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    onnx.checker.check_model(str(tmp_path / "big.onnx"), full_check=True)
    out = session(tmp_path / "big.onnx").run(None, {"x": x.detach().numpy()})
    np.testing.assert_allclose(out[1], table)  # d/dx sum(x * table)


def test_errors_are_raised_before_writing(tmp_path, monkeypatch):
    from staged.lower.onnx_lowering import model as onnx_model

    model, x, y = nn.Linear(3, 2), staged.randn(4, 3), staged.tensor([0, 1, 1, 0])
    p = tmp_path / "m.onnx"
    with pytest.raises(staged.onnx.ExportError, match="opset 17 is not supported.*18 to 26"):
        staged.onnx.export(model, (x, y), p, loss_fn=F.cross_entropy, opset=17)
    with pytest.raises(staged.onnx.ExportError, match="'target'.*only floating point"):
        staged.onnx.export(model, (x, y), p, loss_fn=F.cross_entropy, with_gradients=["target"])
    with pytest.raises(staged.onnx.ExportError, match="duplicate ONNX input/output names: 'a'"):
        staged.onnx.export(model, (x, y), p, loss_fn=F.cross_entropy, input_names=["a", "a"])
    with pytest.raises(staged.onnx.ExportError, match="scalar floating point loss"):
        staged.onnx.export(model, (x,), p)
    missing = tmp_path / "no" / "m.onnx"
    with pytest.raises(FileNotFoundError, match=r"directory '.*/no' does not exist.*makedirs") as e:
        staged.onnx.export(model, (x, y), missing, loss_fn=F.cross_entropy)
    assert str(e.value).startswith("tests/test_onnx_export.py:")  # the caller's line
    with pytest.raises(FileNotFoundError, match="does not exist"):
        staged.capture(lambda v: v * 2, x).export_onnx(missing)
    tanh = staged.autodiff.REGISTRY["tanh"]
    monkeypatch.delitem(onnx_model.LOWERINGS, tanh)
    with pytest.raises(staged.onnx.ExportError) as err:
        staged.onnx.export(lambda v: v.tanh().tanh().sum(), (x.requires_grad_(),), p)
    lines = [ln for ln in str(err.value).splitlines() if ln.strip().startswith("tanh")]
    assert len(lines) == 2 and all("test_onnx_export.py:" in ln for ln in lines), str(err.value)
    assert not p.exists()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the eager 0/0 at batch size 1
def test_dynamic_batch_variance_fills_and_errors(tmp_path):
    """Shared with staged.compile(dynamic=True) (staged/tracing/dynamic.py): a variance's
    1/max(N-1, 0) and a zeros(N, 2) become run-time values; a size that is no multiple of
    the batch raises ExportError naming the line, before any file is written."""

    def fn(x):
        h = staged.zeros(x.shape[0], 2) + 1.5
        return (x.var(0).sum() + (x[:, :2] * h).mean(),)

    x = staged.randn(5, 3, requires_grad=True)
    # var's backward takes another path at N - 1 = 0 (the same NaN here, as checked below)
    with pytest.warns(UserWarning, match=r"traced at batch = 1 is not the exported graph"):
        staged.onnx.export(fn, (x,), tmp_path / "v.onnx", dynamic_axes={"x": [0]})
    sess = session(tmp_path / "v.onnx")
    for n in (5, 2, 13, 1):
        xv = staged.randn(n, 3, requires_grad=True)
        loss, grad = sess.run(None, {"x": xv.detach().numpy()})
        want = fn(xv)[0]
        want.backward()
        np.testing.assert_allclose(loss, want.item(), rtol=1e-5)
        np.testing.assert_allclose(grad, xv.grad.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(
        staged.onnx.ExportError,
        match=r"dynamic dim 'batch': slice at "
        r".*test_onnx_export\.py:\d+: a size goes from 4 to 5",
    ):
        staged.onnx.export(
            lambda v: (v[1:] * v[:-1]).sum(), (x,), tmp_path / "e.onnx", dynamic_axes={"v": [0]}
        )
    assert not (tmp_path / "e.onnx").exists()


def test_an_example_batch_of_1_exports_a_model_for_every_batch(tmp_path):
    """torch.onnx.export's usual dummy input has batch 1, where code skips an expand to (1,
    C): generalizing from 1 and 2 raised ExportError. Sizes 2 and 3 are traced instead."""
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x, y = staged.randn(1, 3), staged.tensor([1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batch 1 checked: the graph is the code's there
        staged.onnx.export(
            m,
            (x, y),
            tmp_path / "m.onnx",
            loss_fn=F.cross_entropy,
            dynamic_axes={"input": [0], "target": [0]},
        )
    sess = session(tmp_path / "m.onnx")
    for n in (1, 3, 8):
        xv, yv = staged.randn(n, 3), staged.tensor([1, 0] * 4)[:n]
        feed = {"input": xv.numpy(), "target": yv.numpy()}
        feed.update({k: v.numpy() for k, v in m.state_dict().items()})
        loss = sess.run(None, {i.name: feed[i.name] for i in sess.get_inputs()})[0]
        np.testing.assert_allclose(loss, F.cross_entropy(m(xv), yv).item(), rtol=1e-5)


def test_a_model_whose_code_raises_at_batch_1_warns(tmp_path):
    """Batch statistics raise at batch 1 (one value per channel); the exported model
    cannot, so the export says so."""

    def fn(x):
        return F.batch_norm(x, None, None, training=True).square().sum()

    with pytest.warns(UserWarning, match=r"batch = 1 .*ValueError.*more than 1 value"):
        staged.onnx.export(fn, (staged.randn(4, 3),), tmp_path / "b.onnx", dynamic_axes={"x": [0]})


def test_cli_exports_every_model(tmp_path):
    assert main(["export-onnx", "--out", str(tmp_path), "--opset", "26"]) == 0
    for name in SPECS:
        onnx.checker.check_model(str(tmp_path / f"{name}.onnx"), full_check=True)
    assert main(["export-onnx", "mlp", "--out", str(tmp_path), "--training-step", "--static"]) == 0
    outs = [o.name for o in onnx.load(str(tmp_path / "mlp_step.onnx")).graph.output]
    assert outs[0] == "loss" and outs[-1] == "updated.4.bias"


def test_staged_onnx_loads_on_first_use(tmp_path):
    """``import staged; staged.onnx.export(...)`` works without ``import staged.onnx`` (as
    torch.onnx), and ``import staged`` alone does not import onnx."""
    code = (
        "import sys, staged\n"
        "assert 'onnx' not in sys.modules, 'import staged imported onnx'\n"
        "x = staged.ones(3, requires_grad=True)\n"
        f"staged.onnx.export(lambda x: (x * x).sum(), (x,), {str(tmp_path / 'f.onnx')!r})\n"
        "try:\n    staged.no_such_name\nexcept AttributeError as e:\n    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(staged.__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "no attribute 'no_such_name'" in out.stdout
    assert (tmp_path / "f.onnx").exists()
