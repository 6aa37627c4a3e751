"""The package's layout rules, checked on the import graph built from the source (ast), not by importing it.

* no import circle between modules (an edge to a package counts as an edge to its ``__init__``; a package's
  ``__init__`` re-exporting its own children is not a circle);
* no module imports another module's ``_private`` name;
* production code does not import ``toolkit.samples`` (the synthetic data generator): only ``toolkit/samples/``,
  the command line (``toolkit/cli/``) and the tests do;
* no file in ``toolkit/`` is over 450 lines (word lists and templates excepted);
* the notebooks' ``.py`` twins define no classes and no functions: notebooks call the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "toolkit"


def _modules(root: Path = PKG) -> dict[str, Path]:
    mods = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
        name = ".".join(rel.parts)
        mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]):
    """(target module, imported name or None) for every ``toolkit`` import of module ``name``."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "toolkit":
                continue
            for alias in node.names:
                yield target, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "toolkit":
                    yield alias.name, None


def import_graph(root: Path = PKG) -> tuple[nx.DiGraph, list[str], list[str]]:
    """The module import graph of ``root``, the cross-module private imports and the production modules importing
    ``toolkit.samples``."""
    mods = _modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    private, samples_users = [], []
    for name, path in mods.items():
        for target, imported in _imports(name, path, mods):
            full = f"{target}.{imported}" if imported else target
            dst = full if full in mods else target
            if dst in mods and dst != name:
                graph.add_edge(name, dst)
            if (imported and imported.startswith("_") and not imported.startswith("__") and target != name
                    and not target.startswith(name + ".")):
                private.append(f"{name} imports {target}.{imported}")
            if target.startswith("toolkit.samples") and not name.startswith(("toolkit.samples", "toolkit.cli")):
                samples_users.append(name)
    return graph, private, sorted(set(samples_users))


def design_circles(graph: nx.DiGraph) -> list[list[str]]:
    """Strongly connected groups of modules, except a package's ``__init__`` with its own children (re-export)."""
    circles = []
    for comp in nx.strongly_connected_components(graph):
        if len(comp) > 1:
            top = min(comp, key=len)
            if not all(m == top or m.startswith(top + ".") for m in comp):
                circles.append(sorted(comp))
    return circles


def test_the_checker_finds_what_it_looks_for(tmp_path):
    pkg = tmp_path / "toolkit"
    (pkg / "a").mkdir(parents=True)
    (pkg / "samples").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "samples" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from toolkit.b import y\n")
    (pkg / "b.py").write_text("from toolkit.a.x import _helper\nfrom toolkit.samples import make\n")
    graph, private, samples_users = import_graph(pkg)
    assert design_circles(graph) == [["toolkit.a.x", "toolkit.b"]]
    assert private == ["toolkit.b imports toolkit.a.x._helper"]
    assert samples_users == ["toolkit.b"]


def test_no_import_circle():
    graph, _, _ = import_graph()
    assert design_circles(graph) == []


def test_no_cross_module_private_import():
    _, private, _ = import_graph()
    assert private == []


def test_production_code_does_not_import_samples():
    _, _, samples_users = import_graph()
    assert samples_users == []


def test_no_oversized_module():
    big = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450
           and "wordlist" not in p.name and "templates" not in p.name}
    assert big == {}


@pytest.mark.parametrize("twin", sorted((ROOT / "notebooks").glob("*.py")), ids=lambda p: p.name)
def test_notebook_twins_define_no_functions(twin):
    defs = [n.name for n in ast.parse(twin.read_text(encoding="utf-8")).body
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    assert defs == []


#: the rooms of ``toolkit`` from the bottom up (ARCHITECTURE.md "Direction"): a module imports its own room and the
#: rooms of lower layers only; rooms of one layer do not import each other. ``toolkit`` is the package's own
#: ``__init__``, ``__main__`` the ``python -m toolkit`` entry point.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("io", "progress", "threads", "heap", "models"),
    ("corpus",),
    ("identifiers", "samples"),
    ("strategies", "metrics"),
    ("training",),
    ("audit",),
    ("scrub", "config"),
    ("review",),
    ("results",),
    ("plots",),
    ("report",),
    ("pipelines",),
    ("cli",),
    ("toolkit", "__main__"),
)


def room(module: str) -> str:
    """``toolkit.audit.attacks.loss`` → ``audit``; ``toolkit.errors`` → ``errors``; ``toolkit`` → ``toolkit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: nx.DiGraph, layers=LAYERS) -> list[str]:
    """Every edge of ``graph`` that does not go down ``layers`` (to a higher layer, to another room of the same
    layer, or from or to a room the order does not name)."""
    level = {r: i for i, rooms in enumerate(layers) for r in rooms}
    bad = []
    for src, dst in graph.edges:
        a, b = room(src), room(dst)
        if a == b:
            continue
        if a not in level or b not in level:
            bad.append(f"{src} -> {dst} (room not in LAYERS)")
        elif level[b] >= level[a]:
            bad.append(f"{src} -> {dst} ({b} is not below {a})")
    return sorted(bad)


def test_the_direction_checker_finds_what_it_looks_for(tmp_path):
    pkg = tmp_path / "toolkit"
    for r in ("low", "mid", "side", "top"):
        (pkg / r).mkdir(parents=True)
        (pkg / r / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "top" / "x.py").write_text("from toolkit.mid import m\n")            # down: allowed
    (pkg / "mid" / "m.py").write_text("from toolkit.low import l\nfrom toolkit.mid.n import f\n")  # down, inside
    (pkg / "mid" / "n.py").write_text("def f(): ...\n")
    (pkg / "low" / "l.py").write_text("def g():\n    from toolkit.top.x import h\n")  # up, even lazily
    (pkg / "side" / "s.py").write_text("from toolkit.mid.m import q\n")          # sideways between rooms
    (pkg / "mid" / "o.py").write_text("import toolkit.extra.e\n")                # a room the order lacks
    (pkg / "extra").mkdir()
    (pkg / "extra" / "e.py").write_text("")
    graph, _, _ = import_graph(pkg)
    layers = (("low",), ("mid", "side"), ("top",), ("toolkit",))
    assert upward_imports(graph, layers) == ["toolkit.low.l -> toolkit.top.x (top is not below low)",
                                             "toolkit.mid.o -> toolkit.extra.e (room not in LAYERS)",
                                             "toolkit.side.s -> toolkit.mid.m (mid is not below side)"]


def test_every_room_is_in_the_order():
    rooms = {room(m) for m in _modules()}
    named = {r for layer in LAYERS for r in layer}
    assert rooms == named


def test_every_import_goes_down_the_layers():
    graph, _, _ = import_graph()
    assert upward_imports(graph) == []


def test_architecture_states_the_same_order():
    """ARCHITECTURE.md's direction line lists ``LAYERS`` bottom-up (`` < `` between layers, ``/`` inside one)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    stated = " < ".join("/".join(layer) for layer in LAYERS[:-1])
    assert stated in text
