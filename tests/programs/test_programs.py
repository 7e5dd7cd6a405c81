"""The compatibility suite (``runner.py``): every program in ``scripts/`` runs with staged
standing in for torch and gives torch's final loss (to the program's ``rtol``); with its
training step compiled, staged's eager loss."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.programs import runner as R

PROGRAMS = R.programs()
COMPILED = [p for p in PROGRAMS if R.spec(p).step]


def test_there_are_programs():
    assert len(PROGRAMS) >= 10 and len(COMPILED) >= 0.8 * len(PROGRAMS)


@pytest.mark.parametrize("path", PROGRAMS, ids=R.name)
def test_eager_gives_torchs_loss(path):
    ref, got = R.run(path, "torch"), R.run(path, "eager")
    assert not ref.error, f"torch: {ref.error}"
    assert not got.error, got.error
    assert R.close(got.loss, ref.loss, R.spec(path).rtol), (got.loss, ref.loss)


@pytest.mark.parametrize("path", COMPILED, ids=R.name)
def test_compiled_step_gives_eagers_loss(path):
    eager, got = R.run(path, "eager"), R.run(path, "compiled")
    assert not got.error, got.error
    assert R.close(got.loss, eager.loss, R.spec(path).crtol), (got.loss, eager.loss)


@pytest.mark.parametrize("path", COMPILED, ids=R.name)
def test_onnx_export_of_the_step_gives_eagers_loss(path):
    """The compiled step's graphs exported as ONNX and run in onnxruntime, in place of
    IREE's module, every call of the program: the exporter on whole training steps."""
    eager, got = R.run(path, "eager"), R.run(path, "onnx")
    assert not got.error, got.error
    assert R.close(got.loss, eager.loss, R.spec(path).crtol), (got.loss, eager.loss)


_RECORD = "torch's recorded loss is stale: run `python -m tests.programs.runner --record`"


@pytest.mark.parametrize("path", PROGRAMS, ids=R.name)
def test_torchs_recorded_loss_is_current(path):
    rec = R.recorded(path)
    assert rec is not None and rec["fingerprint"] == R.fingerprint(path), _RECORD


def test_a_recorded_loss_is_what_torch_prints_now():
    """The record stands for a torch run: one program run again gives its loss exactly."""
    path = next(p for p in PROGRAMS if R.name(p) == "polynomial_autograd")
    assert R._run(path, "torch").loss == R.recorded(path)["loss"]


def test_as_torch_refuses_when_torch_is_imported():
    import staged

    with pytest.raises(RuntimeError, match="real torch is already imported"):
        staged.as_torch()


def _as_torch(tmp_path, name: str, text: str, real_torch: bool = False):
    """Run ``text`` as the script ``name`` with staged standing in for torch (or with torch
    itself)."""
    script = tmp_path / name
    script.write_text(text)
    run = [] if real_torch else ["-m", "staged.torch_compat"]
    return subprocess.run([sys.executable, *run, str(script)], capture_output=True, text=True)


def test_missing_torch_modules_name_what_staged_lacks(tmp_path):
    p = _as_torch(
        tmp_path,
        "uses_package.py",
        "import torch.nn\nassert torch.nn.Linear is __import__('staged').nn.Linear"
        "\nimport torch.package\n",
    )
    assert p.returncode == 1
    message = (
        "No module named 'torch.package': staged (standing in for torch) has no staged.package"
    )
    assert message in p.stderr


def test_dtypes_sizes_and_messages_say_torch_when_staged_stands_in_for_torch(tmp_path):
    text = (
        "import warnings\nimport torch\nimport torch.utils.checkpoint\n"
        "x = torch.ones(2, 3, dtype=torch.bfloat16)\n"
        "print(x.dtype, x.shape, str(x.dtype) == 'torch.bfloat16', f'{torch.float32}')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    torch.utils.checkpoint.checkpoint(torch.sin, torch.ones(2, requires_grad=True))\n"
        "print(str(w[0].message).split(':')[0])\n"
    )
    ours = _as_torch(tmp_path, "prints.py", text)
    theirs = _as_torch(tmp_path, "prints.py", text, real_torch=True)
    assert (
        ours.stdout
        == theirs.stdout
        == ("torch.bfloat16 torch.Size([2, 3]) True torch.float32\ntorch.utils.checkpoint\n")
    )


def test_classes_the_script_defines_pickle_as_under_python_script_py(tmp_path):
    """The script is ``__main__``: pickle finds its classes there, as ``torch.save(model)``
    of a model class of the script needs (and multiprocessing's arguments)."""
    script = tmp_path / "saves_model.py"
    script.write_text(
        "import pickle, sys\nimport torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2, 1)\n"
        "torch.save(Net(), 'net.pt')\n"
        "m = torch.load('net.pt', weights_only=False)\n"
        "assert type(m) is Net and sys.modules['__main__'].Net is Net\n"
        "assert pickle.loads(pickle.dumps(Net)) is Net\n"
        "print('ok')\n"
    )
    p = subprocess.run(
        [sys.executable, "-m", "staged.torch_compat", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert (p.returncode, p.stdout) == (0, "ok\n"), p.stderr


def test_a_program_of_several_files_runs_in_a_copy_of_its_directory(tmp_path):
    program = tmp_path / "two_files"
    program.mkdir()
    (program / "helper.py").write_text("def loss(w):\n    return (w * w).sum()\n")
    (program / "make_data.py").write_text("open('data.txt', 'w').write('3')\n")
    (program / "main.py").write_text(
        '# compat: before=make_data.py args="--scale 2"\n'
        "import sys\nimport torch\nfrom helper import loss\n"
        "w = torch.ones(3) * float(open('data.txt').read()) * float(sys.argv[2])\n"
        "print('loss', loss(w).item())\n"
    )
    (tmp_path / "single.py").write_text("print('loss 1.5')\n")
    assert [R.name(p, tmp_path) for p in R.programs(tmp_path)] == ["single", "two_files"]
    run = R.run(program / "main.py", "eager", tmp_path)
    assert (run.loss, run.error) == (108.0, "")
    assert not (program / "data.txt").exists()  # written in the copy
    (program / "helper.py").write_text("# compat: step=loss\n")
    with pytest.raises(ValueError, match="one entry, the one file with a '# compat:' line"):
        R.programs(tmp_path)


_STALE = "README's programs table is stale: run `python -m tests.programs.runner --readme`"


def test_readme_table_lists_every_program():
    assert R.readme_table().startswith(R.HEADER + "\n"), _STALE
    assert list(R.readme_lines()) == [R.name(p) for p in PROGRAMS], _STALE


@pytest.mark.parametrize("path", PROGRAMS, ids=R.name)
def test_readme_line_is_the_runners(path):
    """Each program's line, from the runs its other tests made (the same xdist group)."""
    assert R.readme_lines()[R.name(path)] == R.line(path), _STALE
