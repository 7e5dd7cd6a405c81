"""What ordinary torch scripts call around devices, dtypes, threads and whole-model
checkpoints, against torch 2.13 (a CPU build answers the same): ``staged.device``,
``Tensor.device`` / ``.to`` / ``.cpu`` / ``.cuda``, ``device=`` on the factories,
``staged.cuda`` / ``staged.accelerator`` / ``staged.backends``, ``Tensor.type`` and the
dtype shorthands, ``Module.to/double/float/half``, ``set_num_threads`` (NumPy's BLAS and
IREE's workers), and ``torch.save(model)`` checkpoints loaded with ``safe_globals``."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import staged
from staged import nn
from tests.checks import assert_close, assert_raises_like_torch, raises_like_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- staged.device ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [("cpu",), ("cpu:0",), ("cpu", 0), ("cuda",), ("cuda:1",), ("cuda", 0), ("meta",), ("mps",)],
)
def test_device_like_torch(args):
    ours, theirs = staged.device(*args), torch.device(*args)
    assert (ours.type, ours.index) == (theirs.type, theirs.index)
    assert str(ours) == str(theirs) and repr(ours) == repr(theirs)
    assert staged.device(ours) == ours and hash(staged.device(*args)) == hash(ours)
    assert pickle.loads(pickle.dumps(ours)) == ours


def test_device_equality_like_torch():
    for a, b in [("cpu", "cpu"), ("cpu", "cpu:0"), ("cuda", "cuda:0"), ("cuda:1", "cuda:1")]:
        assert (staged.device(a) == staged.device(b)) == (torch.device(a) == torch.device(b))
    assert (staged.device("cpu") == "cpu") is (torch.device("cpu") == "cpu") is False
    assert {staged.device("cpu"): 1}[staged.device("cpu")] == 1


@pytest.mark.parametrize("spec", ["foo", "CPU", " cpu", "cpu:x", "cuda:-1", "cpu:0:1", "cuda:01"])
def test_bad_device_strings_like_torch(spec):
    assert_raises_like_torch(lambda ns: ns.device(spec))


def test_device_index_errors_like_torch():
    assert_raises_like_torch(lambda ns: ns.device("cpu", -2))
    assert_raises_like_torch(lambda ns: ns.device("cpu:0", 0))
    assert_raises_like_torch(lambda ns: ns.device(0))  # the current accelerator: none here


# --- tensors on the CPU, the rest refused -----------------------------------------------------
FACTORIES = {
    "tensor": lambda ns, d: ns.tensor([1.0, 2.0], device=d),
    "zeros": lambda ns, d: ns.zeros(2, 3, device=d),
    "ones": lambda ns, d: ns.ones((2,), device=d),
    "empty": lambda ns, d: ns.empty(2, device=d).fill_(1.0),
    "full": lambda ns, d: ns.full((2,), 7.0, device=d),
    "arange": lambda ns, d: ns.arange(5, device=d),
    "linspace": lambda ns, d: ns.linspace(0, 1, 5, device=d),
    "eye": lambda ns, d: ns.eye(3, device=d),
    "rand": lambda ns, d: ns.rand(2, 2, device=d),
    "randn": lambda ns, d: ns.randn(2, 2, device=d),
    "randint": lambda ns, d: ns.randint(0, 5, (3,), device=d),
    "randperm": lambda ns, d: ns.randperm(6, device=d),
    "zeros_like": lambda ns, d: ns.zeros_like(ns.ones(2), device=d),
    "ones_like": lambda ns, d: ns.ones_like(ns.ones(2), device=d),
    "full_like": lambda ns, d: ns.full_like(ns.ones(2), 3.0, device=d),
    "empty_like": lambda ns, d: ns.empty_like(ns.ones(2), device=d).zero_(),
    "rand_like": lambda ns, d: ns.rand_like(ns.ones(2), device=d),
    "randn_like": lambda ns, d: ns.randn_like(ns.ones(2), device=d),
    "randint_like": lambda ns, d: ns.randint_like(ns.ones(2), 4, device=d),
    "normal": lambda ns, d: ns.normal(0.0, 1.0, (2,), device=d),
    "new_zeros": lambda ns, d: ns.ones(2).new_zeros(3, device=d),
    "new_ones": lambda ns, d: ns.ones(2).new_ones(3, device=d),
    "new_full": lambda ns, d: ns.ones(2).new_full((3,), 2.0, device=d),
    "new_tensor": lambda ns, d: ns.ones(2).new_tensor([1.0], device=d),
    "new_empty": lambda ns, d: ns.ones(2).new_empty(3, device=d).zero_(),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_take_device(name):
    make = FACTORIES[name]
    staged.manual_seed(0)
    torch.manual_seed(0)
    for d in ("cpu", "cpu:0", None):
        for ns in (staged, torch):
            dev = None if d is None else ns.device(d)
            out = make(ns, dev)
            assert out.device == ns.device("cpu")
        assert_close(
            make(staged, d), make(torch, d), rtol=1e-6, atol=1e-6
        ) if "rand" not in name and name != "normal" else None
    with pytest.raises(AssertionError, match="not compiled with CUDA") as err:
        make(staged, "cuda")
    assert "backend='cuda'" in str(err.value)  # says what to use instead
    with pytest.raises(RuntimeError, match="no 'mps' device"):
        make(staged, staged.device("mps"))


def test_tensor_device_and_moves():
    x = staged.ones(2, requires_grad=True)
    assert x.device == staged.device("cpu") and str(x.device) == "cpu"
    assert not x.is_cuda and x.is_cpu and x.get_device() == torch.zeros(1).get_device()
    assert x.to("cpu") is x and x.cpu() is x and x.to(staged.device("cpu:0")) is x
    assert x.to("cpu", copy=True) is not x
    y = x.to("cpu", staged.float64)
    assert y.dtype is staged.float64 and y.grad_fn is not None  # differentiable cast
    assert x.to(device="cpu", dtype=staged.float16).dtype is staged.float16
    assert x.to(staged.zeros(1, dtype=staged.int64)).dtype is staged.int64
    assert x.to(staged.float64, False, True).dtype is staged.float64  # non_blocking, copy
    assert x.to("cpu", non_blocking=True) is x


NO_CUDA = "Torch not compiled with CUDA enabled"


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda ns: ns.zeros(2).cuda(), NO_CUDA),
        (lambda ns: ns.zeros(2).to("cuda"), NO_CUDA),
        (lambda ns: ns.zeros(2).to("cuda:0", ns.float64), NO_CUDA),
        (lambda ns: ns.zeros(2).to(device="cuda"), NO_CUDA),
        (lambda ns: ns.nn.Linear(2, 2).cuda(), NO_CUDA),
        (lambda ns: ns.zeros(2).cuda(0), "Cannot access accelerator device when none is available"),
        (lambda ns: ns.zeros(2).cuda("cpu"), "Invalid device, must be cuda device"),
    ],
)
def test_cuda_moves_fail_as_on_a_cpu_build(call, words):
    raises_like_torch(call, words)


def test_cuda_accelerator_backends_answer_as_a_cpu_build():
    assert staged.cuda.is_available() is torch.cuda.is_available() is False
    assert staged.cuda.device_count() == torch.cuda.device_count() == 0
    assert staged.cuda.manual_seed(0) is None and staged.cuda.manual_seed_all(0) is None
    staged.cuda.empty_cache()
    assert staged.accelerator.is_available() is torch.accelerator.is_available() is False
    assert staged.accelerator.current_accelerator() is torch.accelerator.current_accelerator()
    assert staged.backends.mps.is_available() is torch.backends.mps.is_available() is False
    staged.backends.cudnn.benchmark = True  # scripts set it; nothing changes
    staged.backends.cuda.matmul.allow_tf32 = True
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        staged.cuda.current_device()
    assert staged.get_default_device() == staged.device("cpu")
    device = staged.device("cuda" if staged.cuda.is_available() else "cpu")  # the idiom
    assert staged.zeros(1, device=device).device == device


def test_cuda_device_modules_import_under_the_torch_alias():
    code = textwrap.dedent("""
        import staged
        staged.as_torch()
        import torch, torch.cuda, torch.backends.cudnn as cudnn, torch.nn.modules.linear
        import torch.nn.modules.batchnorm, torch.nn.modules.module, torch.nn.modules.transformer
        cudnn.benchmark = True
        assert torch.nn.modules.module.Module is torch.nn.Module
        print(torch.cuda.is_available(), torch.device("cpu"))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "cpu"]


# --- dtypes: Tensor.type and the shorthands ---------------------------------------------------
DTYPES = [
    "float32",
    "float64",
    "float16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
]


@pytest.mark.parametrize("name", DTYPES)
def test_type_names_like_torch(name):
    ours, theirs = (
        staged.zeros(2, dtype=getattr(staged, name)),
        torch.zeros(2, dtype=getattr(torch, name)),
    )
    assert ours.type() == theirs.type()
    assert staged.ones(2).type(ours.type()).dtype is ours.dtype
    assert staged.ones(2).type(getattr(staged, name)).dtype is ours.dtype


def test_type_casts_and_errors():
    x = staged.ones(2, requires_grad=True)
    assert x.type(staged.float32) is x
    assert x.type("torch.DoubleTensor").dtype is staged.float64
    raises_like_torch(lambda ns: ns.ones(2).type("torch.Foo"), "invalid type: 'torch.Foo'")
    with pytest.raises(AssertionError, match="CUDA"):
        x.type("torch.cuda.FloatTensor")
    for m in (
        "half",
        "double",
        "float",
        "long",
        "int",
        "bool",
        "short",
        "char",
        "byte",
        "bfloat16",
        "cfloat",
        "cdouble",
    ):
        ours, theirs = getattr(staged.ones(2), m)(), getattr(torch.ones(2), m)()
        assert ours.type() == theirs.type(), m
    assert staged.half is staged.float16


def test_module_dtype_and_device_moves():
    def make(ns):
        ns.manual_seed(0)
        return ns.nn.Sequential(ns.nn.Linear(3, 4), ns.nn.BatchNorm1d(4))

    for cast in ("double", "half", "float"):
        ours, theirs = getattr(make(staged), cast)(), getattr(make(torch), cast)()
        for (n, p), (_, q) in zip(ours.state_dict().items(), theirs.state_dict().items()):
            assert p.type() == q.type(), (cast, n)
    m = make(staged)
    w = m[0].weight
    m[0].weight.grad = staged.ones(4, 3)
    assert m.to("cpu", staged.float64) is m and m[0].weight is w  # in place, same Parameter
    assert w.dtype is staged.float64 and w.grad.dtype is staged.float64
    assert m[1].num_batches_tracked.dtype is staged.int64  # integer buffers stay
    assert m.to(staged.zeros(1, dtype=staged.float32)) is m and w.dtype is staged.float32
    assert m.to(device="cpu") is m and m.cpu() is m
    assert_raises_like_torch(lambda ns: make(ns).to(ns.int64))
    with pytest.raises(AssertionError, match="CUDA"):
        m.cuda()
    with pytest.raises(AssertionError, match="CUDA"):
        m.to("cuda")


# --- threads ----------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:set_num_threads.*compiled CPU steps keep")
def test_set_num_threads_controls_numpy_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = staged.get_num_threads()
    try:
        staged.set_num_threads(1)
        assert staged.get_num_threads() == 1
        blas = [
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        ]
        assert blas and set(blas) == {1}
        staged.set_num_threads(2)
        assert staged.get_num_threads() == 2
    finally:
        staged.set_num_threads(before)
    raises_like_torch(
        lambda ns: ns.set_num_threads(0), "set_num_threads expects a positive integer"
    )
    raises_like_torch(lambda ns: ns.set_num_threads(1.5), "expects an int, but got float")


def test_set_num_threads_and_omp_num_threads_size_iree_workers():
    """In fresh processes: the local-task driver made after set_num_threads(1), or with
    OMP_NUM_THREADS=1 (as torch's and NumPy's pools follow it), starts one worker; without
    either it starts one per core; set_num_threads wins over OMP_NUM_THREADS. A later call
    warns that compiled steps keep their pool."""
    code = textwrap.dedent("""
        import os, sys, time, warnings
        import staged
        if sys.argv[1] != "-":
            staged.set_num_threads(int(sys.argv[1]))
        step = staged.compile(lambda x: (x * 2).sum())
        step(staged.ones(4))
        def workers():  # IREE starts its workers as it needs them: count until it has
            comms = [open(f"/proc/self/task/{t}/comm").read() for t in os.listdir("/proc/self/task")]
            return sum(c.startswith("iree-worker") for c in comms)
        seen = 0
        for _ in range(20):
            step(staged.ones(4)).item()
            seen = max(seen, workers())
            time.sleep(0.05)
        print(seen)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            staged.set_num_threads(1)
        print(len(w), staged.get_num_threads())
    """)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["IREE_PY_RUNTIME_FLAGS"] = ""
    runs = {"default": ("-", {}), "set 1": ("1", {}), "omp 1": ("-", {"OMP_NUM_THREADS": "1"})}
    runs["set 2, omp 1"] = ("2", {"OMP_NUM_THREADS": "1"})
    workers = {}
    for name, (arg, extra) in runs.items():
        o = subprocess.run(
            [sys.executable, "-c", code, arg],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**env, **extra},
            timeout=300,
            check=False,
        )
        assert o.returncode == 0, o.stderr
        count, warned = o.stdout.split("\n", 1)
        workers[name] = int(count)
        assert warned.split() == ["1", "1"], name
    assert workers["set 1"] == workers["omp 1"] == 1, workers
    if (os.cpu_count() or 1) > 1:
        assert workers["default"] > 1 and workers["set 2, omp 1"] == 2, workers


# --- whole-model checkpoints: torch's module paths and safe_globals ---------------------------
def _torch_model_file():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.ReLU(),
        torch.nn.LayerNorm(4),
        torch.nn.BatchNorm1d(4),
        torch.nn.Flatten(),
    )
    model.eval()
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return model, buf


SAFE = [nn.Sequential, nn.Linear, nn.ReLU, nn.LayerNorm, nn.BatchNorm1d, nn.Flatten]


def test_pickled_torch_model_needs_safe_globals():
    _, buf = _torch_model_file()
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.container.Sequential"):
        staged.load(buf)
    assert staged.serialization.get_safe_globals() == []


@pytest.mark.parametrize("how", ["context", "add", "weights_only_false"])
def test_pickled_torch_model_loads(how):
    theirs, buf = _torch_model_file()
    if how == "context":
        with staged.serialization.safe_globals(SAFE):
            ours = staged.load(buf)
        assert staged.serialization.get_safe_globals() == []
    elif how == "add":
        try:
            staged.serialization.add_safe_globals(SAFE)
            assert set(staged.serialization.get_safe_globals()) == set(SAFE)
            ours = staged.load(buf)
        finally:
            staged.serialization.clear_safe_globals()
    else:
        ours = staged.load(buf, weights_only=False)
    assert type(ours) is nn.Sequential and type(ours[3]) is nn.BatchNorm1d
    assert not ours.training and "bias=True" in repr(ours[2])
    x = np.random.RandomState(0).standard_normal((5, 3)).astype(np.float32)
    assert_close(ours(staged.tensor(x)), theirs(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    ours.train()
    out = ours(staged.tensor(x)).sum()  # trains: parameters are Parameters, hooks dicts usable
    out.backward()
    assert ours[0].weight.grad is not None


def test_safe_globals_by_name_and_staged_checkpoints(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    path = tmp_path / "m.pt"
    staged.save(model, path)
    with pytest.raises(pickle.UnpicklingError, match="staged.nn.modules.container.Sequential"):
        staged.load(path)
    names = [
        (nn.Sequential, "staged.nn.modules.container.Sequential"),
        (nn.Linear, "staged.nn.modules.linear.Linear"),
        (nn.Tanh, "staged.nn.modules.activation.Tanh"),
    ]
    with staged.serialization.safe_globals(names):
        back = staged.load(path)
    x = staged.randn(3, 2)
    assert_close(back(x), model(x))


def test_device_objects_in_checkpoints():
    buf = io.BytesIO()
    staged.save({"device": staged.device("cpu"), "w": staged.ones(2)}, buf)
    buf.seek(0)
    theirs = torch.load(buf, weights_only=True)
    assert theirs["device"] == torch.device("cpu")
    buf = io.BytesIO()
    torch.save({"device": torch.device("cuda", 1)}, buf)
    buf.seek(0)
    assert staged.load(buf)["device"] == staged.device("cuda:1")


def test_map_location_devices():
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    for where in ("cpu", staged.device("cpu"), {"cuda:0": "cpu"}):
        buf.seek(0)
        assert_close(staged.load(buf, map_location=where)["w"], staged.ones(2))
