"""The ``staged`` command line, run in-process through ``main(argv)`` (a subprocess only
for ``--version`` and one bad argument): every subcommand's help, its errors (one line,
no traceback) and what it does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import staged
import staged.nn.functional as F
from staged import _native, nn, optim
from staged._version import __version__
from staged.__main__ import UsageError, main, parse_inputs
from staged.runtime import cache

MODULE = textwrap.dedent("""
    import staged
    from staged import nn, optim
    import staged.nn.functional as F

    model = nn.Linear(6, 3)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def loss(x, y):
        return F.cross_entropy(model(x), y)

    def step(x, y):
        opt.zero_grad()
        out = loss(x, y)
        out.backward()
        opt.step()
        return out
""")

COMMANDS = ["doctor", "export-onnx", "run", "cache", "explain"]


def outcome(argv, capsys) -> tuple:
    """``(exit status, stdout, stderr)`` of ``main(argv)``."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def user_module(tmp_path) -> Path:
    path = tmp_path / "mystep.py"
    path.write_text(MODULE)
    return path


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A compiled SGD step called twice and saved, its inputs as .npy files, and the
    outputs of the two calls Python made after saving."""
    staged.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @staged.compile
    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss, {"logits": logits}

    x, y = staged.randn(8, 4), staged.randint(0, 3, (8,))
    step(x, y), step(x, y)
    out = tmp_path_factory.mktemp("deployed")
    step.save(out / "step")
    np.save(out / "x.npy", x.numpy())
    np.save(out / "y.npy", y.numpy())
    after = [(loss.item(), d["logits"].detach().numpy()) for loss, d in (step(x, y), step(x, y))]
    return out, after


def test_version_in_a_subprocess():
    res = subprocess.run(
        [sys.executable, "-m", "staged", "--version"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and res.stdout.strip() == f"staged {__version__}", res.stderr


def test_a_bad_argument_in_a_subprocess_is_one_line():
    script = Path(sys.executable).with_name("staged")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "staged"]
    res = subprocess.run(cmd + ["run", "no/such/dir"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "staged run: error: no/such/dir: not a deployed step (no manifest.json); make one "
        "with staged.compile(step).save(dir)"
    ]


def test_help_lists_the_commands_and_each_has_examples(capsys):
    rc, out, _ = outcome(["--help"], capsys)
    assert rc == 0 and all(c in out for c in COMMANDS) and "--version" in out
    for c in COMMANDS:
        rc, out, _ = outcome([c, "--help"], capsys)
        assert rc == 0 and "examples:" in out and f"staged {c} " in out, c


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "staged: error: the following arguments are required: COMMAND"),
        (["compile"], "staged: error: argument COMMAND: invalid choice: 'compile'"),
        (
            ["doctor", "--timeout", "soon"],
            "staged doctor: error: argument --timeout: invalid float",
        ),
        (
            ["export-onnx", "{mod}:loss"],
            "staged export-onnx: error: {mod}:loss needs --example-inputs",
        ),
        (
            ["export-onnx", "{mod}:loss", "--example-inputs", "x=floot32[2,6]"],
            "staged export-onnx: error: 'floot32[2,6]': unknown dtype 'floot32'",
        ),
        (
            ["export-onnx", "{mod}:loss", "--example-inputs", "x=float32[2,6]"],
            "staged export-onnx: error: the inputs do not fit {mod}:loss(x, y): missing a required "
            "argument: 'y'",
        ),
        (
            ["export-onnx", "{mod}:loss", "--example-inputs", "x=nothing.npy", "y=int64[2]"],
            "staged export-onnx: error: cannot read nothing.npy: ",
        ),
        (
            ["export-onnx", "{mod}:lost", "--example-inputs", "float32[2,6]"],
            "staged export-onnx: error: {mod} has no 'lost'",
        ),
        (
            ["export-onnx", "no_such_module:f", "--example-inputs", "float32[2]"],
            "staged export-onnx: error: cannot import no_such_module: ModuleNotFoundError",
        ),
        (
            ["export-onnx", "{mod}:loss", "--example-inputs", "x=float32[2,5]", "y=int64[2]"],
            "staged export-onnx: error: ",
        ),  # the user's code fails to trace: its message
        (
            ["export-onnx", "mlp", "--example-inputs", "float32[2]"],
            "staged export-onnx: error: --example-inputs and --dynamic apply to your own code",
        ),
        (["run", "{tmp}"], "staged run: error: {tmp}: not a deployed step (no manifest.json)"),
        (["run", "{tmp}", "--steps", "many"], "staged run: error: argument --steps: invalid int"),
        (["cache"], "staged cache: error: the following arguments are required: action"),
        (["cache", "purge"], "staged cache: error: argument action: invalid choice: 'purge'"),
        (["explain", "{mod}"], "staged explain: error: '{mod}': expected path/to/file.py:function"),
        (
            ["explain", "{mod}:step"],
            "staged explain: error: {mod}:step has not been called: give --example-inputs",
        ),
        (
            ["explain", "{mod}:opt", "--example-inputs", "float32[2,6]"],
            "staged explain: error: {mod}:opt is a SGD, not a function",
        ),
    ],
)
def test_bad_arguments_give_one_line_and_a_failing_status(
    argv, message, user_module, tmp_path, capsys
):
    fill = dict(mod=str(user_module), tmp=str(tmp_path))
    rc, out, err = outcome([a.format(**fill) for a in argv], capsys)
    assert rc not in (0, None) and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith(message.format(**fill)), err


def test_traceback_on_request(tmp_path):
    with pytest.raises(UsageError, match="not a deployed step"):
        main(["--traceback", "run", str(tmp_path)])


def test_inputs_parse_names_shapes_files_and_numbers(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.int32))
    args, kwargs = parse_inputs(
        ["float64[2,3]", f"{tmp_path / 'a.npy'}", "k=int64[4]", "lr=0.5", "n=3", "s=float32[]"]
    )
    assert args[0].dtype == np.float64 and args[0].shape == (2, 3) and args[0].std() > 0
    assert args[1].tolist() == [0, 1, 2] and args[1].dtype == np.int32
    assert kwargs["k"].tolist() == [0] * 4 and kwargs["k"].dtype == np.int64
    assert kwargs["lr"] == 0.5 and kwargs["n"] == 3 and type(kwargs["n"]) is int
    assert kwargs["s"].shape == () and kwargs["s"].dtype == np.float32


def test_doctor_lists_versions_backends_drivers_and_the_cache(capsys):
    rc, out, _ = outcome(["doctor"], capsys)
    assert rc == 0
    lines = out.splitlines()
    row = {ln.split()[0]: ln for ln in lines if ln.strip()}
    assert row["staged"].split()[1] == __version__
    assert row["NumPy"].split()[1] == np.__version__
    assert row["eager"] == f"eager hot path   {_native.summary()}"
    assert "IREE compiler    3." in out and "IREE runtime     3." in out
    cpu = next(ln for ln in lines if ln.strip().startswith("llvm-cpu"))
    assert "ok: compiles" in cpu and "runs on local-task" in cpu
    assert {"vulkan-spirv", "cuda", "lavapipe", "libcuda", "nvidia-smi"} <= set(row)
    assert f"compile cache    {cache.cache_dir()}: " in out


def test_export_onnx_of_a_user_function(user_module, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((5, 6), np.float32))
    rc, out, err = outcome(
        [
            "export-onnx",
            f"{user_module}:loss",
            "--example-inputs",
            f"x={tmp_path / 'x.npy'}",
            "y=int64[5]",
            "--dynamic",
            "x",
            "y",
            "--out",
            str(tmp_path / "onnx"),
        ],
        capsys,
    )
    assert rc == 0, err
    path = tmp_path / "onnx" / "loss.onnx"
    assert out.startswith(f"{path}: ")
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["x", "y", "weight", "bias"]
    assert [o.name for o in model.graph.output] == ["loss", "grad.weight", "grad.bias"]
    # the loss onnxruntime computes is the module's, at another batch size
    mod = sys.modules["mystep"]
    x, y = staged.randn(7, 6), staged.randint(0, 3, (7,))
    feed = {
        "x": x.numpy(),
        "y": y.numpy(),
        **{k: v.detach().numpy() for k, v in mod.model.state_dict().items()},
    }
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(["loss"], feed)[0], mod.loss(x, y).item(), rtol=1e-5)


def test_export_onnx_of_a_package_module_with_chosen_gradients(
    user_module, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # package.module:function imports from the current directory
    rc, _, err = outcome(
        [
            "export-onnx",
            "mystep:loss",
            "--example-inputs",
            "y=int64[4]",
            "x=float32[4,6]",
            "--gradients",
            "x",
            "--out",
            "o",
        ],
        capsys,
    )
    assert rc == 0, err
    outs = [o.name for o in onnx.load("o/loss.onnx").graph.output]
    assert outs == ["loss", "grad.x"]


def test_run_a_deployed_step_gives_the_outputs_python_gives(deployed, tmp_path, capsys):
    d, after = deployed
    rc, out, err = outcome(
        [
            "run",
            str(d / "step"),
            "--input",
            f"x={d / 'x.npy'}",
            f"y={d / 'y.npy'}",
            "--steps",
            "2",
            "--out",
            str(tmp_path / "o"),
            "--save",
            str(tmp_path / "later"),
        ],
        capsys,
    )
    assert rc == 0, err
    lines = out.splitlines()
    for i, (loss, logits) in enumerate(after):
        assert lines[i].startswith(f"step {i + 1}: out.0 = ")
        assert lines[i].endswith(f"out.1.logits = float32[{', '.join(map(str, logits.shape))}]")
        np.testing.assert_allclose(float(lines[i].split()[4].rstrip(",")), loss, rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "o" / "out.0.npy"), after[-1][0], rtol=1e-5)
    np.testing.assert_allclose(
        np.load(tmp_path / "o" / "out.1.logits.npy"), after[-1][1], rtol=1e-5, atol=1e-6
    )
    # the re-saved step continues from the state after the two steps: as the original does
    rc, out, _ = outcome(
        ["run", str(tmp_path / "later"), "--input", f"{d / 'x.npy'}", f"{d / 'y.npy'}"], capsys
    )
    again = staged.runtime.load(d / "step")
    x, y = np.load(d / "x.npy"), np.load(d / "y.npy")
    want = [again(x, y)[0].item() for _ in range(3)][-1]
    assert rc == 0
    np.testing.assert_allclose(float(out.split()[4].rstrip(",")), want, rtol=1e-5)


def test_run_reports_a_wrong_input_in_one_line(deployed, capsys):
    d, _ = deployed
    rc, _, err = outcome(
        ["run", str(d / "step"), "--input", "x=float32[8,5]", "y=int64[8]"], capsys
    )
    assert rc == 1 and err.splitlines() == [
        "staged run: error: argument x: expected shape [8, 4], got [8, 5] (a saved step has "
        "the shapes it was traced with; named dims are dynamic)"
    ]


def test_explain_a_user_step(user_module, capsys):
    rc, out, err = outcome(
        ["explain", f"{user_module}:step", "--example-inputs", "x=float32[5,6]", "y=int64[5]"],
        capsys,
    )
    assert rc == 0, err
    assert "llvm-cpu" in out and len(out.splitlines()) > 3  # what explain() prints


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STAGED_CACHE_DIR", str(tmp_path / "c"))
    rc, out, _ = outcome(["cache", "info"], capsys)
    assert rc == 0 and out.startswith(f"{tmp_path / 'c'}: 0 compiled modules, 0 B")
    cache.store(cache.cache_key("a"), b"x" * 2000)
    cache.store(cache.cache_key("b"), b"y" * 100)
    (tmp_path / "c" / "notes.txt").write_text("not the cache's")
    size = sum(os.path.getsize(tmp_path / "c" / cache.cache_key(k)) for k in "ab")
    rc, out, _ = outcome(["cache", "info"], capsys)
    assert out.startswith(f"{tmp_path / 'c'}: 2 compiled modules, {size / 1024:.1f} KiB")
    rc, out, _ = outcome(["cache", "clear"], capsys)
    assert rc == 0 and out.startswith("removed 2 compiled modules")
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["notes.txt"]
    assert cache.load(cache.cache_key("a")) is None
