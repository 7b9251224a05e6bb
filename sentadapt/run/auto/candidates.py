"""`adapt --recipe auto`: which candidates to train, and each one's RunConfig.

A candidate is a registered recipe with optional settings of its own (`--candidates consert,consert:lr=1e-5`).
Without `--candidates` the inputs decide: plain text → every recipe that trains on text (ConSERT, SG-OPT);
a labelled pairs file among the inputs (NLI, scored or two-column pairs) → the recipes that train on pairs
(CLSR) too, on those files only. Each candidate's config is built exactly as a single run's would be
(defaults < the recipe's paper settings < the preset that applies to the base < the `--config` file's
`train:` < flags < `--set` < the candidate's own settings), so a candidate equals `adapt --recipe NAME` with
the same flags. Every candidate trains the same number of optimizer steps with the same seed.

The run directory: OUTPUT/auto.yaml (the plan), OUTPUT/candidates/NAME/ (one full run each, resumable),
OUTPUT/base_dev.json (the base model's dev outputs, scored once), and, when a candidate is chosen, its model
at the top of OUTPUT with the choice in OUTPUT/metrics.json (run/auto/choice.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.config.merging import load_yaml, parse_set_options, with_overrides
from sentadapt.config.schema import RunConfig, TrainConfig
from sentadapt.errors import ConfigError
from sentadapt.recipes import RECIPES
from sentadapt.recipes.base import PAIRS, TEXT
from sentadapt.registry import one_line
from sentadapt.run.plan import Settings
from sentadapt.storage.run_folder import RunDir

AUTO = "auto"
_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Candidate:
    recipe: str
    settings: tuple[tuple[str, str], ...] = ()  # `--set`-style key=value pairs, for this candidate only

    @property
    def spec(self) -> str:
        """As written on the command line: consert or consert:lr=1e-5:temperature=0.05."""
        return ":".join([self.recipe, *(f"{key}={value}" for key, value in self.settings)])

    @property
    def name(self) -> str:
        """Its folder under OUTPUT/candidates/: consert, consert-lr=1e-5 (only [A-Za-z0-9._=-])."""
        parts = [self.recipe, *(f"{key}={_NAME_CHARACTERS.sub('_', value)}" for key, value in self.settings)]
        return "-".join(parts)

    def set_options(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.settings]


@dataclass(frozen=True)
class Inputs:
    """The positional inputs of `adapt`, split by what they hold."""

    texts: tuple[str, ...]  # one sentence per line (or a text column, or a Hub dataset)
    pairs: tuple[str, ...]  # labelled pairs files (what CLSR trains on)

    def for_recipe(self, recipe: str) -> list[str]:
        return list(self.pairs if trains_on(recipe) == PAIRS else self.texts)


def trains_on(recipe: str) -> str:
    """TEXT or PAIRS: the recipe's declared `trains_on`."""
    return RECIPES.get(recipe).spec.trains_on


def _entries(value: str) -> list[str]:
    """The candidates of one comma-separated value. A comma also separates a list setting's items
    (`consert:views=token-cutoff,feature-cutoff,sg-opt`): a piece that is neither a recipe nor has a setting of its
    own continues the setting before it."""
    entries: list[str] = []
    for piece in (part.strip() for part in value.split(",")):
        continues = entries and "=" in entries[-1] and ":" not in piece and "=" not in piece
        if continues and piece not in RECIPES:
            entries[-1] += f",{piece}"
        elif piece:
            entries.append(piece)
    return entries


def parse_candidates(values: Sequence[str], where: str = "--candidates") -> list[Candidate]:
    """`consert, sg-opt:lr=1e-5:distill=0` (comma-separated, the option repeatable) → candidates; errors name
    the faulty entry and say what to write instead."""
    candidates: list[Candidate] = []
    for value in values:
        for entry in _entries(str(value)):
            recipe, *settings = (piece.strip() for piece in entry.split(":"))
            if recipe == AUTO:
                raise ConfigError(f"{where}: '{AUTO}' is not a candidate; list recipes ({', '.join(RECIPES.names())})")
            try:
                RECIPES.get(recipe)
            except ConfigError as error:
                raise ConfigError(f"{where}: {error}") from None
            pairs = []
            for setting in settings:
                key, sep, setting_value = setting.partition("=")
                if not sep or not key.strip():
                    raise ConfigError(f"{where}: '{one_line(entry)}': '{one_line(setting)}' is not key=value "
                                      "(e.g. consert:lr=1e-5:temperature=0.05)")
                pairs.append((key.strip(), setting_value.strip()))
            candidates.append(Candidate(recipe, tuple(pairs)))
    names = [candidate.name for candidate in candidates]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise ConfigError(f"{where}: '{repeated}' is listed twice; each candidate once")
    if not candidates and values:
        raise ConfigError(f"{where}: no candidate given; e.g. --candidates consert,sg-opt")
    return candidates


def split_inputs(corpus: Sequence[str]) -> Inputs:
    """Pairs files (by their header or first record, `positives.is_pair_file`) apart from the text corpora."""
    from sentadapt.data.positives import is_pair_file

    pairs = [path for path in corpus if Path(path).is_file() and is_pair_file(Path(path))]
    return Inputs(tuple(path for path in corpus if path not in pairs), tuple(pairs))


def plan_candidates(requested: Sequence[Candidate], inputs: Inputs) -> list[Candidate]:
    """The candidates to train: the requested ones (each must have its kind of input), else every recipe the
    inputs allow, in registry order."""
    if not requested:
        chosen = [Candidate(name) for name in _recipe_order() if inputs.for_recipe(name)]
        if not chosen:
            raise ConfigError("--recipe auto: no input any recipe trains on; give text files (one sentence per line) "
                              "and/or labelled pairs files")
        return chosen
    for candidate in requested:
        if not inputs.for_recipe(candidate.recipe):
            raise ConfigError(_missing_input(candidate))
    return list(requested)


def _recipe_order() -> list[str]:
    """Text recipes first (they share the corpus cache), then pairs recipes; alphabetical within each."""
    names = RECIPES.names()
    return [n for n in names if trains_on(n) == TEXT] + [n for n in names if trains_on(n) == PAIRS]


def _missing_input(candidate: Candidate) -> str:
    if trains_on(candidate.recipe) == PAIRS:
        return (f"--candidates {candidate.spec}: {candidate.recipe} trains on labelled pairs; add a pairs file to the "
                "inputs (NLI .jsonl with labels, scored pairs sentence1/sentence2/score, or two columns "
                "sentence1, sentence2)")
    return (f"--candidates {candidate.spec}: {candidate.recipe} trains on plain text; add a text file (one sentence "
            "per line) to the inputs")


def auto_yaml_settings(path: str | Path | None) -> tuple[dict[str, Any], list[str]]:
    """A `--config` file with `recipe: auto`: its `train:` values (checked here, so errors name the file) and its
    `candidates:` list. `recipe_args` belong to one recipe: per-candidate settings go in `candidates:`."""
    if path is None:
        return {}, []
    data = load_yaml(path)
    if data.get("recipe_args"):
        raise ConfigError(f"{path}: recipe_args apply to one recipe, not to recipe: auto; give each candidate its "
                          "settings in candidates: (e.g. - consert:temperature=0.05)")
    train = data.get("train") or {}
    with_overrides(TrainConfig(), train, f"{path}: train")  # checked here, so an error names the file
    listed = data.get("candidates") or []
    if not isinstance(listed, list):
        raise ConfigError(f"{path}: candidates: expected a list such as [consert, 'sg-opt:lr=1e-5']")
    return dict(train), [str(item) for item in listed]


def candidate_config(candidate: Candidate, inputs: Inputs, output: Path, settings: Settings,
                     resolve_base: Callable[[], Any], yaml_train: dict[str, Any]) -> RunConfig:
    """The candidate's RunConfig from the one assembler (run/plan.py), as `adapt --recipe RECIPE` with the same
    flags builds it, its own settings on top; an error names the candidate."""
    from sentadapt.run.plan import assemble

    try:
        return assemble(candidate.recipe, settings, resolve_base, corpus=inputs.for_recipe(candidate.recipe),
                        output=str(RunDir(output).candidate(candidate.name).path), yaml_train=yaml_train,
                        candidate_values=parse_set_options(candidate.set_options()))
    except ConfigError as error:
        raise ConfigError(f"candidate {candidate.spec}: {error}") from None


def check_budget(configs: dict[str, RunConfig]) -> None:
    """Every candidate (its spec → its config) the same number of steps and seed: a comparison at equal budget."""
    if any(config.train.max_steps == 0 for config in configs.values()):
        raise ConfigError("--recipe auto: give --max-steps N (every candidate trains the same number of optimizer "
                          "steps; epochs would give each recipe a different budget)")
    for field in ("max_steps", "seed"):
        values = {getattr(config.train, field) for config in configs.values()}
        if len(values) > 1:
            shown = ", ".join(f"{spec} {getattr(config.train, field)}" for spec, config in configs.items())
            raise ConfigError(f"--recipe auto: candidates must share {field} ({shown}); set it with a flag, not "
                              "per candidate")
    for spec, config in configs.items():
        # a staged recipe (ConSERT's sup-unsup, joint-unsup) trains --max-steps in each of its stages: 2 stages of
        # 10 steps are 20 steps against the others' 10, a budget the comparison would not say it gave
        stages = [stage.name for stage in RECIPES.get(config.recipe).stages(config.recipe_args)]
        if len(stages) > 1:
            steps = config.train.max_steps
            raise ConfigError(
                f"--recipe auto: candidate {spec} trains {len(stages)} stages ({', '.join(stages)}) of {steps} "
                f"steps each, {len(stages) * steps} in all against {steps} for a single-stage candidate; compare "
                f"one stage's mode (e.g. mode=sup or mode=unsup), or train the staged mode with adapt --recipe "
                f"{config.recipe}")
