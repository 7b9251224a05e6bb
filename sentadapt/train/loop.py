"""THE training loop, shared by every recipe, on Accelerate (CPU, one GPU, several processes, fp16/bf16).

    accelerate launch -m sentadapt adapt corpus.txt --recipe consert ...   # several GPUs / processes

What it owns: seeding, the optimizer (AdamW, or LARS for large-lr heads; no decay on biases and LayerNorm),
warm-up then linear or cosine decay, gradient accumulation, mixed precision, and *when* (and on which process)
each step, dev evaluation, checkpoint (periodic, on Ctrl-C, SIGTERM or SIGUSR1, on a non-finite loss) and exact
resume happens. Recipes only turn a batch into a loss.

Batch size is GLOBAL: with P processes each holds batch_size / P sentences, and the recipes gather
the views of all processes so the contrastive negatives come from the whole batch.

Beside it, one idea each: steps.py (how many steps, how often dev), feed.py (the data order, prefetched), guard.py
(clip, check, step or skip on the device; step records, the on_nan rule), stopping/training.py (stop requests),
state.py (what a run knows; DevSelection: the best model on the dev set, patience), tracking.py (the Reporter,
train.log, trackers), checkpoint.py (checkpoint files).
After `Trainer.run` returns, run/finish.py publishes the chosen model, decides and writes metrics.json.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sentadapt.config.schema import RunConfig
from sentadapt.data.batching import RowPairs, TokenizedExamples
from sentadapt.errors import ConfigError, SentadaptError
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.model import lora
from sentadapt.model.compiling import compiled_training, step_marker
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.base import Recipe
from sentadapt.stopping.training import StopAtStepBoundary, StopPoll, StopRequest, TrainingInterrupted, stopped_by
from sentadapt.storage.durable import atomic_folder, recover_interrupted_writes
from sentadapt.storage.run_folder import RunDir
from sentadapt.teacher.table import TeacherTable
from sentadapt.train.checkpoint import (
    load_training_checkpoint,
    newest_usable_checkpoint,
    stage_rng_state,
    write_training_checkpoint,
)
from sentadapt.train.compute import hand_back_an_earlier_precision, use_tf32
from sentadapt.train.feed import BatchPrefetcher, MicroBatches, neighbour_batches, pad_multiple
from sentadapt.train.guard import GuardedUpdate, NanRule, ReadStep, StepGuard, StepRecords
from sentadapt.train.objective import LossOutput, Objective, build_objective
from sentadapt.train.optim import build_optimizer, lr_multiplier, rewind_schedule
from sentadapt.train.pass_costs import set_up_arithmetic
from sentadapt.train.state import DevSelection, Training, TrainResult, TrainState
from sentadapt.train.steps import eval_interval, total_steps_for
from sentadapt.train.tracking import (
    Reporter,
    RunRecords,
    SilentReporter,
    Throughput,
    Trackers,
    TrainLog,
    describe_run,
    resolve_trackers,
)

__all__ = ["Reporter", "SilentReporter", "TrainResult", "TrainState", "Trainer", "Training", "TrainingDiverged",
           "TrainingInputs", "TrainingInterrupted"]


class TrainingDiverged(SentadaptError):
    """The loss became NaN or infinite."""


class TrainingModule(nn.Module):
    """Encoder + recipe heads as one module, so DDP wraps (and syncs) both; forward returns the loss."""

    def __init__(self, encoder: Encoder, heads: nn.ModuleDict, objective: Objective) -> None:
        super().__init__()
        self.encoder = encoder
        self.heads = heads
        # a list: the objective (the recipe, a frozen base) is not a module: out of state_dict, optimizer and DDP
        self._objective = [objective]
        # a teacher of another width's training-only projection: optimised and checkpointed, never exported
        distillation = objective.distillation
        self.projection = distillation.projection if distillation is not None else None

    def forward(self, batch: dict[str, torch.Tensor]) -> LossOutput:
        return self._objective[0](self.encoder, self.heads, batch)


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
    teacher_table: TeacherTable | None = None  # --teacher: its vectors of every example (teacher/table.py)
    # the model `base_dev` is of, where it is not the one training starts from (config.base): a later stage of a
    # staged run starts from the stage before and is weighed against the run's base model
    base_model: str | None = None


def parameter_groups(module: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (BERT's recipe); frozen params left out."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, parameter in module.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class Trainer:
    """One stage's training: `Trainer(inputs, reporter).run(resume=...)` trains, leaves the chosen model in the
    run's best/ folder and returns a Training; run/finish.py then publishes it, decides and writes metrics.json.

    It decides *when* (each step, evaluation, checkpoint) and on which process; its collaborators do the rest:
    DevSelection (dev scores, the best model, patience), GuardedUpdate and NanRule (the non-finite guard on the
    device and on the host), StopPoll (stop signals), RunRecords (train.log and trackers), MicroBatches (data)."""

    def __init__(self, inputs: TrainingInputs, reporter: Reporter | None = None,
                 on_checkpoint: Callable[[Path], None] | None = None) -> None:
        from accelerate import Accelerator
        from accelerate.utils import ProjectConfiguration, set_seed

        self.inputs = inputs
        self.config = inputs.config
        self.train_config = cfg = inputs.config.train
        self.reporter: Reporter = reporter or SilentReporter()
        self.on_checkpoint = on_checkpoint  # the main process's hook once a checkpoint is complete
        self.output = Path(inputs.config.output)
        self.run_dir = RunDir(self.output)
        self.checkpoints = self.run_dir.checkpoints
        use_tf32(cfg.tf32)
        arithmetic = set_up_arithmetic(cfg.mixed_precision, inputs.encoder, self.reporter.message)  # timed here
        hand_back_an_earlier_precision(arithmetic.precision)
        tracker_names = resolve_trackers(cfg.records.report_to)
        self.accelerator = Accelerator(
            log_with=tracker_names or None,
            project_config=ProjectConfiguration(project_dir=str(self.output),
                                                logging_dir=str(self.run_dir.tensorboard)),
            mixed_precision=arithmetic.precision,
            gradient_accumulation_steps=cfg.grad_accum,
            # without CUDA, accelerate only sets up multi-process (gloo) training when told it runs on CPU
            cpu=not torch.cuda.is_available(),
        )
        if cfg.batch_size % self.accelerator.num_processes:
            raise ConfigError(f"batch_size: {cfg.batch_size} does not split evenly over "
                              f"{self.accelerator.num_processes} processes")
        # per-process seeds: otherwise every rank draws the same augmentation masks for its local examples
        set_seed(cfg.seed, device_specific=True)
        self.is_main = self.accelerator.is_main_process
        self.environment = describe_run(self.accelerator, cfg, arithmetic)
        self.trackers = Trackers(self.accelerator, tracker_names, run_name=self.output.name)
        self.records = RunRecords(TrainLog(self.run_dir.train_log), self.trackers, self.reporter, cfg.records.log_every,
                                  self.is_main)
        self.state = TrainState(total_steps=total_steps_for(len(inputs.examples), inputs.config))
        self.eval_every = eval_interval(len(inputs.examples), inputs.config)
        self.lr_at = lr_multiplier(cfg.optim.schedule, self.state.total_steps, cfg.optim.warmup_ratio)
        self.selection = DevSelection(inputs.evaluator, inputs.dev_name, inputs.base_dev, inputs.encoder,
                                      cfg.evaluation.eval_batch_size, cfg.evaluation.patience, self.reporter,
                                      self.records)
        self.stop = StopPoll(StopRequest(self.reporter.message), self.accelerator.num_processes,
                             self._max_over_processes, cfg.records.log_every)
        self.nan_rule = NanRule(cfg.records.on_nan, cfg.records.max_nan_skips, self.reporter.message)
        self.step_records = StepRecords()  # each step's numbers, on the device until a read-back
        self.throughput = Throughput()
        # Built by _build: whether the run resumes decides when the base model is scored (before the export
        # pooling and the adapters change it), so the model cannot be built here.
        self.module: TrainingModule | None = None
        self.model: Any = None  # the module as accelerate prepared it (DDP-wrapped over several processes)
        self.optimizer: Any = None  # accelerate's wrapper of the AdamW or LARS optimizer
        self.scheduler: Any = None  # LambdaLR over self.lr_at
        self.micro_batches: MicroBatches | None = None
        self.update: GuardedUpdate | None = None  # after a resume: the guard starts from the skips so far

    def _build(self, resume: bool) -> None:
        inputs, cfg = self.inputs, self.train_config
        heads = inputs.recipe.trainable_heads()
        if not resume:
            self.selection.score_base(self.state, self.is_main)  # the base model as the user has it (its pooling)
        self.selection.encoder = inputs.recipe.prepare_export(inputs.encoder, heads)  # scored as they are kept
        table = inputs.teacher_table
        # before resumed weights load (a frozen base is the base)
        objective = build_objective(cfg, inputs.recipe, inputs.encoder, table, self._student_sample)
        adapters = lora.settings_of(cfg)  # peft and the recipe were checked before loading
        if adapters is not None:  # after the frozen base is copied: it stays a plain model
            lora.attach(inputs.encoder, adapters)
        self.module = TrainingModule(inputs.encoder, heads, objective).to(self.accelerator.device)
        if cfg.gradient_checkpointing:
            inputs.encoder.enable_gradient_checkpointing()
        optimizer = build_optimizer(cfg.optim.optimizer, parameter_groups(self.module, cfg.optim.weight_decay), cfg.lr,
                                    (cfg.optim.adam_beta1, cfg.optim.adam_beta2), cfg.optim.adam_eps)
        # Not passed to accelerator.prepare: it would step the schedule once per process.
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_at)
        self.model, self.optimizer = self.accelerator.prepare(self.module, optimizer)
        self.micro_batches = MicroBatches(inputs.examples, cfg, inputs.encoder.tokenizer.pad_token_id,
                                          pad_multiple(cfg, self.accelerator.device),
                                          neighbour_batches(table.vectors if table is not None else None, cfg,
                                                            self.reporter.message),
                                          objective.distillation, self.accelerator.process_index,
                                          self.accelerator.num_processes)

    def _student_sample(self, rows: int) -> torch.Tensor:
        """The base's vectors of the first `rows` examples' texts (what a projection to the teacher starts from)."""
        examples = self.inputs.examples
        texts = examples.example_texts(0, min(rows, len(examples)))
        return self.inputs.encoder.encode(texts, batch_size=self.train_config.evaluation.eval_batch_size,
                                          max_length=self.train_config.max_length)

    def run(self, resume: bool = False) -> Training:
        started, cfg = time.perf_counter(), self.train_config
        self._build(resume)
        if resume:
            self._resume()
        guard = StepGuard(cfg.records.on_nan, cfg.records.max_nan_skips, self.state.nan_skips, self.accelerator.device)
        self.update = GuardedUpdate(self.accelerator, self.model, self.module, self.optimizer, guard,  # type: ignore[arg-type]
                                    cfg.optim.max_grad_norm)
        self.reporter.start(self.state.total_steps, self.state.step)
        try:
            with self.stop.request, compiled_training(self.inputs.encoder.backbone, cfg.compile, self.reporter.message,
                                                      self.accelerator.device.type, self.state.steps_left):
                missed = resume and self.selection.missed(self.state, self.eval_every)
                stopped = "early-stopped" if missed and self._evaluate() else self._train_steps()
        except StopAtStepBoundary:  # a second signal is a plain KeyboardInterrupt: it leaves without writing
            path = self._save_checkpoint()
            raise stopped_by(self.stop.signum, self.state.step, path, self.output) from None
        finally:
            self.reporter.finish()
        last_step_unscored = self.eval_every == 0 or self.state.step % self.eval_every
        if stopped == "completed" and last_step_unscored:
            self._evaluate()
        if self.selection.blind and self.is_main:  # no dev set: the last step is the chosen model
            self._save_model(self.run_dir.best)
        return Training(self.output, self.state, stopped, started, self.environment)

    def _train_steps(self) -> str:
        """The loop. Each step: grad_accum micro-batches → loss → backward, then one optimizer step (or a skip)
        queued on the device; the loss, its parts and the step's finiteness stay there (StepRecords) until a
        read-back every log_every steps. Then, at the step boundary: stop signals, evaluation, checkpoint."""
        cfg, accelerator, state = self.train_config, self.accelerator, self.state
        assert self.micro_batches is not None and self.update is not None
        world, device = accelerator.num_processes, accelerator.device
        step_begins = step_marker(cfg.compile, device.type)
        self.model.train()
        with BatchPrefetcher(self.micro_batches, device, state.step * cfg.grad_accum,
                             state.total_steps * cfg.grad_accum) as batches:
            while state.step < state.total_steps:
                loss = torch.zeros((), device=device)
                parts: dict[str, torch.Tensor] = {}
                norm, bad = None, torch.zeros((), device=device)
                for micro in range(cfg.grad_accum):
                    batch = batches.get(state.step * cfg.grad_accum + micro)
                    with accelerator.accumulate(self.model):
                        step_begins()
                        output = self.model(batch)
                        # Gathered negatives: each rank back-propagates only its shard and DDP averages over
                        # ranks, so × world gives the global loss's gradient (accelerate divides by grad_accum).
                        accelerator.backward(output.total * world)
                        loss = loss + output.total.detach().float() / cfg.grad_accum
                        for key, value in output.parts.items():
                            parts[key] = parts.get(key, 0.0) + value.float() / cfg.grad_accum
                        if accelerator.sync_gradients:  # the last micro-batch: clip, check, step or skip
                            norm, bad = self.update(loss)
                self.step_records.add(state.step + 1, loss, norm, bad, parts)
                self.scheduler.step()
                state.step += 1
                self.throughput.add(cfg.batch_size * cfg.grad_accum)
                self.reporter.advance(state.step, self.scheduler.get_last_lr()[0], self.throughput.rate())
                if state.step % cfg.records.log_every == 0 or state.step == 1:
                    self._read_back()
                if self.stop.requested(state.step):
                    raise StopAtStepBoundary  # a step boundary: the checkpoint run() writes is exact
                if self.eval_every and state.step % self.eval_every == 0 and self._evaluate():
                    return "early-stopped"
                if cfg.records.checkpoint_every and state.step % cfg.records.checkpoint_every == 0:
                    self._save_checkpoint()
        self._read_back()
        return "completed"

    def _read_back(self) -> None:
        """Copy the pending steps' records to the host (one sync): log them, report skipped steps, and stop at the
        step that broke the `on_nan` rule (its update and every later one were skipped on the device)."""
        lr, rate = self.scheduler.get_last_lr()[0], self.throughput.rate()
        for read in self.step_records.read_back():
            if not self.nan_rule.carries_on(read, self.state):
                self._diverged(read)
            self.records.step(read, self.state, lr, rate)
        self.throughput.restart()

    def _diverged(self, read: ReadStep) -> None:
        """Stop with the checkpoint of the last good step: the model's weights still are its (on the device, every
        later update was skipped); the step counter and the schedule go back to it. Data order follows the step."""
        self.state.step = read.step - 1
        rewind_schedule(self.scheduler, self.optimizer, self.lr_at, self.state.step)
        raise TrainingDiverged(self.nan_rule.stop_message(read, self._save_checkpoint()))

    def _max_over_processes(self, value: int) -> int:
        flag = torch.tensor([value], device=self.accelerator.device)
        if self.accelerator.num_processes > 1:
            flag = self.accelerator.gather(flag)
        return int(flag.max().item())

    def _evaluate(self) -> bool:
        """Score the dev set on the main process, keep the model if best; True: stop early (all processes agree)."""
        from accelerate.utils import broadcast

        if self.selection.blind:
            return False
        self._read_back()  # a run that must stop does so before scoring (and saving) its frozen weights
        stop = torch.zeros(1, device=self.accelerator.device)
        if self.is_main:
            best, stop[0] = self.selection.evaluate(self.state)
            if best:  # saved before the next step changes the weights
                self._save_model(self.run_dir.best)
        self.model.train()
        return bool(broadcast(stop).item())

    def _save_model(self, folder: Path) -> None:
        with atomic_folder(folder, {"step": self.state.step}) as written:
            self.accelerator.unwrap_model(self.model).encoder.save(written)

    def _save_checkpoint(self) -> Path:
        """Every process stages its RNG state; the main process writes the checkpoint; all wait for it.

        The pending step records are read back first: a step that must stop the run stops it here, with
        the checkpoint of its last good step, instead of being saved as a normal one."""
        if len(self.step_records):
            self._read_back()
        stage_rng_state(self.checkpoints, self.accelerator.process_index)
        self.accelerator.wait_for_everyone()
        if self.is_main:
            model, keep = self.accelerator.unwrap_model(self.model), self.train_config.records.keep_checkpoints
            path = write_training_checkpoint(self.checkpoints, self.state.step, model, self.optimizer, self.scheduler,
                                             self.accelerator.scaler, dict(self.state.__dict__), keep)
            if self.on_checkpoint is not None:
                self.on_checkpoint(path)
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
        saved = load_training_checkpoint(
            candidate, self.accelerator.unwrap_model(self.model), self.optimizer, self.scheduler,
            self.accelerator.scaler, self.accelerator.process_index, self.accelerator.num_processes)
        known = {f.name for f in dataclasses.fields(TrainState)}  # a checkpoint may hold a field since removed
        saved = {name: value for name, value in saved.items() if name in known}
        self.state = TrainState(**{**saved, "total_steps": self.state.total_steps})
        if self.is_main:
            self.records.train_log.trim_after(self.state.step)
        self.reporter.message(f"resumed from {candidate} (step {self.state.step})")

