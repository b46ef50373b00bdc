"""README.md, docs/*.md and compat/README.md say only what is true of this tree.

Checked, page by page:

* every path of the tree a page names (``server/frontend/core.py``, ``storage/tree/``,
  ``server/writes/{sequencer, prep}``) exists, and every module ``trizk.a.b`` it names imports
  (a trailing ``.Name`` must be an attribute of the module);
* every command: ``python -m M`` names a runnable module (a package with ``__main__`` or a
  module with a ``__main__`` guard) whose source knows each ``--option`` the command passes;
  ``trizk-*`` is a console script of ``pyproject.toml`` that knows its options; the paths given
  to pytest exist;
* every relative link points at a file of the repository, and an ``#anchor`` at a heading of
  that page (GitHub's slugs); README.md links only inside the repository and to every page of
  docs/;
* README.md stays the front door (at most 250 lines), its install-and-start command for a fresh
  machine is there, and the test command after ``<!-- test-command -->`` is the line
  ``.ci/run`` extracts and runs; its ensemble zoo.cfg is read as a member's (and an observer's);
* every code block of docs/testing.md is a file of docs/examples/ (marked
  ``<!-- example: PATH -->`` just before it) shown verbatim, and every such file is shown;
  ``tests/testing/test_examples.py`` runs them.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from trizk.server.config import zoocfg

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: compat/README.md is the compatibility suite's page, linked from README.md
PAGES = [README, *DOCS, ROOT / "compat" / "README.md"]
EXAMPLES = ROOT / "docs" / "examples"

FRESH_MACHINE = "python -m pip install . && trizk-server"
TEST_COMMAND = (
    "sh compat/install-zookeeper.sh && python -m pip install -q '.[test]'"
    " && python -m pytest -q -n 2 --dist loadgroup"
)

FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")
TREE_PATH = re.compile(
    r"(?<![\w/.-])((?:jute|storage|quorum|server|compat|trizk_pkg|tests|docs|\.ci)/"
    r"(?:[\w.*-]+/?|\{[^}]*\}[\w.]*/?)*)"
)
MODULE = re.compile(r"(?<![\w./-])trizk(?:\.\w+)+")
PYTHON_M = re.compile(r"python -m ([\w.]+)((?: +[^\s&;|#`]+)*)")
SCRIPT = re.compile(r"(?<![\w/.-])(trizk-[a-z][a-z-]*)((?: +[^\s&;|#`]+)*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")


def rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def fenced(text: str) -> list[tuple[str, str]]:
    return FENCE.findall(text)


def prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return FENCE.sub("", text)


def snippets(text: str) -> list[str]:
    """Inline code spans (whitespace collapsed) and the lines of the fenced blocks."""
    spans = [" ".join(s.split()) for s in SPAN.findall(prose(text))]
    lines = [line for _, body in fenced(text) for line in body.splitlines()]
    return spans + lines


def expand(path: str) -> list[str]:
    """``a/{b, c}.py`` -> ``a/b.py``, ``a/c.py``."""
    m = re.search(r"\{([^}]*)\}", path)
    if m is None:
        return [path]
    out: list[str] = []
    for part in m.group(1).split(","):
        out += expand(path[: m.start()] + part.strip() + path[m.end() :])
    return out


def tree_path_exists(path: str) -> bool:
    path = path.rstrip(".")
    if "*" in path:
        return any(ROOT.glob(path))
    target = ROOT / path
    return target.exists() or (not path.endswith("/") and target.with_suffix(".py").exists())


def headings(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    found = set()
    for title in re.findall(r"^#+ +(.+?)\s*$", prose(page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_named_paths_exist(page: Path) -> None:
    text = page.read_text()
    named = {m for s in snippets(text) for m in TREE_PATH.findall(s)}
    missing = sorted(p for n in named for p in expand(n) if not tree_path_exists(p))
    assert not missing, f"{rel(page)} names paths that do not exist: {missing}"


def resolves(name: str) -> bool:
    """``trizk.a.b`` is a module, or ``trizk.a.B`` an attribute of module ``trizk.a``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_named_modules_exist(page: Path) -> None:
    # trizk's own zoo.cfg keys (trizk.zookeeperVersion) look like module names
    named = set(MODULE.findall(page.read_text())) - set(zoocfg.KEYS)
    missing = sorted(name for name in named if not resolves(name))
    assert not missing, f"{rel(page)} names modules that do not exist: {missing}"


def main_source(module: str) -> str | None:
    """The source that runs for ``python -m module`` (None: not runnable that way)."""
    if module.startswith("tests."):
        path = ROOT / (module.replace(".", "/") + ".py")
        source = path.read_text() if path.exists() else ""
        return source if '__name__ == "__main__"' in source else None
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    if spec.submodule_search_locations is not None:  # a package: its __main__
        main = importlib.util.find_spec(module + ".__main__")
        if main is None or main.origin is None:
            return None
        source = Path(main.origin).read_text()
        # a __main__ that only hands over (``from trizk.compat.bench.standalone import main``):
        # that module too
        for target in re.findall(r"from ([\w.]+) import main", source):
            handed = importlib.util.find_spec(target)
            if handed is not None and handed.origin is not None:
                source += Path(handed.origin).read_text()
        return source
    source = Path(spec.origin).read_text()
    return source if '__name__ == "__main__"' in source else None


#: pytest options followed by a value
PYTEST_VALUED = frozenset({"-m", "-k", "-n", "-p", "--dist", "--durations", "--maxfail"})


def scripts() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return {name: target.split(":")[0] for name, target in project["scripts"].items()}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_commands_are_real(page: Path) -> None:
    problems = []
    known_scripts = scripts()
    for snippet in snippets(page.read_text()):
        for module, args in PYTHON_M.findall(snippet):
            if module == "pip":
                continue
            if module == "pytest":
                words = shlex.split(args)
                for i, arg in enumerate(words):
                    # the value of an option that takes one (-m EXPR, -k EXPR, -n N) is no path
                    if arg.startswith("-") or (i and words[i - 1] in PYTEST_VALUED):
                        continue
                    if not (ROOT / arg.split("::")[0]).exists():
                        problems.append(f"pytest path {arg!r} does not exist")
                continue
            source = main_source(module)
            if source is None:
                problems.append(f"python -m {module}: no such runnable module")
                continue
            for option in OPTION.findall(args):
                if f'"{option}"' not in source:
                    problems.append(f"python -m {module}: unknown option {option}")
        for script, args in SCRIPT.findall(snippet):
            if script not in known_scripts:
                problems.append(f"{script}: not a console script of pyproject.toml")
                continue
            spec = importlib.util.find_spec(known_scripts[script])
            assert spec is not None and spec.origin is not None
            source = Path(spec.origin).read_text()
            for option in OPTION.findall(args):
                if f'"{option}"' not in source:
                    problems.append(f"{script}: unknown option {option}")
    assert not problems, f"{rel(page)}: {problems}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_links_resolve(page: Path) -> None:
    problems = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            if page == README:
                problems.append(f"{target}: README links only to files of the repository")
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(ROOT) or not dest.exists():
            problems.append(f"{target}: no such file in the repository")
        elif anchor and anchor not in headings(dest):
            problems.append(f"{target}: no heading #{anchor} in {rel(dest)}")
    assert not problems, f"{rel(page)}: {problems}"


def test_readme_is_the_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(text)}
    assert set(DOCS) <= linked, "README links to every page of docs/"
    assert ("sh", FRESH_MACHINE + "\n") in fenced(text)


def test_test_command_is_what_ci_runs() -> None:
    text = README.read_text()
    after = text.split("<!-- test-command -->\n", 1)[1]
    assert after.startswith(f"```sh\n{TEST_COMMAND}\n```")
    awk = re.search(r"cmd=\$\((awk .*?) README\.md\)", (ROOT / ".ci" / "run").read_text())
    assert awk is not None
    got = subprocess.run(
        ["bash", "-c", f"{awk.group(1)} README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert got.stdout.strip() == TEST_COMMAND


def test_testing_page_shows_the_example_files() -> None:
    text = (ROOT / "docs" / "testing.md").read_text()
    shown = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = re.fullmatch(r"<!-- example: (\S+) -->", before)
        assert marker is not None, f"a code block of docs/testing.md is no example file: {m[0]!r}"
        name = marker.group(1)
        assert m.group(2) == (EXAMPLES / name).read_text(), f"{name} differs from its block"
        shown.append(name)
    files = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.is_file())
    assert sorted(shown) == files


def test_readme_ensemble_config_is_a_member_of_three() -> None:
    """The README's zoo.cfg is read as member 1 of a 3-voter ensemble (with the observer line
    uncommented, as member 4: an observer)."""
    from trizk.server.config.zoocfg import parse_config

    (cfg,) = [body for _, body in fenced(README.read_text()) if "server.1=" in body]
    member = parse_config(cfg, myid="1")
    assert member.is_quorum and member.client_port == 2181 and not member.warnings
    assert member.my_server is not None and member.my_server.type.name == "PARTICIPANT"
    lines = cfg.splitlines()
    (commented,) = [i for i, line in enumerate(lines) if line.startswith("# server.4=")]
    lines[commented] = lines[commented].removeprefix("# ").split()[0]  # without the comment
    observer = parse_config("\n".join([*lines, "peerType=observer"]), myid="4")
    assert observer.my_server is not None and observer.my_server.type.name == "OBSERVER"
    assert not observer.warnings
