"""The differential fuzzer: random programs (``program.py``) checked eagerly against torch
2.13, in forward mode, compiled (llvm-cpu, vulkan-spirv) and as ONNX against eager.

CI runs a fixed set of examples (hypothesis derandomized, about a minute on 2 cores);
``STAGED_FUZZ_EXAMPLES=N`` runs N random examples per test instead (failing examples are
shrunk and printed as a program to paste into ``test_regressions.py``)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.backends import needs_vulkan
from tests.fuzz import differential as D
from tests.fuzz.program import programs

EXAMPLES = int(os.environ.get("STAGED_FUZZ_EXAMPLES", "0"))


def budget(ci_examples, shrink=True):
    """``ci_examples`` fixed examples in CI; without ``shrink`` a failure is reported as
    drawn (a compiled batch costs a compile per shrinking step; its error names the
    failing program of the batch)."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(
        max_examples=EXAMPLES or ci_examples,
        derandomize=not EXAMPLES,
        deadline=None,
        database=None,
        print_blob=True,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )


@budget(60)
@given(programs())
def test_eager_matches_torch(prog):
    D.check_eager(prog)


@budget(20)
@given(programs("float64", max_steps=4))
def test_second_order_matches_torch(prog):
    D.check_eager(prog, second_order=True)


@budget(40)
@given(programs(write_views=False))
def test_forward_mode_matches_torch(prog):
    D.check_forward_mode(prog)


# compiled and ONNX: one module per example, holding a batch of programs (in-place writes
# and writes through views included)
BATCH = 12


# no subnormal float inputs: IREE's CPU runtime flushes them to zero in every dispatch
# (MXCSR FTZ|DAZ; README "Backends"), a known difference pinned by
# test_regressions.py::test_llvm_cpu_flushes_subnormals_to_zero
@budget(3, shrink=False)
@given(st.lists(programs(subnormals=False), min_size=BATCH, max_size=BATCH))
def test_llvm_cpu_matches_eager(progs):
    D.check_compiled(progs, "llvm-cpu")


@needs_vulkan
@budget(2, shrink=False)
@given(
    st.lists(programs("float32", float64=False, nonfinite=False), min_size=BATCH, max_size=BATCH)
)
def test_vulkan_spirv_matches_eager(progs):
    D.check_compiled(progs, "vulkan-spirv")


@budget(3, shrink=False)
@given(st.lists(programs(complex_values=False), min_size=BATCH, max_size=BATCH))
def test_onnx_matches_eager(progs):
    D.check_onnx(progs)
