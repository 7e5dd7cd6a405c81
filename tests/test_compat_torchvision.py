"""The torch names torchvision 0.28 reaches when imported whole (its detection models, its
operators' registrations), beyond its operators (``test_vision_ops.py``): dispatch keys
and the autocast kernels of custom operators, ``torch.__config__``, the ONNX symbolic
helpers it imports, ``torch.ao.quantization``'s stubs, and binary cross-entropy of mixed
dtypes (its RPN's float32 labels of float64 logits), each against torch 2.13."""

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import _C
from staged.library import Library


def test_an_autocast_cpu_kernel_runs_under_autocast_with_autocast_off_inside():
    lib = Library("test_autocast_ns", "DEF")
    lib.define("scaled(Tensor x) -> Tensor")
    seen = []

    def cpu(x):
        seen.append(("cpu", x.dtype, staged.is_autocast_enabled("cpu")))
        return x * 2

    keys = _C.DispatchKeySet(_C.DispatchKey.AutocastCPU) | _C.DispatchKeySet(
        _C.DispatchKey.AutocastCUDA
    )
    assert keys.has(_C.DispatchKey.AutocastCUDA) and not keys.has(_C.DispatchKey.CPU)

    def autocast_kernel(x):
        with _C._ExcludeDispatchKeyGuard(keys):
            seen.append(("autocast", staged.is_autocast_enabled("cpu")))
            return staged.ops.test_autocast_ns.scaled(x.float()).to(x.dtype)

    lib.impl("scaled", cpu, "CPU")
    lib.impl("scaled", autocast_kernel, "AutocastCPU")
    x = staged.ones(2, dtype=staged.bfloat16)
    assert staged.ops.test_autocast_ns.scaled(x).dtype == staged.bfloat16
    assert seen == [("cpu", staged.bfloat16, False)]  # no autocast: the CPU kernel alone
    seen.clear()
    with staged.autocast("cpu"):
        assert staged.ops.test_autocast_ns.scaled(x).tolist() == [2.0, 2.0]
        assert staged.is_autocast_enabled("cpu")  # restored after the guard
    assert seen == [("autocast", False), ("cpu", staged.float32, False)]


@pytest.mark.parametrize(
    "x_dtype,t_dtype,pos_weight,weight",
    [
        ("float64", "float32", None, None),
        ("float32", "float64", None, None),
        ("float64", "float32", "float32", None),
        ("float64", "float32", None, "float64"),
        ("float32", "float32", "float64", None),
    ],
)
def test_bce_with_logits_of_mixed_dtypes_has_torchs_dtype_and_values(
    x_dtype, t_dtype, pos_weight, weight
):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((4, 3)).astype(x_dtype), rng.random((4, 3)).astype(t_dtype)
    extra = {}
    if pos_weight:
        extra["pos_weight"] = (rng.random(3) * 2).astype(pos_weight)
    if weight:
        extra["weight"] = rng.random((4, 3)).astype(weight)
    ours = F.binary_cross_entropy_with_logits(
        staged.tensor(x),
        staged.tensor(t),
        reduction="none",
        **{k: staged.tensor(v) for k, v in extra.items()},
    )
    theirs = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(x),
        torch.tensor(t),
        reduction="none",
        **{k: torch.tensor(v) for k, v in extra.items()},
    )
    assert ours.dtype.name == str(theirs.dtype).split(".")[1]
    # torch's float32 log-sigmoid may part by an ulp from NumPy's (the float32 inputs)
    np.testing.assert_allclose(
        ours.numpy(), theirs.numpy(), rtol=3e-7 if "float32" == x_dtype else 0
    )


def test_config_names_torchs_build_switches_with_stageds_values():
    text = staged.__config__.show()
    assert "USE_MKL=OFF" in text and "USE_CUDA=0" in text and "TORCH_VERSION=2.13.0" in text
    assert "USE_MKL=ON" in torch.__config__.show()  # what PyG reads to pick its sparse path
    assert "threads" in staged.__config__.parallel_info()


def test_onnx_symbolic_helpers_and_custom_symbolics():
    from staged.onnx import register_custom_op_symbolic, symbolic_helper, symbolic_opset11

    fn = lambda g, x: x  # noqa: E731
    assert symbolic_helper.parse_args("v", "f")(fn) is fn
    with pytest.raises(AttributeError, match="runs no TorchScript symbolic functions"):
        symbolic_opset11.unsqueeze  # noqa: B018
    register_custom_op_symbolic("torchvision::nms", fn, 11)
    with pytest.raises(ValueError, match="domain::name"):
        register_custom_op_symbolic("nms", fn, 11)


def test_quant_stubs_dynamo_jit_and_c_helpers():
    from staged.ao.quantization import DeQuantStub, QuantStub

    x = staged.ones(2)
    assert QuantStub()(x) is x and DeQuantStub(qconfig="q").qconfig == "q"
    assert isinstance(QuantStub(), staged.nn.Module)
    assert staged._dynamo.utils.is_compile_supported("cpu")
    assert not staged._dynamo.utils.is_compile_supported("cuda")
    f = lambda a: a + 1  # noqa: E731
    assert staged.jit._script_if_tracing(f) is f
    assert _C._get_tracing_state() is None is torch._C._get_tracing_state()
    assert _C._disabled_torch_function_impl(staged.add, (), (x, 1)).tolist() == [2.0, 2.0]
