"""The CPU that llvm-cpu code is generated for, and whether this one can run it.

Note [code for another CPU]: llvm-cpu modules are compiled for the host CPU
(``--iree-llvmcpu-target-cpu=host``): AVX-512 where the machine has it. IREE's runtime does
not check the features an executable uses, so a module compiled on an AVX-512 machine and
loaded on an AVX2 one ends the process with SIGILL at its first call. The compile cache is
keyed on the host's features (``compiler.host_cpu``); a saved step records the
instruction-set extensions its code may use (``required``), and ``deploy.load`` refuses,
naming them, a machine that lacks any. ``save(..., target_cpu="x86-64-v3")`` compiles for
one of the x86-64 levels instead, which every machine of that level runs.
"""

from __future__ import annotations

import functools

# /proc/cpuinfo's names for the extensions of each x86-64 level (each level includes the
# ones before it): what LLVM's x86-64-vN CPUs assume
_LEVELS = {
    "x86-64": ("cx8", "fpu", "fxsr", "mmx", "sse", "sse2"),
    "x86-64-v2": ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"),
    "x86-64-v3": ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
    "x86-64-v4": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
TARGETS = ("host", *_LEVELS)

# the flags of /proc/cpuinfo that name instruction-set extensions code may use (the rest
# describe the machine: caches, virtualisation, mitigations)
_ISA_PREFIXES = ("avx", "amx", "sse", "fma", "bmi", "sha", "aes", "vaes", "vpclmul", "pclmul")
_ISA_NAMES = {
    *(f for level in _LEVELS.values() for f in level),
    "adx", "clflushopt", "clwb", "gfni", "lzcnt", "movdiri", "movdir64b", "prefetchw",
    "rdrand", "rdseed", "serialize", "sse4a", "tbm", "xop", "xsavec", "xsaveopt", "xsaves",
}  # fmt: skip


@functools.cache
def cpuinfo() -> dict:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in fields.items()}


def isa_flags() -> frozenset | None:
    """This CPU's instruction-set extensions, as /proc/cpuinfo names them (None: unknown)."""
    flags = cpuinfo().get("flags")
    if flags is None:
        return None
    return frozenset(f for f in flags.split() if f in _ISA_NAMES or f.startswith(_ISA_PREFIXES))


def required(target: str) -> list | None:
    """The extensions code compiled for ``target`` (``host`` or an x86-64 level) may use;
    None where they are not known (a machine without /proc/cpuinfo)."""
    if target == "host":
        host = isa_flags()
        return None if host is None else sorted(host)
    names = list(_LEVELS)
    return sorted(f for level in names[: names.index(target) + 1] for f in _LEVELS[level])


def missing(needed) -> list:
    """Which of ``needed`` (``required``'s list) this CPU lacks; [] where it cannot tell."""
    have = isa_flags()
    if not needed or have is None:
        return []
    return sorted(set(needed) - have)


def check_target(target: str, backend: str) -> None:
    if backend != "llvm-cpu" and target != "host":
        raise ValueError(f"target_cpu is for the llvm-cpu backend, not {backend!r}")
    if target not in TARGETS:
        raise ValueError(
            f"target_cpu={target!r}: use 'host' (this machine's CPU, the default) or an "
            f"x86-64 level, {', '.join(repr(t) for t in TARGETS[1:])}"
        )
