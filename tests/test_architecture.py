"""The dependency rules of docs/architecture.md, enforced on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sentadapt"

# module prefix → the only package folder allowed to import it
OWNERS = {"accelerate": "train", "sentence_transformers": "export", "onnx": "export", "onnxruntime": "export",
          "typer": "cli"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_optional_and_framework_imports_stay_in_their_layer(path: Path) -> None:
    area = path.relative_to(PACKAGE).parts[0]
    for name in _imports(path):
        top = name.split(".")[0]
        if top in OWNERS:
            assert area == OWNERS[top], f"{path.relative_to(PACKAGE)} imports {top}; only {OWNERS[top]}/ may"


@pytest.mark.parametrize("path", [p for p in SOURCES if p.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_never_imports_the_cli_or_prints_with_rich(path: Path) -> None:
    for name in _imports(path):
        assert not name.startswith("sentadapt.cli"), f"{path.name} imports the CLI (dependencies point down)"
        assert not name.startswith("rich.console"), f"{path.name} prints; only cli/ talks to the terminal"
