"""The commands the documentation gives still run: every repository path that README.md, docs/**/*.md and the
benchmarks' READMEs name exists, and every `python -m` target of this repository is a module that runs as one.

A path is a token starting with benchmarks/, scripts/, examples/, recipes/ or docs/, found from the repository
root or from the document's own folder (a relative link); a placeholder in it (`<dir>`, `{a,b}`, `h100|h200`,
`*`, `…`, `$VAR`, an ALL-CAPS segment such as NAME) ends what is checked at the folder before it. A path with
`former` or `formerly` in the 60 characters before it is history (a removed script, named where its results
stay) and is not checked. Nothing is run: a module is found with importlib.util.find_spec and its source
read for a `__main__` block.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").rglob("README.md"))]
PATH = re.compile(r"(?<![\w./$-])(?:benchmarks|scripts|examples|recipes|docs)/[^\s`'\"()\[\]]*")
MODULE = re.compile(r"\bpython3? -m ([\w.<>{}]+)")
OURS = ("benchmarks", "radt_ext", "listeners", "examples", "tests")
PLACEHOLDER = re.compile(r"[<>{}|*…$]|^[A-Z][A-Z_]+$")
HISTORY = re.compile(r"\bformer(ly)?\b")


def _paths(doc: Path, text: str):
    """(where, the path checked, the token) for each path `text` (a document's text) names."""
    for m in PATH.finditer(text):
        if HISTORY.search(text[max(0, m.start() - 60):m.start()]):  # across a line break too
            continue
        kept = []
        for part in m.group(0).rstrip(".,:;").split("/"):
            if PLACEHOLDER.search(part):
                break
            kept.append(part)
        yield _where(doc, text, m.start()), "/".join(kept), m.group(0)


def _modules(doc: Path, text: str):
    """(where, module) for each `python -m` target of this repository that `text` names (templates left out)."""
    for m in MODULE.finditer(text):
        module = m.group(1)
        if module.split(".")[0] in OURS and not PLACEHOLDER.search(module) and not module.endswith("."):
            yield _where(doc, text, m.start()), module


def _where(doc: Path, text: str, offset: int) -> str:
    return f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"


def _texts():
    for doc in DOCS:
        yield doc, doc.read_text(encoding="utf-8")


def test_the_scan_sees_the_documents_and_their_commands():
    assert len(DOCS) > 50 and (ROOT / "benchmarks" / "packing" / "README.md") in DOCS
    found = [p for doc, text in _texts() for _, p, _ in _paths(doc, text)]
    modules = [m for doc, text in _texts() for _, m in _modules(doc, text)]
    assert len(found) > 300 and len(modules) > 100
    assert "benchmarks/packing/pack_bound.sh" in found and "benchmarks.sampling.overhead" in modules


def test_every_path_the_documents_name_exists():
    missing = [f"{where}: {token}" for doc, text in _texts() for where, path, token in _paths(doc, text)
               if not ((ROOT / path).exists() or (doc.parent / path).exists())]
    assert not missing, "\n".join(missing)


def test_every_python_m_target_of_this_repository_runs_as_a_module():
    bad = []
    for where, module in sorted({(w, m) for doc, text in _texts() for w, m in _modules(doc, text)}):
        try:
            spec = importlib.util.find_spec(module)
        except ImportError as exc:
            bad.append(f"{where}: {module}: {exc}")
            continue
        if spec is None:
            bad.append(f"{where}: {module}: no such module")
        elif spec.submodule_search_locations is not None:  # a package runs through its __main__
            if importlib.util.find_spec(f"{module}.__main__") is None:
                bad.append(f"{where}: {module}: a package without __main__")
        elif "__main__" not in Path(spec.origin).read_text(encoding="utf-8"):
            bad.append(f"{where}: {module}: nothing runs under `python -m` (no __main__ block)")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line, checked", [
    ("    OUT=<dir> bash benchmarks/sampling/monitor_cpu.sh", ["benchmarks/sampling/monitor_cpu.sh"]),
    ("`docs/ops/host/h100|h200` and recipes/NAME/MLproject", ["docs/ops/host", "recipes"]),
    ("its driver, formerly `scripts/gpu/pack_queue.sh`, was removed", []),
    ("its driver (formerly\n`scripts/gpu/pack_queue.sh`) was removed", []),
    ("[link](../benchmarks/gpu/x.md) and $RESULTS/docs/x", []),
])
def test_placeholders_relative_links_and_history_are_read_as_meant(line, checked):
    assert [p for _, p, _ in _paths(ROOT / "README.md", line)] == checked


def test_module_templates_are_left_out():
    text = "python -m benchmarks.<group>.<name> and python3 -m benchmarks.store.store_ui --out d"
    assert [m for _, m in _modules(ROOT / "README.md", text)] == ["benchmarks.store.store_ui"]
