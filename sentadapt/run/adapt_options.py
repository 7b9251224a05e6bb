"""The `adapt` command's options, declared once: what `sentadapt adapt` offers as flags, what `sentadapt.adapt()`
takes as keywords, and where each value lands in the run's config.

A flag that sets a config field names the field (`target` "train" → `TrainConfig`, "run" → `RunConfig`): its type,
default and help come from that field, so they are written once, in `config/schema.py`; the command line's default
is None ("the config decides": defaults < the recipe's paper settings < the preset < `--config` < flags < `--set`),
except for the run fields whose default the command shows (`--decision`; `CONFIG_DEFAULT`: the field's). The other
options steer the request (`--resume`, `--dry-run`, ...) and are declared here with their type and default. From
this one table:

- the CLI's `adapt` command is generated (cli/adapt.py: its signature is built from this table), options in this
  order;
- `sentadapt.adapt()`'s keywords are checked against it (tests/run/test_adapt_options.py: names and defaults), and every
  other `TrainConfig` or recipe field is a keyword too (`adapt(..., distill_kind="mse")` = `--set distill_kind=mse`);
- `sentadapt.adapt()`'s signature is generated from it as the command's is (run/dispatch.py);
- the given values are routed (`route`, called by run/dispatch.py's `request_from` for the CLI and the API alike):
  a config option's value by its config key into the request's `flags`, the others to the request, so no list of
  options is written twice.

A new config field is a `--set` key, an API keyword and a config.yaml entry with nothing else to write; a new flag
for it is one `AdaptOption` here.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.config.schema import FLAT_KEYS, RunConfig, help_of, key_field, key_type
from sentadapt.errors import ConfigError
from sentadapt.options import ALLOW_PICKLE, ALLOW_PICKLE_HELP, TRUST_REMOTE_CODE, TRUST_REMOTE_CODE_HELP

TRAIN, RUN, REQUEST = "train", "run", "request"  # where an option's value goes
CONFIG_DEFAULT = object()  # a RUN option's default: its RunConfig field's (shown by --help, given to the config)


def on_off(option: str, value: str | None) -> bool | None:
    """An on|off flag's value (None: not given, the config decides)."""
    if value is None:
        return None
    if value not in ("on", "off"):
        raise ConfigError(f"{option}: '{value}' is not one of on, off")
    return value == "on"


def sizes(option: str, value: str | None) -> tuple[int, ...] | None:
    """A comma list of widths (`--matryoshka 384,192,96`); None: not given."""
    from sentadapt.config.merging import coerce

    return None if value is None else coerce(option, value, tuple[int, ...])


@dataclass(frozen=True)
class AdaptOption:
    """One option of `adapt`: its Python name (the API keyword), its flag, help, and where its value goes."""

    name: str
    flag: str  # "--lr"; "" for the corpus argument
    help: str
    target: str = REQUEST  # TRAIN | RUN: the config field `name` | REQUEST: the request's own
    annotation: Any = None  # REQUEST options: the type (config options take their field's)
    default: Any = None  # REQUEST options, and RUN options whose command-line default is not None
    short: str = ""  # "-o"
    metavar: str | None = None
    envvar: str | None = None
    # the command line's type when it differs from the value's (`--tf32 on|off` for a bool), and the conversion
    cli_type: Any = None
    from_cli: Callable[[str, Any], Any] | None = None
    names_a_path: bool = False  # a RUN option naming a file or folder: the API takes a Path too
    shown_default: str | None = None  # what --help shows as the default where the command line's is None

    def __post_init__(self) -> None:
        if self.default is CONFIG_DEFAULT:
            object.__setattr__(self, "default", _RUN_FIELDS[self.name].default)

    @property
    def value_type(self) -> Any:
        """The option's type: the config field's (None allowed: not given) or the declared one."""
        if self.target == REQUEST:
            return self.annotation
        field_type = key_type(self.name) if self.target == TRAIN else typing.get_type_hints(RunConfig)[self.name]
        return field_type if self.target == RUN and self.default is not None else field_type | None

    @property
    def api_type(self) -> Any:
        """What `sentadapt.adapt()` takes: the value's type, a Path too where the option names a file or folder,
        a list of sizes also as the command line's comma list ("384,192,96")."""
        kind = self.value_type
        if self.from_cli is sizes:
            kind = kind | str
        return kind | Path if self.names_a_path else kind

    @property
    def api_name(self) -> str:
        """How a type error names the option: its flag (CORPUS for the corpus)."""
        return self.flag or "CORPUS"


_RUN_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}


def _option(name: str, flag: str, help: str, **settings: Any) -> AdaptOption:
    return AdaptOption(name, flag, help, **settings)


def _train(name: str, flag: str, **settings: Any) -> AdaptOption:
    """A flag for a training setting: its help is the setting's (config/schema.py's `setting`)."""
    help = _field_help(TRAIN, name)
    return AdaptOption(name, flag, help, target=TRAIN, shown_default=_fixed_default(name, help), **settings)


def _fixed_default(name: str, help: str) -> str | None:
    """The default `--help` shows for a training flag: its field's, where no recipe's or preset's defaults set the key
    (else the run's config decides, and the help says where it is shown) and the help does not state it itself."""
    default = key_field(name).default
    nothing_to_add = "default" in help.lower() or isinstance(default, bool) or default in ((), None)
    return None if nothing_to_add or name in _keys_set_by_recipes() else str(default)


@functools.cache
def _keys_set_by_recipes() -> frozenset[str]:
    """The training keys a recipe's defaults (paper, tuned base, teacher run) or a teacher run's preset set."""
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import TEACHER_DEFAULTS

    specs = [RECIPES.get(recipe).spec for recipe in RECIPES.names()]
    return frozenset(TEACHER_DEFAULTS).union(*(spec.train_defaults | spec.tuned_base_defaults | spec.teacher_defaults
                                               for spec in specs))


def _run(name: str, flag: str, **settings: Any) -> AdaptOption:
    """A flag for a RunConfig field: its help is the field's."""
    return AdaptOption(name, flag, _field_help(RUN, name), target=RUN, **settings)


def _field_help(target: str, name: str) -> str:
    described = help_of(key_field(name) if target == TRAIN else _RUN_FIELDS[name])
    if not described:
        raise TypeError(f"{name}: a flag's field needs its description; declare it as setting(default, help) in "
                        "config/schema.py")
    return described


def _recipe_choices() -> str:
    """--recipe's choices as its help lists them: every registered recipe, the default first."""
    from sentadapt.recipes import DEFAULT_RECIPE, RECIPES

    others = [name for name in RECIPES.names() if name != DEFAULT_RECIPE]
    return " | ".join([f"{DEFAULT_RECIPE} (default, or the --config file's recipe)", *others])


ADAPT_OPTIONS: tuple[AdaptOption, ...] = (
    _option("corpus", "", "Text files (one sentence per line; .gz, .jsonl .csv .tsv .parquet with --text-column), "
            "folders of them or a Hub dataset id. Not needed with --resume.",
            annotation=str | Path | Sequence[str | Path], cli_type=list[str], default=()),
    _option("recipe", "--recipe", f"{_recipe_choices()} | auto (train every recipe the inputs allow, keep one only if "
            "the dev set proves it; needs --dev and --max-steps).",
            annotation=str | None),
    _option("candidates", "--candidates", "--recipe auto: the candidates, comma-separated; each a recipe name, "
            "optionally with settings after colons (e.g. consert, consert:lr=1e-5, sg-opt written without spaces). "
            "Default: every recipe the inputs allow.", annotation=Sequence[str], cli_type=list[str], default=(),
            metavar="<spec>"),
    _option("base", "--base", "Base model: folder or Hub id (default: named above).", annotation=str | None),
    _run("teacher", "--teacher", names_a_path=True),
    _option("output", "--output", "Run directory (becomes a sentence-transformers model).", short="-o",
            annotation=str | Path, cli_type=Path, default=...),
    _option("config", "--config", "Recipe YAML, e.g. recipes/consert.yaml.", annotation=str | Path | None,
            cli_type=Path | None),
    _option("set_options", "--set", "Override any config key: --set temperature=0.05", annotation=Sequence[str],
            cli_type=list[str], default=(), metavar="<k=v>"),
    _option("preset", "--preset", "Which defaults apply: auto (default: tuned-base when --base is a "
            "sentence-transformers model, else paper) | paper | tuned-base.", annotation=str | None),
    _run("dev", "--dev", names_a_path=True),
    _run("dev_metric", "--dev-metric"),
    _run("data_dir", "--data-dir", envvar="SENTADAPT_DATA_DIR", cli_type=Path | None, names_a_path=True),
    _run("text_column", "--text-column"),
    _run("prompt", "--prompt"),
    _run("encoding_errors", "--encoding-errors", default=CONFIG_DEFAULT),
    _run("num_proc", "--num-proc"),
    _run("streaming", "--streaming", default=CONFIG_DEFAULT),
    _train("max_steps", "--max-steps"),
    _train("epochs", "--epochs"),
    _train("batch_size", "--batch-size"),
    _train("lr", "--lr"),
    _train("max_length", "--max-length"),
    _train("grad_accum", "--grad-accum"),
    _train("mixed_precision", "--mixed-precision"),
    _train("tf32", "--tf32", cli_type=str | None, from_cli=on_off),
    # named like --grad-accum (HF: gradient_checkpointing); a switch: absent means the config decides
    _train("gradient_checkpointing", "--grad-checkpointing", cli_type=bool,
           from_cli=lambda _option, value: value or None),
    _option("lora", "--lora", "Train LoRA adapters, the base frozen (pip install peft): r=16, alpha=32, dropout=0, "
            "targets=attention | all-linear | query+value, comma-separated, any subset, or on. The model saved is "
            "merged; its lora-adapter/ folder holds the adapters alone.", annotation=str | None),
    _train("matryoshka", "--matryoshka", cli_type=str | None, from_cli=sizes, metavar="<sizes>"),
    _train("sizes", "--sizes", cli_type=str | None, from_cli=sizes, metavar="<sizes>"),
    _train("eval_every", "--eval-every"),
    _train("checkpoint_every", "--checkpoint-every"),
    _train("patience", "--patience"),
    _train("seed", "--seed"),
    _train("report_to", "--report-to"),
    _option("resume", "--resume", "Continue the run in --output (or `--resume RUN_DIR`) from its last checkpoint. "
            "--resume auto: resume when --output holds a checkpoint, else start fresh; a finished run exits 0 "
            "(rerun the same command after preemption).", annotation=str | bool | None, cli_type=str | None,
            metavar="[auto]"),
    _option("overwrite", "--overwrite", "Replace an existing non-empty --output.", annotation=bool, default=False),
    _option("dry_run", "--dry-run", "Resolve and print the config, then exit (no weights).", annotation=bool,
            default=False),
    _option("trust_remote_code", TRUST_REMOTE_CODE, TRUST_REMOTE_CODE_HELP, annotation=bool, default=False),
    _option("allow_pickle", ALLOW_PICKLE, ALLOW_PICKLE_HELP, annotation=bool, default=False),
    _run("decision", "--decision", default=CONFIG_DEFAULT),
    _run("risk", "--risk", default=CONFIG_DEFAULT),
    _option("require_improvement", "--require-improvement", "Exit with code 3 when the decision is keep-base: no "
            "checkpoint beats the base model on the dev set, or the evidence does not pass the --decision rule. "
            "For pipelines.", annotation=bool, default=False),
    _option("plot", "--plot", "Write RUN/curve.png: the dev score at each evaluation with its Δ's 95 % CI over the "
            "base, and the training loss (needs matplotlib).", annotation=bool, default=False),
)
OPTIONS_BY_NAME = {option.name: option for option in ADAPT_OPTIONS}
# RunConfig fields that `adapt` fills itself rather than from an option of the same name
_FILLED_BY_ADAPT = {"recipe", "base", "corpus", "output", "preset", "corpus_sha256", "train", "recipe_args",
                    "sources"}


def config_keys() -> list[str]:
    """Every key `--set` accepts outside a recipe's own: the training settings' flat keys (config.FLAT_KEYS)."""
    return list(FLAT_KEYS)


def route(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of ADAPT_OPTIONS split by where they go: (the config options given, by config key — a TrainConfig
    flat key or a RunConfig field; None is not given —, the request's own)."""
    config: dict[str, Any] = {}
    request: dict[str, Any] = {}
    for option in ADAPT_OPTIONS:
        if option.name not in values:
            continue
        value = values[option.name]
        if option.target == REQUEST:
            request[option.name] = value
        elif value is not None:
            config[option.name] = str(value) if isinstance(value, Path) else value
    return config, request


def from_command_line(values: Mapping[str, Any]) -> dict[str, Any]:
    """The command line's values as the API takes them (`--tf32 on` → True, an absent switch → None)."""
    return {name: (convert(OPTIONS_BY_NAME[name].flag, value)
                   if (convert := OPTIONS_BY_NAME[name].from_cli) is not None else value)
            for name, value in values.items()}


def resume_folder_as_output(args: list[str]) -> list[str]:
    """`adapt --resume runs/x` with no --output, runs/x a run folder: `--resume --output runs/x` (how transformers'
    --resume_from_checkpoint names what it continues); any other command line as it is."""
    from sentadapt.storage.run_folder import is_run_folder

    given = args[:args.index("--")] if "--" in args else args
    if "--resume" not in given or any(arg == "--output" or arg.startswith(("--output=", "-o")) for arg in given):
        return args
    at = given.index("--resume") + 1
    if at < len(given) and is_run_folder(Path(given[at])):
        return [*args[:at], "--output", *args[at:]]
    return args


def run_fields_without_option() -> list[str]:
    """RunConfig fields no option sets (checked by tests/run/test_adapt_options.py: each is filled by adapt itself)."""
    optioned = {option.name for option in ADAPT_OPTIONS if option.target == RUN}
    return [name for name in _RUN_FIELDS if name not in optioned | _FILLED_BY_ADAPT]
