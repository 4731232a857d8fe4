"""The package's layering holds: one-way imports, no cycles.

Every module of ``privconf_sklearn`` is parsed with :mod:`ast` (no import is executed),
and every ``import`` / ``from ... import`` statement in it counts, including the ones
inside functions and under ``if TYPE_CHECKING:``. The layers, lowest first, are listed
in :data:`LAYERS` and drawn in the developer documentation
(``docs/developer/architecture.rst``); a module may import modules of its own layer or
of layers below, never above, and the import graph between modules has no cycle.

Seams are public: a module imports from another subpackage (or, at the top level, from
a module of another layer) only names listed in the ``__all__`` of a public module (no
leading underscore in its path), that is, the documented API; the package's foundations
(``_validation``, ``_random``, ...) are the shared toolkit of every layer.
:data:`PRIVATE_IMPORTS_ALLOWED` lists the temporary exceptions.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "privconf_sklearn"

#: The layers, lowest first: (name, module prefixes). A module belongs to the layer of
#: the longest prefix that names it or a package containing it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundations",
        (
            "privconf_sklearn._param_validation",  # scikit-learn's constraints, one loop
            "privconf_sklearn._validation",  # checks of data: scores, probabilities, labels
            "privconf_sklearn._random",
            "privconf_sklearn._diffprivlib",  # the one door to diffprivlib
            "privconf_sklearn._ledger",
            "privconf_sklearn._groups",
            "privconf_sklearn._warnings",  # warnings at the user's line
        ),
    ),
    ("privacy primitives", ("privconf_sklearn.privacy",)),
    ("mechanisms", ("privconf_sklearn.mechanisms",)),
    ("scores", ("privconf_sklearn.scores",)),
    ("metrics and data", ("privconf_sklearn.metrics", "privconf_sklearn.datasets")),
    (
        "estimators",
        (
            "privconf_sklearn._base",
            "privconf_sklearn._calibration_run",  # the public steps of a calibration
            "privconf_sklearn.base",  # the estimators' public base class and steps
            "privconf_sklearn.mondrian",  # per-group calibration the estimators use
            "privconf_sklearn.classification",
            "privconf_sklearn.regression",
            "privconf_sklearn.risk_control",  # conformal risk control (multilabel sets)
        ),
    ),
    ("cards", ("privconf_sklearn.cards",)),
    (
        "applications",
        (
            "privconf_sklearn",  # the package's __init__: the public names
            "privconf_sklearn.model_selection",  # the certificate-aware search
            "privconf_sklearn.federated",
            "privconf_sklearn.dask",
            "privconf_sklearn.__main__",
            "privconf_sklearn._demo",
        ),
    ),
]

#: Rules the issue tracker named, checked on their own so a violation reads plainly.
FORBIDDEN = [
    ("privconf_sklearn._base", "privconf_sklearn.cards"),
    ("privconf_sklearn.classification", "privconf_sklearn.cards"),
    ("privconf_sklearn.regression", "privconf_sklearn.cards"),
    ("privconf_sklearn.risk_control", "privconf_sklearn.cards"),
    ("privconf_sklearn.cards", "privconf_sklearn.model_selection"),
    ("privconf_sklearn.mechanisms", "privconf_sklearn.federated"),
    ("privconf_sklearn.metrics", "privconf_sklearn.classification"),
    ("privconf_sklearn.metrics", "privconf_sklearn.regression"),
    ("privconf_sklearn.metrics", "privconf_sklearn._base"),
]

#: Temporary exceptions to the public-seams rule, as module-name patterns (a pattern
#: also covers the modules below it); an import is allowed if its importer or its
#: target matches. Empty: add an entry only with its reason;
#: ``test_every_allowed_private_import_is_still_needed`` fails as soon as an entry
#: allows nothing.
PRIVATE_IMPORTS_ALLOWED: tuple[str, ...] = ()


# ------------------------------------------------------------------ the graph
def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(path, package.parent): path for path in sorted(package.rglob("*.py"))}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports anywhere in its body (function level too).

    ``from x import y`` counts as importing ``x.y`` when that is a module, else ``x``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    top = name.split(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == top)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != top:
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in modules else target)
    found.discard(name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = package_modules(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str, layers=LAYERS) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_layer, target_layer = layer_of(module, layers), layer_of(target, layers)
            if target_layer is not None and source_layer is not None:
                if target_layer > source_layer:
                    found.append(
                        f"{module} ({layers[source_layer][0]}) imports {target} "
                        f"({layers[target_layer][0]})"
                    )
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _subpackage(module: str, modules: dict[str, Path]) -> str | None:
    """``privconf_sklearn.<sub>`` when that is a package holding ``module``, else None."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    name = ".".join(parts[:2])
    return name if modules.get(name, Path()).name == "__init__.py" else None


def seam_unit(module: str, modules: dict[str, Path], layers=LAYERS) -> str:
    """What a private module is private to: its subpackage, or at the top level its layer."""
    subpackage = _subpackage(module, modules)
    if subpackage is not None:
        return subpackage
    layer = layer_of(module, layers)
    return module if layer is None else f"the {layers[layer][0]} layer"


def is_private(module: str) -> bool:
    """Whether a component of the path below the package starts with ``_`` (not dunder)."""
    return any(
        part.startswith("_") and not part.endswith("__") for part in module.split(".")[1:]
    )


def _public_names(path: Path) -> set[str]:
    """The string entries of the module's ``__all__`` (empty if it has none)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return {item.value for item in ast.walk(node.value) if isinstance(item, ast.Constant)}
    return set()


def _imported(name: str, path: Path, modules: dict[str, Path]):
    """``(target module, imported name or None)`` for every import statement of ``path``."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - (node.level - 1)] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield (submodule, None) if submodule in modules else (target, alias.name)


def _matches(module: str, patterns) -> bool:
    return any(fnmatchcase(module, p) or fnmatchcase(module, p + ".*") for p in patterns)


def private_imports(package: Path = PACKAGE, layers=LAYERS, allowed=()) -> list[str]:
    """Imports of a private module, or of a name outside ``__all__``, across a seam.

    A seam lies between two subpackages, or between a subpackage or top-level module
    and a top-level module of another layer; imports of the foundations (the first
    layer) cross none. An import is ``allowed`` if its importer or target matches.
    """
    modules = package_modules(package)
    found = []
    for name, path in sorted(modules.items()):
        for target, imported in _imported(name, path, modules):
            if target not in modules or layer_of(target, layers) == 0:
                continue
            if seam_unit(target, modules, layers) == seam_unit(name, modules, layers):
                continue
            if _matches(name, allowed) or _matches(target, allowed):
                continue
            if is_private(target) or (
                imported is not None and imported not in _public_names(modules[target])
            ):
                found.append(f"{name} imports {target}{'.' + imported if imported else ''}")
    return found


# ------------------------------------------------------------------ the tests
GRAPH = import_graph()


def test_every_module_has_a_layer():
    unassigned = [module for module in GRAPH if layer_of(module) is None]
    assert not unassigned, f"assign these modules to a layer in LAYERS: {unassigned}"


def test_the_graph_sees_function_level_and_relative_imports():
    assert "privconf_sklearn._calibration_run" in GRAPH["privconf_sklearn._base"]
    assert "privconf_sklearn.cards._markdown" in GRAPH["privconf_sklearn.cards._card"]  # in a def
    assert "privconf_sklearn.privacy" in GRAPH["privconf_sklearn.mechanisms._base"]
    assert len(GRAPH) >= 40


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, f"import cycles between modules: {found}"


def test_each_layer_imports_only_from_below():
    found = upward_imports(GRAPH)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("importer, imported", FORBIDDEN)
def test_named_rules(importer, imported):
    offending = [
        (module, target)
        for module, targets in GRAPH.items()
        if module == importer or module.startswith(importer + ".")
        for target in targets
        if target == imported or target.startswith(imported + ".")
    ]
    assert not offending, offending


def test_seams_import_only_public_names_of_other_subpackages_and_layers():
    found = private_imports(allowed=PRIVATE_IMPORTS_ALLOWED)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("entry", PRIVATE_IMPORTS_ALLOWED)
def test_every_allowed_private_import_is_still_needed(entry):
    without = tuple(other for other in PRIVATE_IMPORTS_ALLOWED if other != entry)
    assert private_imports(allowed=without), f"remove {entry!r} from PRIVATE_IMPORTS_ALLOWED"


def test_seam_checker_catches_private_modules_and_names_across_seams(tmp_path):
    """Planted: private modules, names outside ``__all__``; the allowed seams pass."""
    package = tmp_path / "privconf_sklearn"
    for sub in ("mechanisms", "mechanisms/fedcp", "federated", "cards"):
        (package / sub).mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_validation.py").write_text("")
    (package / "_base.py").write_text("from .mechanisms._base import Calibration\n")
    (package / "classification.py").write_text("from ._base import Base, _hook\n")
    (package / "base.py").write_text("from ._base import Base\n__all__ = ['Base']\n")
    (package / "mechanisms" / "__init__.py").write_text("__all__ = ['ExponQ']\n")
    (package / "mechanisms" / "_base.py").write_text("from .._validation import check\n")
    (package / "mechanisms" / "fedcp" / "__init__.py").write_text(
        "from .._base import Calibration\nfrom ._plan import make_plan, _cache\n"
        "__all__ = ['make_plan']\n"
    )
    (package / "mechanisms" / "fedcp" / "_plan.py").write_text("")
    (package / "federated" / "__init__.py").write_text(
        "from ..mechanisms.fedcp import make_plan\nfrom .._validation import check\n"
    )
    (package / "federated" / "_wire.py").write_text(
        "from ..mechanisms.fedcp._plan import make_plan\n"
        "def f():\n    from ..mechanisms.fedcp import _cache\n"
    )
    (package / "cards" / "__init__.py").write_text(
        "from ..base import Base\nfrom .._base import register\nfrom ..mechanisms import ExponQ\n"
        "from ..mechanisms import LogGrid\n"
    )
    layers = [
        ("foundations", ("privconf_sklearn._validation",)),
        ("mechanisms", ("privconf_sklearn.mechanisms",)),
        (
            "estimators",
            ("privconf_sklearn._base", "privconf_sklearn.base", "privconf_sklearn.classification"),
        ),
        ("cards", ("privconf_sklearn.cards",)),
        ("applications", ("privconf_sklearn", "privconf_sklearn.federated")),
    ]
    expected = [
        "privconf_sklearn._base imports privconf_sklearn.mechanisms._base.Calibration",
        "privconf_sklearn.cards imports privconf_sklearn._base.register",
        "privconf_sklearn.cards imports privconf_sklearn.mechanisms.LogGrid",
        "privconf_sklearn.federated._wire imports privconf_sklearn.mechanisms.fedcp._plan"
        ".make_plan",
        "privconf_sklearn.federated._wire imports privconf_sklearn.mechanisms.fedcp._cache",
    ]
    assert private_imports(package, layers) == expected
    assert private_imports(package, layers, allowed=("privconf_sklearn.federated",)) == (
        expected[:3]
    )
    assert private_imports(package, layers, allowed=("privconf_sklearn.mechanisms._*",)) == (
        expected[1:]
    )


def test_checker_catches_a_function_level_cycle_and_an_upward_import(tmp_path):
    """A planted function-level import from mechanisms into cards is caught twice."""
    package = tmp_path / "privconf_sklearn"
    (package / "mechanisms").mkdir(parents=True)
    (package / "cards").mkdir()
    (package / "__init__.py").write_text("")
    (package / "mechanisms" / "__init__.py").write_text("from .expon_q import ExponQ\n")
    (package / "mechanisms" / "expon_q.py").write_text(
        "def card():\n    from ..cards import build\n    return build\n"
    )
    (package / "cards" / "__init__.py").write_text("from ..mechanisms import ExponQ\n")
    graph = import_graph(package)
    assert graph["privconf_sklearn.mechanisms.expon_q"] == {"privconf_sklearn.cards"}
    assert cycles(graph) == [
        [
            "privconf_sklearn.cards",
            "privconf_sklearn.mechanisms",
            "privconf_sklearn.mechanisms.expon_q",
        ]
    ]
    assert upward_imports(graph) == [
        "privconf_sklearn.mechanisms.expon_q (mechanisms) imports privconf_sklearn.cards (cards)"
    ]
