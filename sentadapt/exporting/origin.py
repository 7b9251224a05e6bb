"""What to export: a model folder or Hub id, or a run directory at its best, last or a given step.

A run directory's top level is the published (best) model. Checkpoints hold the state dict of the
whole training module (`encoder.*` plus the recipe's training-only `heads.*`); the encoder part is
loaded onto the published model's layout (same pooling, same Dense head — CLSR's MLP is
`encoder.head.N`), and `heads.*` (projection heads, classifiers) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError, ExportError
from sentadapt.storage.run_folder import CHECKPOINT_WEIGHTS_FILE, RunDir, checkpoint_step, manifest_step

if TYPE_CHECKING:
    from sentadapt.events import Note
    from sentadapt.exporting.request import ExportRequest
    from sentadapt.model.encoder import Encoder

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


def load_source(request: ExportRequest, note: Note) -> LoadedSource:
    folder = Path(request.source).expanduser()
    if folder.is_dir() and RunDir(folder).is_run():
        return _load_run(folder, request, note)
    if request.checkpoint != "best":
        raise ConfigError(f"--checkpoint {request.checkpoint}: {request.source} is not a run directory "
                          "(no config.yaml); only runs have checkpoints")
    return _load_model(request, note)


def _load_model(request: ExportRequest, note: Note) -> LoadedSource:
    from sentadapt.model.resolve import resolve_model

    resolved = resolve_model(request.source)
    note(f"loading {request.source}")
    encoder = _load_encoder(resolved, request)
    local = Path(resolved.location) if resolved.is_local else None
    return LoadedSource(encoder, f"model {request.source}", request.source, model_folder=local)


def _load_encoder(model: Any, request: ExportRequest) -> Encoder:
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(model, pooling=request.pooling, device="cpu", trust_remote_code=request.trust_remote_code,
                           allow_pickle=request.allow_pickle)
    encoder.configure(normalize=encoder.normalize or request.normalize)
    return encoder


def _load_run(folder: Path, request: ExportRequest, note: Note) -> LoadedSource:
    import yaml

    run_dir = RunDir(folder)
    config_text = run_dir.read_config_text()
    config = yaml.safe_load(config_text) or {}
    metrics = run_dir.read_metrics()
    run = RunInfo(folder, config_text, config, metrics)
    layout = run_dir.layout_folder()
    if (layout != folder and request.checkpoint == "best") or (layout is None and not run_dir.checkpoint_steps()):
        _explain_unfinished(folder, layout, note)  # notes what an unfinished run holds, or stops
    checkpoint = None if request.checkpoint == "best" else _checkpoint_folder(folder, request.checkpoint)
    note(f"loading {folder}" + (f" ({checkpoint.name})" if checkpoint else ""))
    base = str(config.get("base", "unknown"))
    _note_keep_base(folder, metrics, base, note)
    if checkpoint is None:
        assert layout is not None  # _explain_unfinished stops a run with neither
        encoder = _load_encoder(layout, request)
        step = (metrics or {}).get("published_step") or manifest_step(layout)
        where = "published model" if layout == folder else "best/ (the run did not finish)"
        return LoadedSource(encoder, f"run {folder} ({where}, step {step})", base, run, step)
    adapters = _lora_settings(config)
    if adapters is not None:  # the checkpoint holds base + adapters: rebuilt as trained, then merged
        encoder = _encoder_as_trained(folder, request, note, "its checkpoints hold LoRA adapters")
        from sentadapt.model import lora

        lora.attach(encoder, adapters)
    elif layout is not None:
        encoder = _load_encoder(layout, request)
    else:
        encoder = _encoder_as_trained(folder, request, note, "no published model, no best/")
    step = _load_checkpoint_weights(encoder, checkpoint, layout or run_dir.config_file)
    if adapters is not None:
        lora.merge(encoder)
    return LoadedSource(encoder, f"run {folder} (checkpoint {checkpoint.name})", base, run, step)


def _note_keep_base(folder: Path, metrics: dict[str, Any] | None, base: str, note: Note) -> None:
    """A run that decided keep-base is exported when asked, but not without saying so (the card says it too)."""
    from sentadapt.decision.rule import decision_of

    if metrics is None:  # an unfinished run has not decided
        return
    decision = decision_of(metrics)
    if decision.keep_base:
        note(f"{folder}: this run decided keep-base ({decision.reason}); exporting what it trained anyway — by its "
             f"dev set, the base model {base} is at least as good")


def _explain_unfinished(run: Path, best: Path | None, note: Note) -> None:
    """A run without a published model: export its best model so far when there is one, saying which
    checkpoints exist; otherwise stop with the command that exports a checkpoint."""
    steps = RunDir(run).checkpoint_steps()
    listed = ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))
    if best is not None:
        step = manifest_step(best)
        also = f"; its checkpoints ({listed}) export with --checkpoint last or --checkpoint STEP" if steps else ""
        note(f"{run}: the run did not finish; exporting its best model so far (best/, step {step}){also}")
        return
    if not steps:
        raise ExportError(f"{run}: the run did not finish and saved neither a model nor a checkpoint; nothing to "
                          "export — run it again (sentadapt adapt ... --overwrite)")
    raise ExportError(f"{run}: the run did not finish, so it has no published model; its checkpoints: {listed}; "
                      f"export the last one with --checkpoint last (step {steps[-1]}) or another with --checkpoint "
                      f"STEP, or finish the run: sentadapt adapt --resume --output {run}")


def _lora_settings(config: dict[str, Any]) -> Any:
    """The run's LoRA adapters (config.yaml's train.lora_*), None when it trained every weight."""
    from sentadapt.config.merging import with_overrides
    from sentadapt.config.schema import TrainConfig
    from sentadapt.model.lora import settings_of

    train = config.get("train") or {}
    lora = {k: v for k, v in train.items() if k.startswith("lora_")}
    return settings_of(with_overrides(TrainConfig(), lora, "config.yaml: train"))


def _encoder_as_trained(run: Path, request: ExportRequest, note: Note, why: str) -> Encoder:
    """The encoder with the layout the run trained and saves (pooling, Dense head), rebuilt from config.yaml as
    `adapt` builds it: the last stage's base model, then the recipe's prepare_export (CLSR adds its MLP)."""
    from sentadapt.config.merging import load_run_config
    from sentadapt.model.encoder import Encoder
    from sentadapt.model.pooling import Pooling
    from sentadapt.recipes import RECIPES

    run_dir = RunDir(run)  # its own path: the directory may have moved since config.yaml was written
    config = load_run_config(run_dir.config_file, {name: RECIPES.get(name).spec.settings for name in RECIPES})
    recipe_class = RECIPES.get(config.recipe)
    stages = tuple(stage.name for stage in recipe_class.stages(config.recipe_args))
    folders = run_dir.stages(stages)
    base = str(folders[-2].path) if len(folders) > 1 else config.base  # a later stage starts from the one before
    stage = stages[-1]
    note(f"{run}: {why}; rebuilding the model layout from config.yaml ({config.recipe} on {base})")
    encoder = Encoder.load(base, device="cpu", trust_remote_code=request.trust_remote_code,
                           allow_pickle=request.allow_pickle)  # the base as training loaded it: its own pooling
    recipe = recipe_class(config.recipe_args, encoder, stage)
    recipe.prepare_export(encoder, recipe.trainable_heads())
    # --pooling overrides the recipe's choice, as it does a saved layout's
    pooling = None if request.pooling is None else Pooling.from_name(request.pooling, encoder.num_layers)
    encoder.configure(pooling=pooling, normalize=encoder.normalize or request.normalize)
    return encoder


def _checkpoint_folder(run: Path, which: str) -> Path:
    run_dir = RunDir(run)
    found = run_dir.checkpoint_folders()
    if not found:
        raise ExportError(f"{run}: no checkpoints in {run_dir.checkpoints}; use --checkpoint best")
    if which == "last":
        return found[0]
    wanted = run_dir.checkpoint(int(which))
    if wanted not in found:
        steps = ", ".join(str(checkpoint_step(p)) for p in reversed(found))
        raise ExportError(f"--checkpoint {which}: no such checkpoint in {run_dir.checkpoints}; available: {steps}")
    return wanted


def _load_checkpoint_weights(encoder: Encoder, checkpoint: Path, layout: Path) -> int:
    """Verify the checkpoint's checksums, then load its `encoder.*` tensors; returns its step."""
    from safetensors.torch import load_file

    from sentadapt.storage.durable import verify_folder

    manifest = verify_folder(checkpoint)
    state = load_file(str(checkpoint / CHECKPOINT_WEIGHTS_FILE))
    weights = {key[len(ENCODER_PREFIX):]: value for key, value in state.items() if key.startswith(ENCODER_PREFIX)}
    missing, unexpected = encoder.load_state_dict(weights, strict=False)
    if missing or unexpected:
        names = ", ".join([*missing, *unexpected][:3])
        raise ExportError(f"{checkpoint}: its weights do not fit the model layout in {layout} ({names}); "
                          "was the run directory changed?")
    return int(manifest.get("step", 0))
