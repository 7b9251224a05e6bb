"""THE training loop, shared by every recipe, on Accelerate (CPU, one GPU, several processes, fp16/bf16).

    accelerate launch -m sentadapt adapt corpus.txt --recipe consert ...   # several GPUs / processes

What it owns: seeding, data order, the optimizer (AdamW, or LARS for large-lr heads; no decay on
biases and LayerNorm), warm-up then linear or cosine decay, gradient accumulation and clipping,
mixed precision, dev evaluation with the same evaluator as `sentadapt eval`, best-model selection
against the base model, early stopping, checkpoints (periodic, on Ctrl-C, SIGTERM or SIGUSR1, on a non-finite loss)
and exact resume. Recipes only turn a batch into a loss.

Batch size is GLOBAL: with P processes each holds batch_size / P sentences, and the recipes gather
the views of all processes so the contrastive negatives come from the whole batch.

Beside it: signals.py (stop requests: Ctrl-C and schedulers' signals), tracking.py (the Reporter and
train.log), checkpoint.py (the checkpoint files and atomic writes). This module decides *when* and on
which process; they do the rest.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sentadapt import lora
from sentadapt.config import RunConfig, save_run_config
from sentadapt.data.batching import (
    RowPairs,
    TokenizedExamples,
    plan_epoch,
    plan_neighbour_epoch,
    shard,
    teacher_neighbours,
)
from sentadapt.durable import publish_model, recover_interrupted_writes, verify_folder, write_folder_atomically
from sentadapt.encoder import Encoder
from sentadapt.errors import CheckpointError, ConfigError, SentadaptError
from sentadapt.evaluation.decision import Decision, decide, decision_rule, evidence_record, small_dev_note
from sentadapt.evaluation.evaluator import Evaluator, dev_change_record, dev_evidence
from sentadapt.evaluation.evidence import Evidence
from sentadapt.recipes.base import Recipe
from sentadapt.rundir import RunDir
from sentadapt.train.checkpoint import (
    load_training_checkpoint,
    newest_usable_checkpoint,
    stage_rng_state,
    write_training_checkpoint,
)
from sentadapt.train.distill import Distillation, build_distillation
from sentadapt.train.guard import StepGuard, StepRecords
from sentadapt.train.optim import build_optimizer, lr_multiplier, skips_on_device
from sentadapt.train.prefetch import BatchPrefetcher
from sentadapt.train.signals import StopRequest, TrainingInterrupted, stopped_by
from sentadapt.train.teacher import TeacherTable
from sentadapt.train.tracking import (
    Reporter,
    SilentReporter,
    Trackers,
    TrainLog,
    describe_run,
    final_values,
    hyperparameters,
    resolve_trackers,
    tracker_values,
)

__all__ = ["Reporter", "SilentReporter", "Trainer", "TrainingDiverged", "TrainingInputs", "TrainingInterrupted"]


class TrainingDiverged(SentadaptError):
    """The loss became NaN or infinite."""


class TrainingModule(nn.Module):
    """Encoder + recipe heads as one module, so DDP wraps (and syncs) both; forward returns the loss."""

    def __init__(self, encoder: Encoder, heads: nn.ModuleDict, recipe: Recipe,
                 distillation: Distillation | None = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.heads = heads
        self._recipe = [recipe]  # a list: the recipe is not a module and must not be registered
        self._distillation = [distillation]  # its frozen base stays out of state_dict, optimizer and DDP
        # a teacher of another width's training-only projection: optimised and checkpointed, never exported
        self.projection = distillation.projection if distillation is not None else None

    def forward(self, batch: dict[str, torch.Tensor]) -> Any:
        distillation, recipe = self._distillation[0], self._recipe[0]
        if distillation is None:
            return recipe.compute_loss(self.encoder, self.heads, batch)
        output = recipe.compute_loss(self.encoder, self.heads, batch) if distillation.needs_recipe_loss(
            self.heads) else None
        return distillation.add_to(output, recipe, self.encoder, self.heads, batch)


@dataclass
class TrainState:
    """What a checkpoint stores besides weights and optimizer state (trainer_state.json)."""

    step: int = 0
    total_steps: int = 0
    base_score: float | None = None
    best_score: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    nan_skips: int = 0
    history: list[dict[str, float]] = field(default_factory=list)  # dev scores by step
    # per-unit dev outputs (cosines, per-query values) of the base model and the best checkpoint: what the
    # paired bootstrap of the final Δ needs, kept here so a resumed run still has the base model's
    dev_outputs: dict[str, Any] = field(default_factory=dict)
    # per-unit dev outputs of EVERY evaluation, by step: the best of them is chosen on the same dev set, so the
    # decision pays for that choice (evaluation/evidence.py) and needs them all; ~8 bytes per unit and evaluation
    dev_evaluations: dict[str, Any] = field(default_factory=dict)
    dev_change_ci: list[float] | None = None  # 95 % paired-bootstrap interval of dev_change
    # the distillation term (W · D) at the first and the last step read back: what the summary reports
    distill_first: float | None = None
    distill_last: float | None = None

    @property
    def dev_change(self) -> float | None:
        """Best dev score minus the base model's; None when there was no dev set (blind selection)."""
        if self.base_score is None or self.best_score is None:
            return None
        return self.best_score - self.base_score

    @property
    def improved(self) -> bool | None:
        # a tie is not an improvement: an unchanged model must not be handed back as a better one
        change = self.dev_change
        return None if change is None else change > 0


@dataclass
class TrainResult:
    output: Path
    state: TrainState
    stopped: str  # completed | early-stopped
    seconds: float
    dev_name: str | None
    published_step: int
    environment: dict[str, Any] = field(default_factory=dict)  # processes, device, batch, versions (describe_run)

    @property
    def improved(self) -> bool | None:
        return self.state.improved

    decision: Decision = field(default_factory=lambda: Decision(None, "not decided"))  # as metrics.json records
    decision_note: str | None = None  # the dev set is too small for the gains at stake (decision.small_dev_note)
    teacher: TeacherTable | None = None  # --teacher: its dev score and speed, beside the student's
    examples: int = 0  # training examples: steps × global batch / examples = passes over the data

    @property
    def passes(self) -> float | None:
        """Passes over the training examples the steps made (None when unknown)."""
        batch = self.environment.get("global_batch", 0) * self.environment.get("grad_accum", 1)
        return self.state.step * batch / self.examples if self.examples and batch else None


@dataclass
class TrainingInputs:
    """Everything resolved before training starts (data tokenized, evaluator loaded)."""

    config: RunConfig
    encoder: Encoder
    recipe: Recipe
    examples: TokenizedExamples | RowPairs
    evaluator: Evaluator | None
    dev_name: str | None
    # (score, per-unit outputs) of the base model on this dev set, when already scored (--recipe auto scores it
    # once for every candidate); None: the run scores it itself
    base_dev: tuple[float, dict[str, Any]] | None = None
    teacher: TeacherTable | None = None  # --teacher: its vectors of every example (train/teacher.py)


def parameter_groups(module: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (BERT's recipe); frozen params left out."""
    decay, no_decay = [], []
    for name, parameter in module.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def steps_per_epoch(examples: int, config: RunConfig) -> int:
    return (examples // config.train.batch_size) // config.train.grad_accum


def total_steps_for(examples: int, config: RunConfig) -> int:
    per_epoch = steps_per_epoch(examples, config)
    if per_epoch == 0:
        raise ConfigError(
            f"the corpus has {examples} examples, fewer than one step of batch_size {config.train.batch_size} × "
            f"grad_accum {config.train.grad_accum}; lower --batch-size or add data"
        )
    return config.train.max_steps or max(1, math.ceil(passes_for(examples, config) * per_epoch))


def passes_for(examples: int, config: RunConfig) -> float:
    """`epochs`, or with min_examples: enough passes to train on that many examples, within [epochs, max_epochs]
    (20,000 examples: a 2,700-sentence corpus gets 4 passes at max_epochs 4, 8,300 sentences 2.4, 100,000 one)."""
    train = config.train
    if not train.min_examples:
        return train.epochs
    return max(train.epochs, min(train.max_epochs, train.min_examples / examples))


def eval_interval(examples: int, config: RunConfig) -> int:
    """Steps between dev evaluations: eval_every, or a pass over the data / evals_per_pass (0: only at the end)."""
    if config.train.evals_per_pass <= 0:
        return config.train.eval_every
    return max(1, round(steps_per_epoch(examples, config) / config.train.evals_per_pass))


class Trainer:
    """One run: `Trainer(inputs, reporter).run(resume=...)`."""

    def __init__(self, inputs: TrainingInputs, reporter: Reporter | None = None) -> None:
        from accelerate import Accelerator
        from accelerate.utils import ProjectConfiguration, set_seed

        self.inputs = inputs
        self.config = inputs.config
        self.train_config = inputs.config.train
        self.reporter = reporter or SilentReporter()
        self.output = Path(inputs.config.output)
        self.run_dir = RunDir(self.output)
        self.checkpoints = self.run_dir.checkpoints
        self.train_log = TrainLog(self.run_dir.train_log)
        if self.train_config.mixed_precision == "fp16" and not torch.cuda.is_available():
            raise ConfigError("mixed_precision: fp16 needs a CUDA GPU (accelerate would silently train in fp32 "
                              "on CPU); use --mixed-precision bf16 on CPU")
        use_tf32(self.train_config.tf32)
        tracker_names = resolve_trackers(self.train_config.report_to)
        self.accelerator = Accelerator(
            log_with=tracker_names or None,
            project_config=ProjectConfiguration(project_dir=str(self.output),
                                                logging_dir=str(self.run_dir.tensorboard)),
            mixed_precision=self.train_config.mixed_precision,
            gradient_accumulation_steps=self.train_config.grad_accum,
            # without CUDA, accelerate only sets up multi-process (gloo) training when told it runs on CPU
            cpu=not torch.cuda.is_available(),
        )
        if self.train_config.batch_size % self.accelerator.num_processes:
            raise ConfigError(f"batch_size: {self.train_config.batch_size} does not split evenly over "
                              f"{self.accelerator.num_processes} processes")
        # per-process seeds: otherwise every rank draws the same augmentation masks for its local examples
        set_seed(self.train_config.seed, device_specific=True)
        self.is_main = self.accelerator.is_main_process
        self.environment = describe_run(self.accelerator, self.train_config)
        self.trackers = Trackers(self.accelerator, tracker_names, run_name=self.output.name)
        self.state = TrainState(total_steps=total_steps_for(len(inputs.examples), inputs.config))
        self.eval_every = eval_interval(len(inputs.examples), inputs.config)
        self.records = StepRecords()

    # ------------------------------------------------------------------ setup
    def _build(self, resume: bool) -> None:
        recipe, encoder = self.inputs.recipe, self.inputs.encoder
        heads = recipe.trainable_heads()
        adapters = lora.settings_of(self.train_config)  # peft and the recipe were checked before loading
        if not resume:
            self._evaluate_base()  # the base model as the user has it, with its own pooling
        recipe.prepare_export(encoder, heads)  # checkpoints are scored with the pooling they are saved with
        teacher = self.inputs.teacher.vectors if self.inputs.teacher is not None else None
        # before resumed weights load (the frozen base is the base)
        self.distillation = build_distillation(self.train_config, recipe, encoder, teacher, self._student_sample)
        if adapters is not None:  # after the frozen base is copied: it stays a plain model
            lora.attach(encoder, adapters)
        self.module = TrainingModule(encoder, heads, recipe, self.distillation).to(self.accelerator.device)
        cfg = self.train_config
        if cfg.gradient_checkpointing:
            encoder.enable_gradient_checkpointing()
        self.optimizer = build_optimizer(
            cfg.optimizer, parameter_groups(self.module, cfg.weight_decay), cfg.lr,
            (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps,
        )
        # Not passed to accelerator.prepare: it would step the schedule once per process.
        self._lr_multiplier = lr_multiplier(cfg.schedule, self.state.total_steps, cfg.warmup_ratio)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_multiplier)
        self.model, self.optimizer = self.accelerator.prepare(self.module, self.optimizer)
        self.lengths = self.inputs.examples.lengths()
        self.neighbours = self._teacher_neighbours()
        self.pad_id = encoder.tokenizer.pad_token_id

    def _teacher_neighbours(self) -> np.ndarray | None:
        """Each example's nearest examples under the teacher, when the teacher composes the batches."""
        if self.inputs.teacher is None or self.train_config.distill_batches != "neighbours":
            return None
        started = time.perf_counter()
        neighbours = teacher_neighbours(self.inputs.teacher.vectors, self.train_config.distill_neighbours,
                                        self.train_config.seed)
        self.reporter.message(f"neighbour batches: each example's {neighbours.shape[1]} nearest under the teacher, "
                              f"found in {time.perf_counter() - started:.1f} s")
        return neighbours

    def _student_sample(self, rows: int) -> torch.Tensor:
        """The base's vectors of the first `rows` examples' texts (what a projection to the teacher starts from)."""
        examples = self.inputs.examples
        texts = examples.example_texts(0, min(rows, len(examples)))
        return self.inputs.encoder.encode(texts, batch_size=self.train_config.eval_batch_size,
                                          max_length=self.train_config.max_length)

    # ------------------------------------------------------------------ the loop
    def run(self, resume: bool = False) -> TrainResult:
        started = time.perf_counter()
        if self.is_main and not resume and not self.run_dir.has_config():
            self.output.mkdir(parents=True, exist_ok=True)
            save_run_config(self.config, self.run_dir.config_file)  # what `--resume` reads back
        self.trackers.start(hyperparameters(self.config.to_dict()))
        try:
            return self._train_and_publish(resume, started)
        finally:
            self.trackers.finish()

    def _train_and_publish(self, resume: bool, started: float) -> TrainResult:
        # decided on the main process when metrics.json is written; the other processes report no decision
        self.decision, self.decision_note = Decision(None, "decided on the main process"), None
        self._build(resume)
        if resume:
            self._resume()
        self.reporter.start(self.state.total_steps, self.state.step)
        stopped = "completed"
        self.stop_request, self._stop_signal = StopRequest(self.reporter.message), 0
        try:
            with self.stop_request:
                stopped = self._train_steps()
        except KeyboardInterrupt:
            path = self._save_checkpoint()
            raise stopped_by(self._stop_signal or self.stop_request.signum, self.state.step, path,
                             self.output) from None
        finally:
            self.reporter.finish()
        last_step_unscored = self.eval_every == 0 or self.state.step % self.eval_every
        if stopped == "completed" and last_step_unscored:
            self._evaluate_and_keep_best()
        published = self._publish()
        return TrainResult(self.output, self.state, stopped, time.perf_counter() - started, self.inputs.dev_name,
                           published, self.environment, self.decision, self.decision_note, self.inputs.teacher,
                           len(self.inputs.examples))

    def _train_steps(self) -> str:
        cfg = self.train_config
        plan_cache: dict[int, np.ndarray] = {}
        self._window_started, self._window_examples = time.perf_counter(), 0
        self.guard = StepGuard(cfg.on_nan, cfg.max_nan_skips, self.state.nan_skips, self.accelerator.device)
        self.records = StepRecords()
        self._on_device_skip = skips_on_device(self.optimizer.optimizer)
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        self.model.train()
        with BatchPrefetcher(lambda index: self._micro_batch(index, plan_cache, rank, world),
                             self.accelerator.device, self.state.step * cfg.grad_accum,
                             self.state.total_steps * cfg.grad_accum) as batches:
            while self.state.step < self.state.total_steps:
                self._optimizer_step(batches)
                self.scheduler.step()
                self.state.step += 1
                self._window_examples += cfg.batch_size * cfg.grad_accum
                self.reporter.advance(self.state.step, self.scheduler.get_last_lr()[0], self._examples_per_s())
                if self.state.step % cfg.log_every == 0 or self.state.step == 1:
                    self._read_back()
                if self._interrupt_requested():
                    raise KeyboardInterrupt  # a step boundary: the checkpoint below is exact
                if self.eval_every and self.state.step % self.eval_every == 0 and self._evaluate_and_keep_best():
                    return "early-stopped"
                if cfg.checkpoint_every and self.state.step % cfg.checkpoint_every == 0:
                    self._save_checkpoint()
        self._read_back()
        return "completed"

    def _examples_per_s(self) -> float:
        return self._window_examples / max(time.perf_counter() - self._window_started, 1e-9)

    def _optimizer_step(self, batches: BatchPrefetcher) -> None:
        """grad_accum micro-batches, then one optimizer step, queued on the device without waiting for it.

        The loss, its parts and whether the step was finite are recorded on the device (StepRecords);
        a non-finite step's update is skipped there too (StepGuard), so nothing here reads a value back."""
        cfg = self.train_config
        world = self.accelerator.num_processes
        loss = torch.zeros((), device=self.accelerator.device)
        parts: dict[str, torch.Tensor] = {}
        norm: torch.Tensor | None = None
        bad = torch.zeros((), device=self.accelerator.device)
        for micro in range(cfg.grad_accum):
            batch = batches.get(self.state.step * cfg.grad_accum + micro)
            with self.accelerator.accumulate(self.model):
                output = self.model(batch)
                # Gathered negatives: each rank back-propagates only its shard and DDP averages over
                # ranks, so × world gives the global loss's gradient (accelerate divides by grad_accum).
                self.accelerator.backward(output.total * world)
                loss = loss + output.total.detach().float() / cfg.grad_accum
                for key, value in output.parts.items():
                    parts[key] = parts.get(key, 0.0) + value.float() / cfg.grad_accum
                if self.accelerator.sync_gradients:
                    norm, bad = self._check_step(loss)
                    self._step_unless(self.guard.skip_flag(bad))
                    self.optimizer.zero_grad(set_to_none=True)
        self.records.add(self.state.step + 1, loss, norm, bad, parts)

    def _check_step(self, loss: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(gradient norm, 1.0 if the step is not finite), on the device; the flag agreed by every process,
        or one would step while another skips. Clips the gradients when configured."""
        scaler = self.accelerator.scaler
        bad = (~torch.isfinite(loss)).float()
        if scaler is not None:
            # fp16: the grad scaler skips overflowing steps itself (an inf norm is routine there); a step we
            # must skip is handed to it as a non-finite gradient, before clipping unscales and checks them
            bad = self._agreed(bad)
            self._poison_gradients(torch.maximum(bad, self.guard.halted))
            if self.train_config.max_grad_norm > 0:
                self.accelerator.clip_grad_norm_(self.model.parameters(), self.train_config.max_grad_norm)
            return None, bad
        if self.train_config.max_grad_norm > 0:
            norm = self.accelerator.clip_grad_norm_(self.model.parameters(), self.train_config.max_grad_norm)
        else:
            norm = _gradient_norm(self.module, self.accelerator.device)
        bad = torch.maximum(bad, (~torch.isfinite(norm)).float())
        return norm, self._agreed(bad)

    def _agreed(self, flag: torch.Tensor) -> torch.Tensor:
        """The max of a 0-dim flag over processes: an all-reduce on the device, no host read."""
        if self.accelerator.num_processes == 1:
            return flag
        return (self.accelerator.reduce(flag.reshape(1), reduction="sum") > 0).float().reshape(())

    def _poison_gradients(self, skip: torch.Tensor) -> None:
        for parameter in self.module.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(torch.where(skip > 0, math.nan, 1.0))
                return

    def _step_unless(self, skip: torch.Tensor) -> None:
        """optimizer.step(), a no-op on the device when `skip` is 1.0 (found_inf, as GradScaler passes it)."""
        if self.accelerator.scaler is not None:
            self.optimizer.step()  # GradScaler sets found_inf itself from the (poisoned) gradients
        elif self._on_device_skip:
            self.optimizer.optimizer.found_inf = skip
            self.optimizer.step()
        elif not skip.item():  # an optimizer without a device-side skip: one read-back per step
            self.optimizer.step()

    def _read_back(self) -> None:
        """Copy the pending steps' records to the host (one sync): log them, report skipped steps, and stop
        at the step that broke the `on_nan` rule (its update and every later one were skipped on the device)."""
        cfg = self.train_config
        rate = self._examples_per_s()
        for read in self.records.read_back():
            if read.bad:
                what, value = read.failure()
                if not self.guard.allows_skip(self.state.nan_skips):
                    self._diverged(read.step, what, value)
                self.state.nan_skips += 1
                self.reporter.message(f"step {read.step}: {what} is {value}; step skipped "
                                      f"({self.state.nan_skips}/{cfg.max_nan_skips})")
            self.reporter.losses(read.step, read.loss, read.parts)
            if "distill" in read.parts:
                if self.state.distill_first is None:
                    self.state.distill_first = read.parts["distill"]
                self.state.distill_last = read.parts["distill"]
            if read.step % cfg.log_every == 0 or read.step == 1:
                self._log({"step": read.step, "loss": read.loss, **read.parts,
                           "lr": self.scheduler.get_last_lr()[0], "examples_per_s": rate})
        self._window_started, self._window_examples = time.perf_counter(), 0

    def _diverged(self, step: int, what: str, value: float) -> None:
        """Stop: the checkpoint is the last good step's (weights unchanged since, on the device)."""
        cfg = self.train_config
        self._rewind_to(step - 1)
        path = self._save_checkpoint()
        skipped = f"{cfg.max_nan_skips} skipped step" + ("" if cfg.max_nan_skips == 1 else "s")
        limit = f" after {skipped} (max_nan_skips)" if cfg.on_nan == "skip" else ""
        raise TrainingDiverged(
            f"{what} is {value} at step {step}; stopped{limit}. The last good weights are in {path}. "
            "Try a lower --lr, a higher temperature, or --mixed-precision no"
        )

    def _rewind_to(self, step: int) -> None:
        """The step counter, schedule and learning rate of `step` (the weights and the optimizer's moments and
        step counts already are: the later updates were skipped). Data order is a function of the step."""
        self.state.step = step
        self.scheduler.last_epoch = step
        multiplier = self._lr_multiplier(step)
        for group, base_lr in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base_lr * multiplier
        self.scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]  # what get_last_lr reads

    def _interrupt_requested(self) -> bool:
        """At a step boundary: did any process get a stop signal? All processes get the same answer.

        One process reads its own flag every step (no device involved). Several agree over a collective,
        which waits for the device: only at the steps where the records are read back anyway."""
        if self.accelerator.num_processes == 1:
            self._stop_signal = self.stop_request.signum
        elif self.state.step % self.train_config.log_every == 0 or self.state.step == 1:
            self._stop_signal = self.stop_request.agreed(self._max_over_processes)
        return self._stop_signal != 0

    def _max_over_processes(self, value: int) -> int:
        flag = torch.tensor([value], device=self.accelerator.device)
        if self.accelerator.num_processes > 1:
            flag = self.accelerator.gather(flag)
        return int(flag.max().item())

    def _micro_batch(self, micro_index: int, cache: dict[int, np.ndarray], rank: int, world: int,
                     ) -> dict[str, torch.Tensor]:
        """Micro-batch number `micro_index` of the whole run, on the host: a pure function of the index (exact
        resume). Called from the prefetch thread only (the plan cache is that thread's)."""
        per_epoch = len(self.inputs.examples) // self.train_config.batch_size
        epoch, position = divmod(micro_index, per_epoch)
        if epoch not in cache:
            cache.clear()
            cache[epoch] = plan_epoch(self.lengths, self.train_config.batch_size, self.train_config.seed, epoch,
                                      self.train_config.length_grouping) if self.neighbours is None else \
                plan_neighbour_epoch(self.neighbours, self.train_config.batch_size, self.train_config.seed, epoch)
        indices = shard(cache[epoch][position], rank, world)
        batch = self.inputs.examples.collate(indices, self.pad_id)
        if self.distillation is not None:  # a teacher's rows of these examples travel with the batch
            batch.update(self.distillation.batch_fields(indices))
        return batch

    # ------------------------------------------------------------------ evaluation
    def _score(self) -> float:
        """The dev score (no intervals); the model's per-unit outputs stay in `_last_outputs` for the final Δ CI."""
        evaluator = self.inputs.evaluator
        assert evaluator is not None
        report = evaluator(self.inputs.encoder, batch_size=self.train_config.eval_batch_size, intervals=False)
        self._last_outputs = evaluator.outputs_of(report)
        return report.average

    def _evaluate_base(self) -> None:
        if self.inputs.evaluator is None:
            self.reporter.message("no labelled dev data: checkpoint selection is blind, the last step is kept. "
                                  "A file of ~100 labelled pairs from your domain (--dev FILE) fixes this.")
            return
        if self.is_main:
            if self.inputs.base_dev is not None:
                self.state.base_score, self.state.dev_outputs["base"] = self.inputs.base_dev
            else:
                self.state.base_score = self._score()
                self.state.dev_outputs["base"] = self._last_outputs
            self.state.history.append({"step": 0, "dev": self.state.base_score})
            self._log({"step": 0, "dev": self.state.base_score})
            self.reporter.message(f"base model on {self.inputs.dev_name}: {self.state.base_score:.2f}")

    def _evaluate_and_keep_best(self) -> bool:
        """Evaluate on the main process, save the model if best; returns True to stop early (all ranks agree)."""
        if self.inputs.evaluator is None:
            return False
        self._read_back()  # a run that must stop does so before scoring (and saving) its frozen weights
        stop = torch.zeros(1, device=self.accelerator.device)
        if self.is_main:
            score = self._score()
            self.state.dev_evaluations[str(self.state.step)] = self._last_outputs
            self.state.history.append({"step": self.state.step, "dev": score})
            self._log({"step": self.state.step, "dev": score})
            reference = self.state.best_score if self.state.best_score is not None else -math.inf
            improved = score > reference
            if improved:
                self.state.best_score, self.state.best_step = score, self.state.step
                self.state.dev_outputs["best"] = self._last_outputs
                self.state.evals_without_improvement = 0
                self._save_model(self.run_dir.best)
            else:
                self.state.evals_without_improvement += 1
            if self.state.best_score is not None:
                self.trackers.log({"dev/best": self.state.best_score}, self.state.step)
            self.reporter.evaluation(self.state.step, score, self.state.best_score or score, improved)
            patience = self.train_config.patience
            stop[0] = float(bool(patience) and self.state.evals_without_improvement >= patience)
        self.model.train()
        from accelerate.utils import broadcast

        stop = broadcast(stop)
        return bool(stop.item())

    # ------------------------------------------------------------------ files
    def _save_model(self, folder: Path) -> None:
        encoder = self.accelerator.unwrap_model(self.model).encoder
        write_folder_atomically(folder, encoder.save, {"step": self.state.step})

    def _log(self, record: dict[str, Any]) -> None:
        """A train.log line (main process), also sent to the --report-to trackers."""
        if self.is_main:
            self.train_log.append(record)
            self.trackers.log(tracker_values(record), int(record["step"]))

    def _save_checkpoint(self) -> Path:
        """Every process stages its RNG state; the main process writes the checkpoint; all wait for it.

        The pending step records are read back first: a step that must stop the run stops it here, with
        the checkpoint of its last good step, instead of being saved as a normal one."""
        if getattr(self, "records", None) is not None and len(self.records):
            self._read_back()
        stage_rng_state(self.checkpoints, self.accelerator.process_index)
        self.accelerator.wait_for_everyone()
        if self.is_main:
            path = write_training_checkpoint(
                self.checkpoints, self.state.step, self.accelerator.unwrap_model(self.model), self.optimizer,
                self.scheduler, self.accelerator.scaler, dict(self.state.__dict__), self.train_config.keep_checkpoints)
        else:
            path = self.run_dir.checkpoint(self.state.step)
        self.accelerator.wait_for_everyone()
        return path

    def _resume(self) -> None:
        if self.run_dir.is_finished():
            raise ConfigError(f"--resume: {self.output} is a finished run (metrics.json is written); nothing to "
                              "resume — start a new run with another --output")
        if self.is_main:  # the CLI holds the run's lock: no live writer owns these temporaries
            for line in recover_interrupted_writes(self.output):
                self.reporter.message(line)
        self.accelerator.wait_for_everyone()  # every rank must see the same checkpoint folders
        candidate = newest_usable_checkpoint(self.checkpoints, self.reporter.message)
        if candidate is None:
            raise ConfigError(f"--resume: no usable checkpoint in {self.checkpoints}; start without --resume")
        self._load_checkpoint(candidate)
        if self.is_main:
            self.train_log.trim_after(self.state.step)
        self.reporter.message(f"resumed from {candidate} (step {self.state.step})")

    def _load_checkpoint(self, folder: Path) -> None:
        saved = load_training_checkpoint(
            folder, self.accelerator.unwrap_model(self.model), self.optimizer, self.scheduler,
            self.accelerator.scaler, self.accelerator.process_index, self.accelerator.num_processes)
        self.state = TrainState(**{**saved, "total_steps": self.state.total_steps})

    def _publish(self) -> int:
        """Put the chosen model (best on dev, else the last step) at the top of the run directory."""
        step = self.state.best_step or self.state.step
        if self.is_main:
            step = self._publish_on_main()
        self.accelerator.wait_for_everyone()  # a next stage loads this folder on every process
        return step

    def _publish_on_main(self) -> int:
        best = self.run_dir.best
        if self.inputs.evaluator is None:
            self._save_model(best)
            step = self.state.step
        elif not best.is_dir():
            raise CheckpointError(f"{best}: missing; the best model (step {self.state.best_step}) was lost, "
                                  "so nothing is published rather than a worse model")
        else:
            step = int(verify_folder(best).get("step", self.state.best_step or 0))
        publish_model(best, self.output)
        shutil.rmtree(best)
        self.trackers.log(final_values(self._write_metrics(step)), self.state.step)
        return step

    def _evidence(self) -> Evidence | None:
        """The dev set's evidence for the best checkpoint, paying for its choice among every evaluation (a run
        resumed from a checkpoint written before evaluations were kept has only the best one to weigh)."""
        outputs = self.state.dev_outputs
        evaluations = self.state.dev_evaluations
        best = str(self.state.best_step)
        if best not in evaluations:
            evaluations = {best: outputs["best"]} if "best" in outputs else {}
        steps = list(evaluations)
        chosen = steps.index(best) if best in steps else 0
        return dev_evidence(self.inputs.evaluator, outputs.get("base"), [evaluations[s] for s in steps], chosen)

    def _write_metrics(self, published_step: int) -> dict[str, Any]:
        change = dev_change_record(self.inputs.evaluator, self.state.dev_outputs)  # the Δ's paired CI
        self.state.dev_change_ci = change["dev_change_ci"]
        evidence = self._evidence()
        rule = decision_rule(self.config)
        decision = decide(self.state.dev_change, self.state.dev_change_ci, self.inputs.dev_name, evidence, rule)
        self.decision, self.decision_note = decision, small_dev_note(evidence, rule)
        metrics = {
            "recipe": self.config.recipe, "base_model": self.config.base, "dev": self.inputs.dev_name,
            "base_score": self.state.base_score, "best_score": self.state.best_score,
            "best_step": self.state.best_step, "dev_change": self.state.dev_change, "improved": self.state.improved,
            **change, **decision.to_dict(), "decision_settings": rule.to_dict(),
            "dev_evidence": evidence_record(evidence, rule), "dev_note": self.decision_note,
            "preset": self.config.preset,
            "published_step": published_step, "steps": self.state.step,
            "total_steps": self.state.total_steps, "history": self.state.history,
            "pooling": self.inputs.encoder.pooling_name, "environment": self.environment,
            "teacher": self.inputs.teacher.record() if self.inputs.teacher is not None else None,
            "teacher_score": self.inputs.teacher.score if self.inputs.teacher is not None else None,
            "teacher_gap_closed": None if self.inputs.teacher is None else self.inputs.teacher.gap_closed(
                self.state.base_score, self.state.best_score),
            "examples": len(self.inputs.examples),
            "distill_loss": None if self.state.distill_first is None else {
                "first": self.state.distill_first, "last": self.state.distill_last},
        }
        if self.inputs.evaluator is not None and "base" in self.state.dev_outputs:
            # the per-unit dev outputs of the base and of every evaluated step: what the decision weighed, so it
            # can be recomputed (or weighed with --recipe auto's other candidates) without the models
            self.run_dir.write_dev_outputs({"dev": self.inputs.dev_name, "base": self.state.dev_outputs["base"],
                                            "evaluations": self.state.dev_evaluations})
        self.run_dir.write_metrics(metrics)  # last: its presence marks a finished run
        return metrics


def use_tf32(enabled: bool) -> None:
    """fp32 matmuls and convolutions on TF32 tensor cores (Ampere and newer; no effect elsewhere). A process-wide
    PyTorch setting: `adapt` owns its process; the value a run used is in metrics.json's environment."""
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def _gradient_norm(module: nn.Module, device: torch.device) -> torch.Tensor:
    grads = [p.grad.detach() for p in module.parameters() if p.grad is not None]
    if not grads:
        return torch.zeros((), device=device)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))

