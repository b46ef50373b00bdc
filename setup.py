"""Build hook: the pure packages of trizk compiled with mypyc, when a wheel is built.

pyproject.toml declares the package; this file only adds ``ext_modules``. When a wheel is
built (``pip install .``, ``pip wheel .``) and mypyc and a C compiler are at hand, every module
of the packages in ``PURE_PACKAGES`` (the folders that never touch a socket, a file or a
clock), less the few in ``NOT_COMPILED`` with their reasons, is compiled to a C extension that
sits beside its ``.py`` file (Python imports the extension first); ``compiled_modules()``
lists them. Anything that goes wrong falls back to the pure-Python package with a warning in
the build log: the ``.py`` files are the same program, only slower.

Not compiled: editable installs (``pip install -e .``: a developer's edits must take effect
without a rebuild), and any build with ``TRIZK_PURE_PYTHON=1`` in its environment.

mypyc needs the modules under their import names, so they are copied into
``build/mypyc-src/trizk/...`` following ``[tool.setuptools.package-dir]``.

What compiling asks of a pure module (docs/architecture.md has the whole list): annotations
hold at run time (a value of another type is a ``TypeError``); a class extends no class mypy
sees as ``Any`` (mypyc would drop that base); a class that Python code subclasses, or that
must be a Python class (a ``list`` subclass, the Jute records), says so with
``mypy_extensions.mypyc_attr`` (a run-time dependency for that reason); a generator
expression with two ``for`` is compiled into a list made at once, so a lazy one is a
generator function; functions and methods of compiled classes cannot be patched.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
STAGE = Path("build") / "mypyc-src"

#: The pure packages (docs/architecture.md): what they hold takes inputs and returns outputs,
#: never a socket, a file or a clock, and every module directly in one of them is compiled. A
#: package's ``__init__`` is not: it holds a docstring and re-exports, nothing that runs per
#: request. Sub-packages are listed on their own (``trizk.quorum`` is its ``verifier``).
PURE_PACKAGES = (
    "trizk.jute",
    "trizk.storage.tree",
    "trizk.storage.formats",
    "trizk.quorum",
    "trizk.quorum.election",
    "trizk.quorum.zab",
    "trizk.server.auth",
    "trizk.server.common",
    "trizk.server.frontend",
    "trizk.server.writes",
    "trizk.server.roles",
)

#: Modules of the pure packages that stay interpreted, each with the reason.
NOT_COMPILED: dict[str, str] = {
    "trizk.jute.reference": (
        "the construct reference codec (the tests' cross-check of the generated codecs, never"
        " on a request's path): its classes extend construct's, and construct has no type"
        " information, so mypy sees their bases as Any and mypyc would build the classes"
        " without them"
    ),
}

#: setup.py commands that build the wheel's extensions (``egg_info``, ``editable_wheel``,
#: ``dist_info`` and ``sdist`` do not).
_BUILD_COMMANDS = {"bdist_wheel", "build", "build_ext", "install"}


def _warn(msg: str) -> None:
    print(f"trizk setup.py: {msg}", file=sys.stderr)


def _package_dirs() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        cfg = tomllib.load(f)
    dirs: dict[str, str] = cfg["tool"]["setuptools"]["package-dir"]
    return dirs


def _source_dir(package: str, dirs: dict[str, str]) -> Path:
    """The folder holding ``package``, by the longest prefix ``package-dir`` maps."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        mapped = dirs.get(".".join(parts[:n]))
        if mapped is not None:
            return ROOT.joinpath(mapped, *parts[n:])
    raise ValueError(f"{package} is under no [tool.setuptools.package-dir] entry")


def compiled_modules() -> list[str]:
    """The import names of the modules compiled: every module directly in a package of
    ``PURE_PACKAGES`` but its ``__init__``, less ``NOT_COMPILED``."""
    dirs = _package_dirs()
    modules = [
        f"{package}.{py.stem}"
        for package in PURE_PACKAGES
        for py in sorted(_source_dir(package, dirs).glob("*.py"))
        if py.stem != "__init__"
    ]
    unknown = set(NOT_COMPILED) - set(modules)
    if unknown:
        raise ValueError(f"NOT_COMPILED names modules of no pure package: {sorted(unknown)}")
    return [m for m in modules if m not in NOT_COMPILED]


def _stage(modules: list[str]) -> list[str]:
    """Copy every module of the package to ``STAGE`` under its import path; return the
    staged paths of ``modules``."""
    if STAGE.exists():
        shutil.rmtree(STAGE)
    for package, src in _package_dirs().items():
        dest = STAGE.joinpath(*package.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        for py in (ROOT / src).rglob("*.py"):
            rel = py.relative_to(ROOT / src)
            (dest / rel.parent).mkdir(parents=True, exist_ok=True)
            shutil.copy2(py, dest / rel)
    (STAGE / "mypy.ini").write_text(
        "[mypy]\nignore_missing_imports = True\ncheck_untyped_defs = True\n"
    )
    return [str(STAGE.joinpath(*m.split(".")).with_suffix(".py")) for m in modules]


def _drop_stale_extensions() -> None:
    """Remove compiled modules an earlier build left in ``build/lib*``: setuptools copies the
    ``.py`` files there afresh but would package an old extension beside them, and Python
    imports the extension first."""
    for lib in Path("build").glob("lib*"):
        for ext in [
            *lib.glob("trizk__mypyc*"),
            *lib.glob("trizk/**/*.so"),
            *lib.glob("trizk/**/*.pyd"),
        ]:
            ext.unlink()


def _mypyc_extensions() -> list[Any]:
    if not _BUILD_COMMANDS.intersection(sys.argv[1:]):
        return []
    _drop_stale_extensions()
    if os.environ.get("TRIZK_PURE_PYTHON") == "1":
        _warn("TRIZK_PURE_PYTHON=1: building the pure-Python package")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not installed: building the pure-Python package")
        return []
    try:
        modules = compiled_modules()
        paths = _stage(modules)
        here = os.getcwd()
        os.chdir(STAGE)
        try:
            exts = mypycify(
                [os.path.relpath(p, STAGE) for p in paths],
                opt_level="3",
                debug_level="0",
                group_name="trizk",
                target_dir=os.path.join(here, "build", "mypyc-c"),
            )
        finally:
            os.chdir(here)
    except (Exception, SystemExit) as e:  # mypy exits on a type error
        _warn(f"mypyc could not translate the modules ({e!r}): building the pure-Python package")
        return []
    return list(exts)  # (their sources and includes are absolute: target_dir is)


class OptionalBuildExt(build_ext):
    """build_ext that leaves the pure-Python package when the C build fails."""

    def run(self) -> None:
        if getattr(self, "editable_mode", False) or self.inplace:
            self.extensions = []
            return
        try:
            super().run()
        except Exception as e:  # no compiler, no Python headers, ...
            _warn(f"compiling failed ({e!r}): building the pure-Python package")
            # A module's extension without the shared library would not import: none stays.
            for out in self.get_outputs():
                if os.path.exists(out):
                    os.remove(out)
            self.extensions = []


setup(ext_modules=_mypyc_extensions(), cmdclass={"build_ext": OptionalBuildExt})
