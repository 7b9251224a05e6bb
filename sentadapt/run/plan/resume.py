"""Where resume is decided: what `--resume auto` finds in the folder, the saved config a resumed run reads back,
and the options it says it ignores."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from sentadapt.config.schema import RunConfig
from sentadapt.events import Note, quiet
from sentadapt.run.plan.settings import Settings
from sentadapt.storage.run_folder import RunDir

RESUME_LAST = "last"  # continue from the last checkpoint (a bare `--resume`)
RESTART = "restart"  # `--resume auto` on a run that stopped before its first checkpoint: start it again
FINISHED = "finished"  # `--resume auto` on a finished run: nothing to do


def resume_auto_mode(output: Path, note: Note = quiet) -> str | None:
    """`--resume auto`: finished (metrics.json) | last (a checkpoint or finished stage to continue from) |
    restart (a run that stopped before its first checkpoint: start it again) | None (a new run)."""
    run_dir = RunDir(output)
    if run_dir.is_finished():
        note(f"--resume auto: {output} is a finished run (metrics.json is written); nothing to do")
        return FINISHED
    if run_dir.is_auto():  # --recipe auto: each candidate is finished, resumed or started
        note(f"--resume auto: continuing the --recipe auto run in {output} (with its saved plan and configs)")
        return RESUME_LAST
    if run_dir.has_progress():
        note(f"--resume auto: resuming the run in {output} from its last checkpoint (with its saved config.yaml)")
        return RESUME_LAST
    if run_dir.has_config():
        note(f"--resume auto: {output} holds no checkpoint yet; starting the run again from the beginning")
        return RESTART
    return None


def resumed_config(output: Path, num_proc: int | None = None) -> RunConfig:
    """The saved config.yaml of a run to resume (authoritative); only the machine setting num_proc may change."""
    from sentadapt.config.merging import load_run_config
    from sentadapt.recipes import RECIPES

    config = load_run_config(RunDir(output).config_file, {name: RECIPES.get(name).Config for name in RECIPES})
    # the directory may have been moved since it was written; num_proc is the machine's, not the run's
    config = dataclasses.replace(config, output=os.path.abspath(output), num_proc=num_proc or config.num_proc)
    return config


def ignored_on_resume(settings: Settings, extra: Sequence[str] = ()) -> list[str]:
    """The options a resumed run does not apply (its saved config is authoritative; only --num-proc, a setting of
    the machine, applies), as the command line spells them."""
    from sentadapt.run.adapt_options import OPTIONS_BY_NAME

    ignored: list[str] = []
    for key in settings.train_flags():
        ignored.append("--lora" if key.startswith("lora_") else OPTIONS_BY_NAME[key].flag)
    for key, value in settings.run_flags().items():
        envvar = OPTIONS_BY_NAME[key].envvar
        from_environment = envvar is not None and str(value) == os.environ.get(envvar)
        if value != OPTIONS_BY_NAME[key].default and key != "num_proc" and not from_environment:
            ignored.append(OPTIONS_BY_NAME[key].flag)  # a value $SENTADAPT_DATA_DIR gave is not the user's to hear of
    ignored += ["--base"] if settings.base is not None else []
    ignored += ["--recipe"] if settings.recipe is not None else []
    ignored += ["--config"] if settings.config_file is not None else []
    ignored += ["--set"] if settings.set_options or settings.set_values else []
    ignored += ["--preset"] if settings.preset else []
    return list(dict.fromkeys(ignored + list(extra)))
