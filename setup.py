"""Compiles the eager hot path with Cython (Note [native modules] in staged/_native.py).

Each module of ``staged._native.MODULES`` becomes an optional extension module beside its
``.py``: without a C compiler the build warns and staged runs as Python. The build writes
``staged/_native.json``, each module's stamp (first the hash of the source compiled),
which staged checks at import. ``make native`` rebuilds the modules edited since.
"""

import importlib.util
import json
import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

spec = importlib.util.spec_from_file_location("_native", os.path.join("staged", "_native.py"))
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)

C_DIR = os.path.join("build", "cython")  # generated C, each with a stamp of what made it
# Python's semantics: compiled functions keep their signatures and introspection (binding),
# no variable becomes a C type, by inference (``1 + 1j if c else 1`` would be a C complex
# in both branches) or by annotation (``q: float`` a C double, ``dim: int`` refusing NumPy's)
DIRECTIVES = {
    "language_level": 3,
    "binding": True,
    "infer_types": False,
    "annotation_typing": False,
}


def translated(module: str) -> tuple[str, str]:
    """``(C file, stamp)``: the module translated by Cython unless it already was, from the
    same source (the stamp's first word is its hash) with the same Cython and directives."""
    import Cython
    from Cython.Build import cythonize

    py = native.source_path(module, "staged")
    digest = native.source_hash(py)
    c = os.path.join(C_DIR, py[:-3] + ".c")
    stamp = f"{digest} Cython {Cython.__version__} {sorted(DIRECTIVES.items())}"
    if not (os.path.exists(c) and _read(c + ".stamp") == stamp):
        cythonize([py], build_dir=C_DIR, force=True, quiet=True, compiler_directives=DIRECTIVES)
        with open(c + ".stamp", "w") as f:
            f.write(stamp)
    return c, stamp


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class BuildNative(build_ext):
    """Builds on every core, skips in place what is built from the current source, and
    records each module's stamp."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        self.built = {}
        self.current = self._current() if self.inplace else {}
        in_source = self.inplace  # setuptools builds with inplace off, then copies
        super().run()
        manifest = json.dumps({"modules": dict(sorted(self.built.items()))}, indent=1)
        for root in [os.path.join(self.build_lib, "staged")] + ["staged"] * in_source:
            os.makedirs(root, exist_ok=True)
            with open(os.path.join(root, native.MANIFEST), "w") as f:
                f.write(manifest + "\n")

    def _current(self) -> set:
        """The modules built in place with the stamps they would be built with now."""
        built = native.read_manifest("staged")
        states = native.states("staged")
        return {
            e.name
            for e in self.extensions
            if states.get(e.name) == "compiled" and built[e.name] == e.stamp
        }

    def copy_file(self, src, dst, *args, **kwargs):
        """Into place by renaming: a process running the old module keeps its file."""
        tmp = dst + ".tmp"
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
        os.replace(tmp, dst)
        return dst, True

    def build_extension(self, ext):
        if ext.name not in self.current:
            super().build_extension(ext)  # an optional extension's failure raises past this
        if ext.name in native.MODULES:
            self.built[ext.name] = ext.stamp


def extensions() -> list[Extension]:
    exts = []
    for module in native.MODULES:
        c, stamp = translated(module)
        ext = Extension(module, [c], optional=True, extra_compile_args=["-O2", "-g0"])
        ext.stamp = stamp
        exts.append(ext)
    return exts + kernels()


def kernels() -> list[Extension]:
    """C++ kernels written for Cython (``.pyx``), each optional: without it staged runs the
    NumPy fallback beside it (``_torch_order``: torch's order of tied entries;
    ``_fma_kernel``: C's fma)."""
    from Cython.Build import cythonize

    folder = os.path.join("staged", "autodiff")
    exts = [
        Extension(
            f"staged.autodiff.{name}",
            [os.path.join(folder, f"{name}.pyx")],
            depends=[os.path.join(folder, f"{name}.hpp")],
            include_dirs=[folder],
            language="c++",
            optional=True,
        )
        for name in ("_torch_order", "_fma_kernel")
    ]
    return cythonize(exts, build_dir=C_DIR, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildNative})
