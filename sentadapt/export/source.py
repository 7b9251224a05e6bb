"""What to export: a model folder or Hub id, or a run directory at its best, last or a given step.

A run directory's top level is the published (best) model. Checkpoints hold the state dict of the
whole training module (`encoder.*` plus the recipe's training-only `heads.*`); the encoder part is
loaded onto the published model's layout (same pooling, same Dense head — CLSR's MLP is
`encoder.head.N`), and `heads.*` (projection heads, classifiers) are dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError, ExportError

if TYPE_CHECKING:
    from sentadapt.encoder import Encoder
    from sentadapt.export.request import ExportRequest, Note

ENCODER_PREFIX = "encoder."


@dataclass
class RunInfo:
    """The files a `sentadapt adapt` run leaves next to its model."""

    folder: Path
    config_text: str
    config: dict[str, Any]
    metrics: dict[str, Any] | None


@dataclass
class LoadedSource:
    encoder: Encoder
    description: str
    base_model: str
    run: RunInfo | None = None
    step: int | None = None
    model_folder: Path | None = None  # a local folder whose README may name a licence
    notes: list[str] = field(default_factory=list)


def is_run_directory(folder: Path) -> bool:
    """A `sentadapt adapt --output` folder, finished or not: its config.yaml, and a published model (config.json
    with metrics.json), checkpoints/ or best/ — or nothing else yet when it was stopped early."""
    if not (folder / "config.yaml").is_file():
        return False
    return not (folder / "config.json").is_file() or any(
        (folder / name).exists() for name in ("metrics.json", "checkpoints", "best"))


def load_source(request: ExportRequest, note: Note) -> LoadedSource:
    folder = Path(request.source).expanduser()
    if folder.is_dir() and is_run_directory(folder):
        return _load_run(folder, request, note)
    if request.checkpoint != "best":
        raise ConfigError(f"--checkpoint {request.checkpoint}: {request.source} is not a run directory "
                          "(no config.yaml); only runs have checkpoints")
    return _load_model(request, note)


def _load_model(request: ExportRequest, note: Note) -> LoadedSource:
    from sentadapt.resolve import resolve_model

    resolved = resolve_model(request.source)
    note(f"loading {request.source}")
    encoder = _load_encoder(resolved, request)
    local = Path(resolved.location) if resolved.is_local else None
    return LoadedSource(encoder, f"model {request.source}", request.source, model_folder=local)


def _load_encoder(model: Any, request: ExportRequest) -> Encoder:
    from sentadapt.encoder import Encoder

    encoder = Encoder.load(model, pooling=request.pooling, device="cpu", trust_remote_code=request.trust_remote_code,
                           allow_pickle=request.allow_pickle)
    encoder.normalize = encoder.normalize or request.normalize
    return encoder


def _load_run(folder: Path, request: ExportRequest, note: Note) -> LoadedSource:
    import yaml

    config_text = (folder / "config.yaml").read_text(encoding="utf-8")
    config = yaml.safe_load(config_text) or {}
    metrics_file = folder / "metrics.json"
    metrics = json.loads(metrics_file.read_text(encoding="utf-8")) if metrics_file.is_file() else None
    run = RunInfo(folder, config_text, config, metrics)
    layout = _layout_folder(folder)
    if (layout != folder and request.checkpoint == "best") or (layout is None and not _checkpoint_steps(folder)):
        _explain_unfinished(folder, layout, note)  # notes what an unfinished run holds, or stops
    checkpoint = None if request.checkpoint == "best" else _checkpoint_folder(folder, request.checkpoint)
    note(f"loading {folder}" + (f" ({checkpoint.name})" if checkpoint else ""))
    base = str(config.get("base", "unknown"))
    if checkpoint is None:
        assert layout is not None  # _explain_unfinished stops a run with neither
        encoder = _load_encoder(layout, request)
        step = (metrics or {}).get("published_step") or _manifest_step(layout)
        where = "published model" if layout == folder else "best/ (the run did not finish)"
        return LoadedSource(encoder, f"run {folder} ({where}, step {step})", base, run, step)
    encoder = _load_encoder(layout, request) if layout is not None else _encoder_as_trained(folder, request, note)
    step = _load_checkpoint_weights(encoder, checkpoint, layout or folder / "config.yaml")
    return LoadedSource(encoder, f"run {folder} (checkpoint {checkpoint.name})", base, run, step)


def _layout_folder(run: Path) -> Path | None:
    """Where the model's layout (pooling, Dense head) is described: the published model, else best/; None for a
    run stopped before either was written (its layout then comes from config.yaml, see _encoder_as_trained)."""
    if (run / "modules.json").is_file():
        return run
    if (run / "best" / "modules.json").is_file():
        return run / "best"
    return None


def _checkpoint_steps(run: Path) -> list[int]:
    """The steps of the run's complete checkpoints, oldest first."""
    from sentadapt.train.checkpoint import list_checkpoints

    return sorted(int(path.name.split("-")[1]) for path in list_checkpoints(run / "checkpoints"))


def _explain_unfinished(run: Path, best: Path | None, note: Note) -> None:
    """A run without a published model: export its best model so far when there is one, saying which
    checkpoints exist; otherwise stop with the command that exports a checkpoint."""
    steps = _checkpoint_steps(run)
    listed = ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))
    if best is not None:
        step = _manifest_step(best)
        also = f"; its checkpoints ({listed}) export with --checkpoint last or --checkpoint STEP" if steps else ""
        note(f"{run}: the run did not finish; exporting its best model so far (best/, step {step}){also}")
        return
    if not steps:
        raise ExportError(f"{run}: the run did not finish and saved neither a model nor a checkpoint; nothing to "
                          "export — run it again (sentadapt adapt ... --overwrite)")
    raise ExportError(f"{run}: the run did not finish, so it has no published model; its checkpoints: {listed}; "
                      f"export the last one with --checkpoint last (step {steps[-1]}) or another with --checkpoint "
                      f"STEP, or finish the run: sentadapt adapt --resume --output {run}")


def _encoder_as_trained(run: Path, request: ExportRequest, note: Note) -> Encoder:
    """The encoder with the layout the run trained and saves (pooling, Dense head), rebuilt from config.yaml as
    `adapt` builds it: the last stage's base model, then the recipe's prepare_export (CLSR adds its MLP)."""
    from sentadapt.config import load_run_config
    from sentadapt.encoder import Encoder
    from sentadapt.pooling import Pooling
    from sentadapt.recipes import RECIPES
    from sentadapt.train.inputs import stage_outputs

    config = load_run_config(run / "config.yaml", {name: RECIPES.get(name).Config for name in RECIPES})
    config.output = str(run)  # the directory may have moved since config.yaml was written
    recipe_class = RECIPES.get(config.recipe)
    stage, stage_config = stage_outputs(config, recipe_class.stages_for(config.recipe_args))[-1]
    note(f"{run}: no saved model layout (no published model, no best/); rebuilding it from config.yaml "
         f"({config.recipe} on {stage_config.base})")
    encoder = Encoder.load(stage_config.base, device="cpu", trust_remote_code=request.trust_remote_code,
                           allow_pickle=request.allow_pickle)  # the base as training loaded it: its own pooling
    recipe = recipe_class(stage_config.recipe_args, encoder)
    recipe.use_stage(stage)
    recipe.prepare_export(encoder, recipe.trainable_heads())
    if request.pooling is not None:  # --pooling overrides the recipe's choice, as it does a saved layout's
        encoder.pooling = Pooling.from_name(request.pooling, encoder.num_layers)
    encoder.normalize = encoder.normalize or request.normalize
    return encoder


def _manifest_step(folder: Path) -> int | None:
    manifest = folder / "manifest.json"
    return json.loads(manifest.read_text()).get("step") if manifest.is_file() else None


def _checkpoint_folder(run: Path, which: str) -> Path:
    from sentadapt.train.checkpoint import checkpoint_name, list_checkpoints

    found = list_checkpoints(run / "checkpoints")
    if not found:
        raise ExportError(f"{run}: no checkpoints in {run / 'checkpoints'}; use --checkpoint best")
    if which == "last":
        return found[0]
    wanted = run / "checkpoints" / checkpoint_name(int(which))
    if wanted not in found:
        steps = ", ".join(str(int(p.name.split("-")[1])) for p in reversed(found))
        raise ExportError(f"--checkpoint {which}: no such checkpoint in {run / 'checkpoints'}; available: {steps}")
    return wanted


def _load_checkpoint_weights(encoder: Encoder, checkpoint: Path, layout: Path) -> int:
    """Verify the checkpoint's checksums, then load its `encoder.*` tensors; returns its step."""
    from safetensors.torch import load_file

    from sentadapt.train.checkpoint import verify_folder

    manifest = verify_folder(checkpoint)
    state = load_file(str(checkpoint / "model.safetensors"))
    weights = {key[len(ENCODER_PREFIX):]: value for key, value in state.items() if key.startswith(ENCODER_PREFIX)}
    missing, unexpected = encoder.load_state_dict(weights, strict=False)
    if missing or unexpected:
        names = ", ".join([*missing, *unexpected][:3])
        raise ExportError(f"{checkpoint}: its weights do not fit the model layout in {layout} ({names}); "
                          "was the run directory changed?")
    return int(manifest.get("step", 0))
