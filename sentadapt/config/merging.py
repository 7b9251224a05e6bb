"""The run configuration's layers, merged in one direction into a validated RunConfig (`build_config`).

Precedence (later wins): dataclass defaults < the recipe's training defaults (its paper's settings)
< the recipe's tuned-base defaults, when the base is sentence-tuned (recipes/presets.py) < the YAML file (`--config`)
< command-line flags (`--lr`, `--batch-size`, ...) < `--set key=value`.
Unknown keys are errors that suggest the closest name; every value is coerced to its field's type and checked against
its valid range before any weights load. The resolved config is saved with every run and read back to resume it.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from sentadapt.config.schema import FLAT_KEYS, GROUPS, RunConfig, TrainConfig, group_keys
from sentadapt.errors import ConfigError
from sentadapt.options import FALSE_WORDS, TRUE_WORDS
from sentadapt.registry import one_line, unknown_name_message
from sentadapt.storage.durable import write_text_atomically

T = TypeVar("T")
# Options that studies measured and the product did not adopt, removed in issue 59, with the value that left runs as
# they are: a run saved with it resumes; with another value, or given as --set, it is a one-line error naming where
# the evidence is (docs/teacher.md, "What was tried").
REMOVED_SETTINGS = {"teacher_evidence": "off", "teacher_risk": None, "agreement_holdout": 1000,
                    "mask_neighbours": False, "distill_neighbour_share": 1.0}


def train_config(**values: Any) -> TrainConfig:
    """A TrainConfig from flat keys (`train_config(distill=1.0, lora_r=16)`), each coerced to its type."""
    return with_overrides(TrainConfig(), values, "TrainConfig")


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """Turn a YAML/CLI value into the field's type, or raise ConfigError naming the key."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        empty = value is None or (isinstance(value, str) and value.lower() in ("none", "null", ""))
        if empty and type(None) in typing.get_args(annotation):
            return None
        return coerce(name, value, options[0])
    if origin in (tuple, list):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{name}: expected a comma-separated list, got {value!r}")
        (item_type, *_) = typing.get_args(annotation) or (str,)
        converted = [coerce(name, item.strip() if isinstance(item, str) else item, item_type) for item in items]
        return tuple(converted) if origin is tuple else converted
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in TRUE_WORDS | FALSE_WORDS:
            return value.lower() in TRUE_WORDS
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not number.is_integer():
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return int(number)
    if annotation is float:
        try:
            return float(value)  # YAML reads "2e-5" as a string: accept it here
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if annotation is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        if isinstance(value, bool):  # YAML 1.1 reads a bare on/off (or yes/no) as a boolean
            return "on" if value else "off"
        return str(value)
    return value


def with_overrides(target: T, overrides: dict[str, Any], where: str) -> T:
    """A copy of the dataclass `target` with fields from a mapping, types coerced; unknown keys are errors. A
    TrainConfig takes flat keys (FLAT_KEYS) and, in YAML, a group as a mapping of its fields (`lora: {r: 16}`)."""
    if isinstance(target, TrainConfig):
        return _train_with_overrides(target, overrides, where)  # type: ignore[return-value]
    known = {f.name: (type(target), f.name) for f in dataclasses.fields(target)}  # type: ignore[arg-type]
    return dataclasses.replace(target, **_coerced(overrides, known, where))  # type: ignore[type-var]


def _coerced(values: dict[str, Any], known: dict[str, tuple[Any, str]], where: str) -> dict[str, Any]:
    """Each value coerced to its field's type; `known`: each key's dataclass and field. A removed setting
    (REMOVED_SETTINGS) at the value that changed nothing is dropped; an unknown key is an error."""
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        if key in REMOVED_SETTINGS and key not in known:
            check_removed(f"{where}: {key}", key, value)
            continue  # a run saved before the option left, with the value that changed nothing
        if key not in known:
            raise ConfigError(f"{where}: " + unknown_name_message("key", key, list(known)))
        owner, field_name = known[key]
        coerced[key] = coerce(f"{where}: {key}", value, typing.get_type_hints(owner)[field_name])
    return coerced


def _flat(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Training values by flat key: a group written out (`lora: {r: 16}`) by its fields' keys (an unknown field is
    an error naming `where`); other keys as they are."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if name in GROUPS and isinstance(value, dict):  # a group written out: its fields by their own names
            fields = group_keys(name)
            for inner, inner_value in value.items():
                if inner not in fields:
                    raise ConfigError(f"{where}: {name}: " + unknown_name_message("key", inner, list(fields)))
                flat[fields[inner]] = inner_value
        else:
            flat[name] = value
    return flat


# each flat key's dataclass and field
_TRAIN_FIELDS = {key: (TrainConfig if group is None else GROUPS[group], name)
                 for key, (group, name) in FLAT_KEYS.items()}


def _train_with_overrides(train: TrainConfig, overrides: dict[str, Any], where: str) -> TrainConfig:
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for name, converted in _coerced(_flat(overrides, where), _TRAIN_FIELDS, where).items():
        group, field_name = FLAT_KEYS[name]
        if group is None:
            top[field_name] = converted
        else:
            grouped.setdefault(group, {})[field_name] = converted
    for group, changes in grouped.items():
        top[group] = dataclasses.replace(getattr(train, group), **changes)
    return dataclasses.replace(train, **top)


def check_removed(where: str, key: str, value: Any) -> None:
    """A removed option (REMOVED_SETTINGS) at the value that changed nothing passes (a saved run resumes); any other
    value is one line saying it is gone and where its evidence is."""
    default = REMOVED_SETTINGS[key]
    if value is None or value == default or (str(value).lower() in ("off", "false", "none") and not default):
        return
    if default is not None and not isinstance(default, bool) and _same_number(value, default):
        return
    raise ConfigError(f"{where}: {key} was removed (studies measured it and did not adopt it: docs/teacher.md, "
                      "\"What was tried\"); drop it (a run trained with it resumes only with the sentadapt that "
                      "trained it)")


def _same_number(value: Any, default: Any) -> bool:
    try:
        return float(value) == float(default)
    except (TypeError, ValueError):
        return False


def parse_set_options(items: list[str]) -> dict[str, str]:
    """`--set key=value` pairs → dict (values stay strings; the field type converts them)."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set: '{one_line(item)}' is not key=value (e.g. --set temperature=0.05)")
        parsed[key.strip()] = value.strip()
    return parsed


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    from sentadapt.storage.memory import same_file_once

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config: {path}: no such file")
    try:  # parsed once per process while unchanged (the recipe's name, auto's candidates and the config read it)
        data = copy.deepcopy(same_file_once(path, lambda p: yaml.safe_load(p.read_text(encoding="utf-8")))) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML ({getattr(error, 'problem', error)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with recipe, train and recipe_args")
    allowed = {"recipe", "version", "train", "recipe_args", "description", "candidates"}  # candidates: recipe auto
    run_fields = {item.name: item for item in dataclasses.fields(RunConfig) if item.name not in allowed}
    keep = "a --config file holds recipe, train and recipe_args (of a --dry-run's output, keep those)"
    for key in data:  # a dry run's whole output (`--dry-run > run.yaml`) given back as a config file
        if key in run_fields and run_fields[key].metadata.get("recorded"):
            raise ConfigError(f"{path}: '{key}' is what a run records, not a setting: delete it; {keep}")
        if key in run_fields:
            where = "its CORPUS arguments" if key == "corpus" else f"--{key.replace('_', '-')}"
            raise ConfigError(f"{path}: '{key}' is a run option, not a config file's: give it on the command line "
                              f"({where}); {keep}")
        if key not in allowed:
            raise ConfigError(f"{path}: " + unknown_name_message("top-level key", key, sorted(allowed)))
    return data


def split_set_options(options: dict[str, Any], recipe_config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Route bare `--set` keys: recipe fields first, then training fields; `train.x`/`recipe.x` are explicit."""
    recipe_fields = {f.name for f in dataclasses.fields(recipe_config)}
    train_fields = set(FLAT_KEYS)
    to_recipe: dict[str, Any] = {}
    to_train: dict[str, Any] = {}
    for key, value in options.items():
        scope, dot, name = key.partition(".")
        if dot and scope == "train":
            to_train[name] = value
        elif dot and scope in ("recipe", "recipe_args"):
            to_recipe[name] = value
        elif key in recipe_fields:
            to_recipe[key] = value
        elif key in train_fields:
            to_train[key] = value
        elif key in REMOVED_SETTINGS:
            check_removed(f"--set {key}", key, value)  # the value that changed nothing: accepted, as before
        else:
            raise ConfigError("--set: " + unknown_name_message("key", key, sorted(recipe_fields | train_fields)))
    return to_recipe, to_train


def build_config(
    recipe_name: str,
    recipe_config_class: type,
    recipe_train_defaults: dict[str, Any],
    yaml_path: str | Path | None,
    flag_overrides: dict[str, Any],
    set_options: list[str],
    preset_values: dict[str, Any] | None = None,
    set_values: dict[str, Any] | None = None,
    *,
    yaml_train: dict[str, Any] | None = None,
    candidate_values: dict[str, Any] | None = None,
    **run_fields: Any,
) -> RunConfig:
    """Merge defaults < recipe training defaults < preset values < YAML < flags < --set < a candidate's own values
    into a validated RunConfig whose `sources` say which layer set each value. `preset_values` (a recipe's tuned-base
    defaults) may name training or recipe fields; `set_values` are typed `--set` values (the API's config keywords).
    `yaml_train`: the `train:` values of a `--recipe auto` config file (`yaml_path` names it, read already)."""
    merged = _Merge(TrainConfig(), recipe_config_class())
    merged.apply(recipe_train_defaults, {}, f"recipe {recipe_name} defaults", PAPER)
    preset = run_fields.get("preset") or {}
    preset_recipe, preset_train = split_set_options(preset_values or {}, merged.recipe_args)
    merged.apply(preset_train, preset_recipe, f"recipe {recipe_name} tuned_base_defaults",
                 f"{PRESET} {preset.get('name', '')}".strip())
    if yaml_train is not None:
        merged.apply(yaml_train, {}, "option", Path(yaml_path or "--config").name)
    elif yaml_path is not None:
        data = load_yaml(yaml_path)
        if data.get("recipe", recipe_name) != recipe_name:
            raise ConfigError(
                f"{yaml_path}: is a config for recipe '{data['recipe']}', but --recipe is '{recipe_name}'"
            )
        if "candidates" in data:
            raise ConfigError(f"{yaml_path}: candidates: a list for recipe: auto; drop it, or set recipe: auto")
        if "recipe" in data:  # the file names the recipe (a --recipe flag, if given, says the same)
            merged.sources["recipe"] = Path(yaml_path).name
        merged.apply(data.get("train") or {}, data.get("recipe_args") or {}, f"{yaml_path}: train",
                     Path(yaml_path).name, recipe_where=f"{yaml_path}: recipe_args")
    merged.apply({k: v for k, v in flag_overrides.items() if v is not None}, {}, "option", FLAG)
    to_recipe, to_train = split_set_options({**parse_set_options(set_options), **(set_values or {})},
                                            merged.recipe_args)
    merged.apply(to_train, to_recipe, "--set", SET)
    candidate_recipe, candidate_train = split_set_options(candidate_values or {}, merged.recipe_args)
    merged.apply(candidate_train, candidate_recipe, "--set", CANDIDATE)
    merged.yield_to_given_values()
    merged.train.validate()
    merged.recipe_args.validate()
    return RunConfig(recipe=recipe_name, train=merged.train, recipe_args=merged.recipe_args, sources=merged.sources,
                     **run_fields)


# Where a value came from, as `adapt --dry-run` shows it (a layer's name; the preset's is "preset NAME" and the
# --config file's its file name)
DEFAULT, PAPER, FLAG, SET, CANDIDATE = "default", "paper", "flag", "--set", "candidate"
PRESET = "preset"  # the preset layer's name begins with it: "preset tuned-base"


# A preset value that would override a value the user gives (YAML, flag, --set, candidate) gives way to it: the
# teacher run's one evaluation per pass replaces eval_every (evals_per_pass > 0 wins), and its length by examples
# makes epochs a floor (passes = max(epochs, min(max_epochs, min_examples / sentences))). preset key → the given key
YIELDS_TO_GIVEN = {"evals_per_pass": "eval_every", "min_examples": "epochs"}
YIELDED = "off:"  # how a yielded value's source starts: "off: eval_every given (flag)"


def _source_keys(recipe_args: Any) -> list[str]:
    """The names `RunConfig.sources` gives the training and recipe values: "train.KEY", "recipe_args.FIELD"."""
    return [*(f"train.{key}" for key in FLAT_KEYS), *(f"recipe_args.{f.name}" for f in dataclasses.fields(recipe_args))]


class _Merge:
    """The training and recipe settings as the layers are applied, lowest first, and the layer that set each
    (`sources`: "train.KEY" or "recipe_args.KEY" → the layer's name)."""

    def __init__(self, train: TrainConfig, recipe_args: Any) -> None:
        self.train = train
        self.recipe_args = recipe_args
        self.sources = dict.fromkeys(_source_keys(recipe_args), DEFAULT)

    def apply(self, train: dict[str, Any], recipe: dict[str, Any], where: str, source: str, *,
              recipe_where: str | None = None) -> None:
        # the recipe's values first: of errors in both, the recipe's is the one named
        self.recipe_args = with_overrides(self.recipe_args, recipe, recipe_where or where)
        self.train = with_overrides(self.train, train, where)
        self.sources.update({f"recipe_args.{key}": source for key in recipe if f"recipe_args.{key}" in self.sources})
        self.sources.update({f"train.{key}": source for key in _flat(train, where) if f"train.{key}" in self.sources})

    def yield_to_given_values(self) -> None:
        """Turn off each preset value of YIELDS_TO_GIVEN whose key the user gave (`--eval-every 50` on a teacher run
        evaluates every 50 steps; `--epochs 1` trains one pass)."""
        for preset_key, given_key in YIELDS_TO_GIVEN.items():
            given = self.sources[f"train.{given_key}"]
            user_gave = given not in (DEFAULT, PAPER) and not given.startswith(PRESET)
            if user_gave and self.sources[f"train.{preset_key}"].startswith(PRESET):
                self.train = with_overrides(self.train, {preset_key: 0}, f"{given_key} given")
                self.sources[f"train.{preset_key}"] = f"{YIELDED} {given_key} given ({given})"


def dry_run_yaml(config: RunConfig) -> str:
    """The config as `adapt --dry-run` prints it: config.yaml's mapping, each run option, training and recipe value
    followed by the layer it came from (`# default`, `# paper`, `# preset tuned-base`, the --config file's name,
    `# flag`, `# --set`, `# candidate`). The comments leave it valid YAML that loads as the config."""
    import yaml

    lines = yaml.safe_dump(config.to_dict(), sort_keys=False, width=_NO_WRAP).splitlines()
    keyed: dict[int, str] = {}  # line number → the "train.KEY", "recipe_args.KEY" or run option it starts
    section = ""
    for number, (line, following) in enumerate(zip(lines, [*lines[1:], None])):
        if line and not line.startswith(" "):  # a top-level key (an empty line is inside a text with line breaks)
            section = line.partition(":")[0]
        key, colon, _ = line[2:].partition(":")
        # not a value that goes on over the next lines (a text with a line break): a # there would be its text
        whole = following is None or (following != "" and not following.startswith("   "))
        if section in ("train", "recipe_args") and line.startswith("  ") and colon and key.isidentifier() and whole:
            keyed[number] = f"{section}.{key}"
        elif line and not line.startswith(" ") and section in config.sources and whole:  # a run option
            keyed[number] = section
    # the comments in a column per block (the run's options, train, recipe_args): a long path aligns only its own
    widths: dict[str, int] = {}
    for number, key in keyed.items():
        block = key.partition(".")[0] if "." in key else ""
        widths[block] = max(widths.get(block, 0), len(lines[number]) + 2)
    for number, key in keyed.items():
        width = widths[key.partition(".")[0] if "." in key else ""]
        lines[number] = f"{lines[number]:<{width}}# {config.sources.get(key, DEFAULT)}"
    return "\n".join([_SOURCES_NOTE, *lines, ""])


_SOURCES_NOTE = ("# where each option, training and recipe value came from, later layers winning: default < paper <\n"
                 "# preset < the --config file < flag < --set < a --recipe auto candidate's own")
_NO_WRAP = 1 << 30  # a value on one line, so that its comment follows it (yaml wraps long scalars at 80 columns)


def save_run_config(config: RunConfig, path: Path) -> None:
    import yaml

    write_text_atomically(path, yaml.safe_dump(config.to_dict(), sort_keys=False))


def load_run_config(path: Path, recipe_configs: dict[str, type]) -> RunConfig:
    """Read a run's saved config.yaml back (for --resume): the saved values are authoritative."""
    import yaml

    if not path.is_file():
        raise ConfigError(f"--resume: {path} not found; is this a sentadapt run directory?")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    train = TrainConfig()
    train = with_overrides(train, data.get("train") or {}, f"{path}: train")
    recipe_class = recipe_configs.get(data["recipe"])
    if recipe_class is None:
        raise ConfigError(f"{path}: unknown recipe '{data['recipe']}'")
    recipe_args = recipe_class()
    recipe_args = with_overrides(recipe_args, data.get("recipe_args") or {}, f"{path}: recipe_args")
    # every saved field as written (not coerced: "none" is a value of dev and prompt, unlike None); a field a run
    # saved before it existed gets today's default, except the prompt: runs saved before prompts trained without one
    saved = {f.name: data[f.name] for f in dataclasses.fields(RunConfig)
             if f.name in data and f.name not in ("train", "recipe_args")
             and (data[f.name] is not None or f.default is None)}
    saved.setdefault("prompt", "none")
    # a resumed run's values all come from its config.yaml, whatever layer set them when it started
    sources = dict.fromkeys([*saved, *_source_keys(recipe_args)], path.name)
    return RunConfig(train=train, recipe_args=recipe_args, sources=sources, **saved)
