"""Imports run one way: mailmortem → remediation → forensics → queries; only mailmortem/ imports click or rich.

The checker reads every module's AST, so an import inside a function, an
`importlib.import_module("…")` / `find_spec("…")` target and a "module:function"
string (the CLI's COMMANDS table) all count, not only the imports at the top.
"""

from __future__ import annotations

import pytest

import ast
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ("mailmortem", "remediation", "forensics", "queries")  # top to bottom
UI_LIBRARIES = {"click", "rich"}
_DYNAMIC_IMPORTS = {"import_module", "find_spec", "__import__"}
_TARGET_STRING = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")


def layer_violations(root: Path) -> list[str]:
    """One line per import under `root` that reaches a higher floor, or click/rich outside mailmortem/."""
    found = []
    for floor in FLOORS:
        for path in sorted((root / floor).rglob("*.py")):
            package = ".".join(path.relative_to(root).parent.parts)
            for line, target in imported_modules(path, package):
                problem = _problem(floor, target)
                if problem:
                    found.append(f"{path.relative_to(root)}:{line}: {problem}")
    return found


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, dotted module) for every import statement, dynamic import and "module:function" string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, _absolute(node, package)))
        elif isinstance(node, ast.Call) and _called_name(node.func) in _DYNAMIC_IMPORTS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _TARGET_STRING.fullmatch(node.value)
            if match and match.group(1).split(".")[0] in FLOORS:
                found.append((node.lineno, match.group(1)))
    return sorted(found)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _problem(floor: str, target: str) -> str | None:
    top = target.split(".")[0]
    if top in UI_LIBRARIES and floor != "mailmortem":
        return f"{floor} imports {target} (only mailmortem/ may use click or rich)"
    if top in FLOORS and FLOORS.index(top) < FLOORS.index(floor):
        return f"{floor} imports {target} (a higher floor)"
    return None


@pytest.mark.slow
def test_imports_run_one_way_and_only_the_cli_uses_click_or_rich():
    assert layer_violations(ROOT) == []


def test_the_checker_sees_every_floor_and_the_cli_command_table():
    cli = ROOT / "mailmortem" / "cli" / "__init__.py"
    targets = {target for _, target in imported_modules(cli, "mailmortem.cli")}
    assert {"mailmortem.cli.diagnose", "mailmortem.cli.claims", "forensics.errors", "click"} <= targets
    for floor in FLOORS:
        assert any((ROOT / floor).rglob("*.py")), floor


def _plant(root: Path, relative: str, source: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")


def test_checker_reports_a_back_import_at_module_level_and_inside_a_function(tmp_path):
    _plant(tmp_path, "forensics/x.py", """\
        import queries
        from forensics import errors
        from remediation import claims

        def f():
            from remediation import y
        """)
    assert layer_violations(tmp_path) == [
        "forensics/x.py:3: forensics imports remediation (a higher floor)",
        "forensics/x.py:6: forensics imports remediation (a higher floor)",
    ]


def test_checker_reports_dynamic_targets_relative_imports_and_ui_libraries(tmp_path):
    _plant(tmp_path, "queries/q.py", """\
        import importlib, importlib.util

        def g():
            importlib.import_module("forensics.ab")
            return importlib.util.find_spec("mailmortem.cli")
        """)
    _plant(tmp_path, "remediation/sub/r.py", """\
        from .. import claims
        from ...mailmortem import output
        TABLE = {"x": "mailmortem.cli.x:run"}

        def h():
            import rich.console
        """)
    _plant(tmp_path, "mailmortem/ok.py", "import click, rich\nimport remediation, forensics.ab, queries\n")
    assert layer_violations(tmp_path) == [
        "remediation/sub/r.py:2: remediation imports mailmortem (a higher floor)",
        "remediation/sub/r.py:3: remediation imports mailmortem.cli.x (a higher floor)",
        "remediation/sub/r.py:6: remediation imports rich.console (only mailmortem/ may use click or rich)",
        "queries/q.py:4: queries imports forensics.ab (a higher floor)",
        "queries/q.py:5: queries imports mailmortem.cli (a higher floor)",
    ]


# --- no circle of imports inside forensics/ ------------------------------------------------------------


def import_graph(root: Path, floor: str = "forensics") -> dict[str, set[str]]:
    """Each module of `floor` (dotted) → the modules of `floor` it imports, anywhere in it (a function's import
    counts: the circle is there all the same). `from package import name` reaches the module `name` when it is one."""
    modules = {_dotted(path, root): path for path in (root / floor).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, package)
                targets |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                            for alias in node.names}
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def _dotted(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a → … → a) per strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_circle_of_imports_in_forensics():
    assert import_circles(import_graph(ROOT)) == []


def test_the_circle_check_finds_a_circle_through_a_function_s_import(tmp_path):
    _plant(tmp_path, "forensics/__init__.py", "")
    _plant(tmp_path, "forensics/ingest/__init__.py", "")
    _plant(tmp_path, "forensics/ingest/a.py", "from forensics.ingest import b\n")
    _plant(tmp_path, "forensics/ingest/b.py", "def f():\n    from . import c\n")
    _plant(tmp_path, "forensics/ingest/c.py", "import forensics.ingest.a\n")
    _plant(tmp_path, "forensics/ingest/d.py", "from forensics.ingest.a import x\n")
    assert import_circles(import_graph(tmp_path)) == [["forensics.ingest.a", "forensics.ingest.b",
                                                        "forensics.ingest.c"]]


# --- the ingest path takes its inputs by name -----------------------------------------------------------

MOST_POSITIONAL = 5


def crowded_functions(root: Path, under: str = "forensics/ingest") -> list[str]:
    """Each function (or method, not counting self/cls) under `under` taking more than MOST_POSITIONAL positional
    parameters: the rest are to be keyword-only."""
    found = []
    for path in sorted((root / under).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [arg.arg for arg in node.args.posonlyargs + node.args.args]
                count = len(names) - (names[:1] in (["self"], ["cls"]))
                if count > MOST_POSITIONAL:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.name} takes {count} positional")
    return found


def test_no_function_of_the_ingest_path_takes_more_than_five_positional_parameters():
    assert crowded_functions(ROOT) == []


def test_the_positional_check_counts_methods_without_self(tmp_path):
    _plant(tmp_path, "forensics/ingest/x.py", """\
        def six(a, b, c, d, e, f): ...
        def five_and_names(a, b, c, d, e, *, f, g): ...
        class C:
            def method(self, a, b, c, d, e): ...
            def crowded(self, a, b, c, d, e, f): ...
        """)
    assert crowded_functions(tmp_path) == ["forensics/ingest/x.py:1: six takes 6 positional",
                                           "forensics/ingest/x.py:5: crowded takes 6 positional"]
