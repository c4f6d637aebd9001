"""The packages' floors: each package imports only the packages its docstring allows (anywhere in a
module, lazy imports inside functions included), and no two packages import each other."""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what each part of radt_ext (and listeners) may import, besides itself and radt_ext.errors
ALLOWED = {
    "listeners": set(),
    "workload_api": set(),
    "figures": {"workload_api"},
    "store": set(),
    "view": {"store"},
    "hostsettings": {"listeners"},
    "sampling": {"listeners", "store", "figures"},
    "report": {"listeners", "figures", "store"},
    "run": {"listeners", "workload_api", "figures", "store", "sampling", "report", "view", "hostsettings"},
    "collocation": {"listeners", "workload_api", "figures", "store", "sampling", "report", "run", "view", "hostsettings"},
    "sweep": {"listeners", "workload_api", "figures", "store", "sampling", "report", "run", "collocation", "view", "hostsettings"},
    "packing": {"listeners", "workload_api", "figures", "store", "sampling", "report", "run", "collocation", "sweep", "view", "hostsettings"},
    "compare": {"figures", "store", "report"},
    "ops": {"listeners", "store", "workloads"},
    "workloads": {"workload_api"},
    "errors": set(),
}
TOP = {"__init__", "cli", "markers"}  # the public API (markers.py: a documented path) and the command line


def part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "listeners":
        return "listeners"
    if parts[0] != "radt_ext" or len(parts) == 1:
        return None
    return parts[1]


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from radt_ext import x`
    return found


def edges() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in [*(REPO / "radt_ext").rglob("*.py"), *(REPO / "listeners").rglob("*.py")]:
        rel = path.relative_to(REPO).with_suffix("").parts
        source = "listeners" if rel[0] == "listeners" else rel[1]
        if source in TOP:
            continue
        targets = {part(m) for m in imports(path)} - {None, source}
        out.setdefault(source, set()).update(t for t in targets if (REPO / "radt_ext" / t).is_dir()
                                             or t in ("listeners", "errors"))
    return out


def test_every_part_has_its_floor_and_its_docstring():
    found = edges()
    assert set(found) <= set(ALLOWED), f"a part of radt_ext with no floor here: {set(found) - set(ALLOWED)}"
    for name in ALLOWED:
        if name in ("listeners", "errors"):
            continue
        init = REPO / "radt_ext" / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc, f"radt_ext/{name}/__init__.py: its docstring says what it may import"


@pytest.mark.parametrize("source", sorted(ALLOWED))
def test_imports_stay_on_their_floor(source):
    above = edges().get(source, set()) - ALLOWED[source] - {"errors"}
    assert not above, f"{source} imports {sorted(above)}, which its floor does not allow"


def test_no_cycle_between_parts():
    graph = edges()
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError(" -> ".join([*trail, node, nxt]))
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])
    assert state  # the graph was walked


def test_sweep_reaches_packing_only_through_its_registry():
    from radt_ext.sweep.schedulers import scheduler

    packing = scheduler("pack")
    assert packing.__name__ == "radt_ext.packing.scheduler"
    assert "packing" not in edges()["sweep"]
