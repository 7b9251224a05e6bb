"""The dependency rules of docs/architecture.md, enforced on the source tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sentadapt"

# module prefix → the only package folder allowed to import it
OWNERS = {"accelerate": "train", "sentence_transformers": "exporting", "onnx": "exporting",
          "onnxruntime": "exporting", "typer": "cli"}


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


# Two-file import cycles tolerated for now (each with its reason); a fixed one must leave the set.
KNOWN_CYCLES: set[frozenset[str]] = set()  # none: a new entry needs a reason in a comment beside it


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in SOURCES}


def _package_imports(path: Path) -> set[str]:
    """Every sentadapt module `path` imports, at any depth (function bodies and TYPE_CHECKING blocks too):
    `from sentadapt.x import y` counts as sentadapt.x.y when that is a module, else as sentadapt.x."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(name for name in targets if name in MODULES and name != module)
    return found


def test_no_two_modules_import_each_other() -> None:
    graph = {name: _package_imports(path) for name, path in MODULES.items()}
    cycles = {frozenset({a, b}) for a, imported in graph.items() for b in imported if a in graph.get(b, set())}
    unexpected = sorted(" ↔ ".join(sorted(pair)) for pair in cycles - KNOWN_CYCLES)
    assert not unexpected, f"import cycles (make the imports point one way): {unexpected}"
    gone = sorted(" ↔ ".join(sorted(pair)) for pair in KNOWN_CYCLES - cycles)
    assert not gone, f"these cycles are fixed: delete them from KNOWN_CYCLES so they cannot come back: {gone}"


def test_cycle_finder_sees_function_level_and_type_checking_imports() -> None:
    """A cycle hidden in a function body or a TYPE_CHECKING block is still a cycle: the finder must see both."""
    graph = {name: _package_imports(path) for name, path in MODULES.items()}
    assert "sentadapt.model.encoder" in graph["sentadapt.diagnostics.analysis"]  # imported inside diagnose() only
    assert "sentadapt.model.encoder" in graph["sentadapt.exporting.pipeline"]  # under `if TYPE_CHECKING:` only
    assert "sentadapt.cli.diagnose" in graph["sentadapt.cli"]  # `from sentadapt.cli import diagnose as ...`


# The run directory's layout has one owner (sentadapt/storage/run_folder.py): elsewhere its file names are neither
# spelled as strings nor joined onto a path (`run / "best"`); prose in messages may still name them.
RUN_FILES = {"config.yaml", "metrics.json", "dev_outputs.json", "train.log", "auto.yaml", "base_dev.json",
             "auto_outcome.json", ".lock", "step-", "stage-"}
RUN_FOLDERS = {"checkpoints", "best", "candidates", "tensorboard", ".chosen"}


def _run_layout_literals(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in RUN_FILES:
            found.append(f"line {node.lineno}: {node.value!r}")
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
              and node.right.value in RUN_FOLDERS):
            found.append(f"line {node.lineno}: / {node.right.value!r}")
    return found


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name != "run_folder.py"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_run_directory_layout_is_spelled_only_in_rundir(path: Path) -> None:
    assert not _run_layout_literals(path), f"{path.relative_to(PACKAGE)} spells the run layout (use RunDir)"


def test_layout_finder_sees_a_joined_folder_and_a_file_name(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('from pathlib import Path\nbest = Path("run") / "best"\nname = "metrics.json"\n')
    assert _run_layout_literals(sample) == ["line 2: / 'best'", "line 3: 'metrics.json'"]


# ------------------------------------------------------- every default written once (issue 69)
# A default is written in one module and imported where another needs it (a command's option, the library call
# under it, the helper under that): the same parameter given the same literal default in two modules is two
# declarations of one value that drift apart (`risk=0.2` was once written six times). "Not given" markers (None,
# True/False, "", empty containers, ...) are not values and are not counted, nor is 0 where it is a counter's start
# (step, seconds, a prompt's length); a seed's 0 is a chosen value and counts.
_NOT_VALUES = (None, True, False, "", (), [], {}, ...)


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else ...
    except ValueError:
        return ...  # a name or an expression: imported or computed, not a literal


def _literal_defaults(path: Path) -> list[tuple[str, str]]:
    """(parameter, repr of its literal default) for every keyword default, dataclass field default and typer
    Option/Argument default in the file."""
    found: list[tuple[str, object]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            positional = node.args.posonlyargs + node.args.args
            found += [(arg.arg, _literal(default)) for arg, default in
                      zip(positional[len(positional) - len(node.args.defaults):], node.args.defaults, strict=True)]
            found += [(arg.arg, _literal(default)) for arg, default in
                      zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if default is not None]
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    value = statement.value
                    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    found.append((statement.target.id, _literal(value)))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("Option", "Argument") and node.args:
            flags = [arg.value for arg in node.args[1:] if isinstance(arg, ast.Constant)]
            name = str(flags[0]).lstrip("-").replace("-", "_") if flags else "argument"
            found.append((name, _literal(node.args[0])))
    return [(name, repr(value)) for name, value in found
            if not any(value is marker or (type(value) is type(marker) and value == marker) for marker in _NOT_VALUES)
            and not (type(value) in (int, float) and value == 0 and not name.endswith("seed"))]


def _repeated_defaults(paths: list[Path], root: Path) -> list[str]:
    where: dict[tuple[str, str], set[str]] = {}
    for path in paths:
        for key in _literal_defaults(path):
            where.setdefault(key, set()).add(str(path.relative_to(root)))
    return sorted(f"{name}={value}: {', '.join(sorted(files))}" for (name, value), files in where.items()
                  if len(files) > 1)


def test_no_default_is_written_in_two_modules() -> None:
    repeated = _repeated_defaults(SOURCES, PACKAGE)
    assert not repeated, f"write each default once and import it (a constant beside its owner): {repeated}"


def test_default_finder_sees_a_keyword_a_field_and_an_option(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f(x, *, risk=0.2, seed=None): ...\n")
    (tmp_path / "b.py").write_text("import typer\nfrom dataclasses import dataclass, field\n@dataclass\nclass C:\n"
                                   "    risk: float = field(default=0.2)\n    flag: bool = False\n"
                                   "def g(seed=typer.Option(7, '--seed')): ...\n")
    (tmp_path / "c.py").write_text("def h(seed=7, step=0): ...\nclass D:\n    step: int = 0\n")
    assert _repeated_defaults(sorted(tmp_path.glob("*.py")), tmp_path) == ["risk=0.2: a.py, b.py", "seed=7: b.py, c.py"]


def test_export_imports_nothing_from_train() -> None:
    for path in sorted((PACKAGE / "exporting").rglob("*.py")):
        assert not {n for n in _package_imports(path) if n.startswith("sentadapt.train")}, path.name


# The layers of docs/architecture.md, lowest first: a module may import its own area and the layers below, never
# a layer above or an area beside it in the same layer (train, export and diagnostics do not know each other).
LAYERS = [
    # sentadapt: its __init__ (it imports nothing of the package when it loads)
    {"errors", "events", "text_tables", "sentadapt"},
    {"options", "registry", "storage", "stopping"},  # storage: durable writes, the run folder, row files, memos, the
    # Hub's files; stopping: a stop signal anywhere (one line, exit 128 + N) and during training (a checkpoint)
    {"config", "data"},
    {"model"},  # the encoder, its pooling, prompts, LoRA, loading and saving (sentence-transformers folders), caches
    {"evaluation", "recipes"},  # scoring: task types, the evaluator, bootstrap and variance, paired evidence
    # the use/keep decision | pairs for the user to label | the teacher's home: checked, weighed on dev, its table
    # and blend (it knows nothing of the decision: what the decision says of its lead is decision/rule.py's)
    {"decision", "pairs", "teacher"},
    {"diagnostics", "train", "exporting"},
    {"run"},  # orchestration of `adapt` (settings, config, checks, resume, stages, finish): drives train/
    {"api"},
    {"cli"},  # and sentadapt/__main__.py, the console script's door into it (_area)
]
RANK = {area: rank for rank, areas in enumerate(LAYERS) for area in areas}


def _area(module: str) -> str:
    parts = module.split(".")
    area = parts[1] if len(parts) > 1 else parts[0]
    return "cli" if area == "__main__" else area  # `python -m sentadapt` and the console script start the CLI


def _imports_up_or_across(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} → {target}" for module, targets in graph.items() for target in targets
                  if _area(module) != _area(target) and RANK[_area(target)] >= RANK[_area(module)])


def test_the_house_has_at_most_ten_floors() -> None:
    """Issue 69: a chain of imports a reader can follow; a new floor means the longest chain grew (find the import
    that made it, and whether the module belongs on a floor that exists)."""
    assert len(LAYERS) <= 10


def test_the_package_root_holds_at_most_eight_modules() -> None:
    """Issue 69: the root is the package's door (its __init__, __main__, the public calls) and what every room
    shares (errors, events, options, registry, tables); anything else has a room."""
    assert len(list(PACKAGE.glob("*.py"))) <= 8, sorted(path.name for path in PACKAGE.glob("*.py"))


def _names_defined_twice(paths: list[Path]) -> dict[str, list[str]]:
    """Each public function or class name defined at the top of more than one module → those modules."""
    where: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            defines = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if defines and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(path.name)
    return {name: modules for name, modules in where.items() if len(modules) > 1}


def test_no_file_name_or_public_name_is_used_twice() -> None:
    """Issue 69: a name found by grep is the one meant (`diagnose` was three functions, `render` five)."""
    names = [path.name for path in SOURCES if path.name != "__init__.py"]
    assert sorted({name for name in names if names.count(name) > 1}) == []
    assert _names_defined_twice(SOURCES) == {}


def test_the_twice_finder_sees_a_function_and_a_class_and_skips_private_names(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def render():\n    pass\nclass Result:\n    pass\ndef _draw():\n    pass\n")
    (tmp_path / "b.py").write_text("class render:\n    pass\ndef Result():\n    pass\ndef _draw():\n    pass\n")
    assert _names_defined_twice([tmp_path / "a.py", tmp_path / "b.py"]) == {"render": ["a.py", "b.py"],
                                                                            "Result": ["a.py", "b.py"]}


def test_every_area_has_a_layer() -> None:
    assert {_area(name) for name in MODULES} == set(RANK), "add the new module or package to LAYERS"


def test_imports_point_down_the_layers() -> None:
    graph = {name: _package_imports(path) for name, path in MODULES.items()}
    assert not _imports_up_or_across(graph), "imports pointing up or across the layers (docs/architecture.md)"


def test_layer_checker_flags_an_import_up_and_one_across() -> None:
    graph = {"sentadapt.model.encoder": {"sentadapt.train.loop", "sentadapt.model.pooling"},
             "sentadapt.exporting.st": {"sentadapt.train.checkpoint"}}
    assert _imports_up_or_across(graph) == ["sentadapt.exporting.st → sentadapt.train.checkpoint",
                                            "sentadapt.model.encoder → sentadapt.train.loop"]


def test_the_cli_stays_thin() -> None:
    """Commands parse, make one library call and render (issue 26): cli/ at most 150 lines per command in all (900
    when there were six; a new command brings its options and its rendering, nothing else), no function over 80;
    what grows belongs in the library (a result's tables, the run's lifecycle)."""
    from sentadapt.cli import app

    files = sorted((PACKAGE / "cli").glob("*.py"))
    commands = len(app.registered_commands) + len(app.registered_groups)
    assert commands == 7  # adapt, eval, pairs, decide, export, diagnose and the cache group
    # issue 69: what a result says is the library's (its lines, tables, the status line's pieces, the dry run's
    # documents): at most 900 lines; a line added here is one moved out first
    assert sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files) <= 900
    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)" for path in files
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > 80]
    assert not long, long


# Outside the package: bench/ (speed against peers) and research/ (quality studies, their stored outputs and
# write-ups) are separate consumers of sentadapt; what both need lives in tools/, which imports neither. sentadapt
# imports none of them, and the product's tests import nothing from research/ (issue 59): a stale stored output or
# a study's refactor fails `make research`, never `make test`.
REPOSITORY = PACKAGE.parent
FORBIDDEN_OUTSIDE = {"bench": {"research"}, "research": {"bench"}, "tools": {"bench", "research"},
                     "sentadapt": {"bench", "research", "tools", "tests"}, "tests": {"research"}}


def _forbidden_imports(folder: Path, forbidden: set[str]) -> list[str]:
    """`FILE imports NAME` for every import (at any depth: function bodies too) of a top-level package in
    `forbidden`, FILE relative to `folder`'s parent."""
    return sorted(f"{path.relative_to(folder.parent)} imports {name}" for path in folder.rglob("*.py")
                  for name in _imports(path) if name.split(".")[0] in forbidden)


@pytest.mark.parametrize("folder", sorted(FORBIDDEN_OUTSIDE))
def test_the_product_bench_research_and_tools_do_not_lean_on_each_other(folder: str) -> None:
    found = _forbidden_imports(REPOSITORY / folder, FORBIDDEN_OUTSIDE[folder])
    assert not found, f"move what both need into tools/ (or make it public in sentadapt): {found}"


def test_the_product_tests_read_no_stored_research_output() -> None:
    """Not only imports: no product test opens a file under research/ (its stored outputs and write-ups)."""
    readers = [path.name for path in (REPOSITORY / "tests").rglob("*.py")
               if path.name != "test_architecture.py" and re.search(r"[\"'/]research[\"'/]", path.read_text())]
    assert not readers, readers


def test_outside_checker_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "script.py").write_text("def publish():\n    from research.experiments.sections import x\n")
    assert _forbidden_imports(tmp_path / "bench", {"research"}) == [
        "bench/script.py imports research.experiments.sections"]


# ---------------------------------------------------------------- the Trainer only trains (issue 35)
TRAINER_MAX_LINES, STEP_LOOP_MAX_LINES = 250, 60
STEP_LOOP = "_train_steps"  # the one method where batches → loss → backward → step → evaluate / checkpoint reads


def _trainer_class() -> ast.ClassDef:
    tree = ast.parse((PACKAGE / "train" / "loop.py").read_text(encoding="utf-8"))
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Trainer")


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined, operator]


def _self_attributes_assigned(function: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                    names.add(part.attr)
    return names


def test_the_trainer_is_small_and_its_step_loop_fits_on_a_screen() -> None:
    trainer = _trainer_class()
    methods = {node.name: node for node in trainer.body if isinstance(node, ast.FunctionDef)}
    assert _lines(trainer) <= TRAINER_MAX_LINES, f"Trainer: {_lines(trainer)} lines; move an idea to a collaborator"
    assert _lines(methods[STEP_LOOP]) <= STEP_LOOP_MAX_LINES, f"{STEP_LOOP} has {_lines(methods[STEP_LOOP])} lines"


def test_the_trainer_declares_every_attribute_in_init_and_never_asks_getattr() -> None:
    trainer = _trainer_class()
    methods = [node for node in trainer.body if isinstance(node, ast.FunctionDef)]
    declared = _self_attributes_assigned(next(m for m in methods if m.name == "__init__"))
    for method in methods:
        undeclared = _self_attributes_assigned(method) - declared
        assert not undeclared, f"Trainer.{method.name} creates {sorted(undeclared)}; declare them in __init__"
    for node in ast.walk(trainer):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            first = node.args[0] if node.args else None
            assert not (isinstance(first, ast.Name) and first.id == "self"), \
                f"line {node.lineno}: {node.func.id}(self, …); every attribute exists from __init__ on"


def _functions_calling(name: str, paths: list[Path], root: Path = PACKAGE.parent) -> list[str]:
    """`module:function` for every function in `paths` (under `root`) whose body calls `name` (itself excluded)."""
    found = []
    for path in paths:
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == name:
                continue
            if any(isinstance(call, ast.Call) and (getattr(call.func, "id", None) == name
                                                   or getattr(call.func, "attr", None) == name)
                   for call in ast.walk(node)):
                found.append(f"{module}:{node.name}")
    return found


def test_config_yaml_has_one_writer() -> None:
    """save_run_config is called by run.execute.write_config alone; every run folder's config.yaml goes through
    it."""
    assert _functions_calling("save_run_config", SOURCES) == ["sentadapt.run.execute:write_config"]


def test_the_writer_finder_sees_a_method_call_inside_a_nested_function(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def outer():\n    def inner():\n        config.save_run_config(c, p)\n")
    assert _functions_calling("save_run_config", [source], tmp_path) == ["probe:outer", "probe:inner"]


def test_train_never_imports_the_orchestration_in_run() -> None:
    """train/ is the loop and its collaborators; run/ drives it (issue 43): the imports point one way."""
    for path in sorted((PACKAGE / "train").rglob("*.py")):
        assert not {n for n in _package_imports(path) if n.split(".")[:2] == ["sentadapt", "run"]}, path.name


def test_every_run_config_comes_from_the_one_assembler() -> None:
    """build_config is called by run.plan.assemble alone; a single run and every --recipe auto candidate call
    assemble (issue 43: before, two assemblers drifted apart and auto candidates lost the teacher-run defaults)."""
    assert _functions_calling("build_config", SOURCES) == ["sentadapt.run.plan:assemble"]
    assert _functions_calling("assemble", SOURCES) == ["sentadapt.run.auto.candidates:candidate_config",
                                                      "sentadapt.run.plan:new_config_and_base"]


def _encoder_attributes() -> set[str]:
    """Every attribute the Encoder assigns to itself (`self.X = ...` in encoder.py's Encoder class)."""
    tree = ast.parse((PACKAGE / "model" / "encoder.py").read_text(encoding="utf-8"))
    (encoder,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Encoder"]
    return {target.attr for node in ast.walk(encoder) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"}


# variables bound to other types whose fields share a name with an Encoder attribute (an EvalReport's prompts, a
# st_format.FolderLayout's pooling, head, normalize, max_length)
OTHER_TYPES = {"report", "layout"}


def _outside_assignments(path: Path, names: set[str]) -> list[str]:
    """`line N: obj.X` for each assignment to an attribute X in `names` of anything but `self` (or OTHER_TYPES)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for leaf in ast.walk(target):
                    if (isinstance(leaf, ast.Attribute) and leaf.attr in names and isinstance(leaf.ctx, ast.Store)
                            and not (isinstance(leaf.value, ast.Name) and leaf.value.id in {"self", *OTHER_TYPES})):
                        found.append(f"line {leaf.lineno}: {ast.unparse(leaf)}")
    return found


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name != "encoder.py"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_encoder_assigns_its_attributes(path: Path) -> None:
    """The Encoder owns its state (issue 43): other modules change it through its methods (configure, use_lora,
    keep_prefix)."""
    assert not _outside_assignments(path, _encoder_attributes()), path.relative_to(PACKAGE)


def test_the_attribute_finder_sees_a_tuple_target_and_skips_self(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("encoder.pooling = 1\na.normalize, b.head = 2, 3\nself.pooling = 4\n")
    assert _outside_assignments(sample, {"pooling", "normalize", "head"}) == [
        "line 1: encoder.pooling", "line 2: a.normalize", "line 2: b.head"]


def test_the_safety_flags_are_spelled_once() -> None:
    """--trust-remote-code and --allow-pickle: one spelling under sentadapt/ (options.py), used by every command's
    option, adapt's run spec and the errors that name them (issue 43: it was declared 5 times)."""
    for flag in ("--trust-remote-code", "--allow-pickle"):
        places = [f"{path.relative_to(PACKAGE)}:{number}" for path in SOURCES
                  for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                  if flag in line]
        assert places == ["options.py:22" if flag == "--trust-remote-code" else "options.py:23"], places


def test_no_request_type_carries_a_dict_of_any() -> None:
    """Issue 43: a request is typed (adapt's flags are config values by config key, typed by the run spec's fields;
    issue 69: no flags classes copying the option table), not a dict[str, Any] filled with own.get(...)."""
    import dataclasses as dc
    import typing

    from sentadapt.exporting.request import ExportRequest
    from sentadapt.run.dispatch import AdaptRequest
    from sentadapt.run.plan import Settings

    for request in (AdaptRequest, Settings, ExportRequest):
        hints = typing.get_type_hints(request)
        loose = [f.name for f in dc.fields(request) if hints[f.name] in (dict[str, typing.Any], typing.Any)
                 or typing.get_args(hints[f.name])[-1:] == (typing.Any,)]
        assert not loose, f"{request.__name__}: {loose}"


def test_the_walk_counts_file_changes_and_returns_to_files_already_read() -> None:
    """tools/walk.py's measure (docs/architecture.md, "Following one teacher run")."""
    from tools.walk import measure

    order = [("a.py", "f"), ("a.py", "g"), ("b.py", "h"), ("a.py", "i"), ("c.py", "j"), ("b.py", "k")]
    assert measure(order) == {"functions": 6, "stops": 4, "returns": 2, "files": 3}


def test_the_walk_counts_a_return_for_each_file_read_again() -> None:
    """tools/walk.py's measure (docs/architecture.md's walk table): a stop per file change, a return per change into
    a file already read, whichever file came in between."""
    from tools.walk import measure

    order = [("a.py", "f"), ("a.py", "g"), ("b.py", "h"), ("a.py", "i"), ("c.py", "j"), ("b.py", "k")]
    assert measure(order) == {"functions": 6, "stops": 4, "returns": 2, "files": 3}


def test_the_teachers_way_from_the_command_to_the_loss_is_read_in_at_most_12_files() -> None:
    """Issue 69: following the teacher from cli/adapt.py (its preset, source, table, blend) to train/distill.py's
    term opens at most 12 files (tools/walk.py --teacher-way, on a tiny teacher run)."""
    from tools.walk import walk

    order, way = walk(PACKAGE)
    assert {"cli/adapt.py", "teacher/table.py", "train/distill.py"} <= way
    assert len(way) <= 12, sorted(way)
    assert ("train/distill.py", "Distillation.terms") in order  # the walked run trained with the teacher's term
