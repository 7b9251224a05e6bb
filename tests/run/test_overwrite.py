"""Nothing lost under `--overwrite` (docs/reliability.md): the run it replaces waits aside until the new run has
finished, whenever the new one is stopped, and says where it is; `--overwrite` replaces only what sentadapt wrote
(adapt, export, pairs); what a run reads cannot live in the folder it replaces."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_adapt
from tests.run.test_faults import COMMON, start, wait_for_pause
from tests.run.test_hostile import files_of


def both_kept(run: Path) -> str:
    aside = run.parent / f".{run.name}.replaced"
    return (f"--output {run}: the new run is not finished, so the run it replaces is kept in {aside}; continue the "
            f"new one with: sentadapt adapt --resume --output {run} (the old one is deleted when it finishes), or get "
            f"the old one back with: rm -r {run} && mv {aside} {run}")


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "corpus.txt"
    path.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    return path


@pytest.fixture(scope="module")
def old_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run (model, metrics.json) that the tests' --overwrite runs replace; each test works on a copy."""
    folder = tmp_path_factory.mktemp("old")
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"the printer {i} is jammed\n" for i in range(40)))
    run = folder / "run"
    done = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--set", "seed=3")
    assert done.exit_code == 0, done.output
    return run


@pytest.fixture
def run(old_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(old_run, copy)
    (copy / "config.yaml").write_text((old_run / "config.yaml").read_text().replace(str(old_run), str(copy)))
    return copy


@pytest.mark.parametrize(("mode", "step", "signum"), [
    ("pause-after-log", 1, signal.SIGINT),  # the first step, its checkpoint about to be written
    ("pause-after-log", 6, signal.SIGTERM),  # mid-run: a preemption
    ("pause-in-checkpoint", 4, signal.SIGINT),  # inside a checkpoint's write
], ids=["ctrl-c-at-step-1", "sigterm-at-step-6", "ctrl-c-inside-checkpoint-4"])
def test_an_interrupted_replacement_keeps_the_old_run_says_where_and_resume_finishes_it(
    mode: str, step: int, signum: int, run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    before = files_of(run)
    process, marker = start(mode, step, run, tiny_model_dir, texts, "--overwrite")
    wait_for_pause(process, marker)
    process.send_signal(signum)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    assert process.returncode == 128 + signum, stderr
    aside = run.parent / ".run.replaced"
    assert files_of(aside) == before  # byte for byte, while the new run's checkpoint is in RUN
    assert both_kept(run) in stderr
    assert stderr.strip().splitlines()[-1].endswith(f"resume with: sentadapt adapt --resume --output {run}")

    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert (run / "metrics.json").is_file()
    assert not aside.exists()  # the new run finished: only now is the old one deleted


def test_the_line_printed_gets_the_old_run_back(run: Path, tiny_model_dir: Path, texts: Path) -> None:
    before = files_of(run)
    process, marker = start("pause-after-log", 3, run, tiny_model_dir, texts, "--overwrite")
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    restore = both_kept(run).split("get the old one back with: ")[1]
    assert restore in stderr
    subprocess.run(restore, shell=True, check=True)
    assert files_of(run) == before


def test_a_killed_replacement_with_a_checkpoint_keeps_both_and_the_next_command_says_so(
    run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    before = files_of(run)
    process, marker = start("pause-after-log", 5, run, tiny_model_dir, texts, "--overwrite")
    wait_for_pause(process, marker)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    again = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON)
    assert again.exit_code == 2
    assert both_kept(run) in again.stderr
    assert again.stderr.strip().splitlines()[-1] == (
        f"Error: --output {run}: holds an unfinished run; pass --resume to continue it or --overwrite to replace it")
    assert files_of(run.parent / ".run.replaced") == before

    # a second --overwrite replaces the unfinished run; the finished one still waits, and goes when this finishes
    replaced = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON,
                         "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert (f"--output {run}: replacing the unfinished run that was there; the run it was to replace still waits in "
            f"{run.parent / '.run.replaced'} until this one finishes") in replaced.stderr
    assert not (run.parent / ".run.replaced").exists()


# ---------------------------------------------------------------------- --overwrite replaces only what sentadapt wrote


def test_overwrite_refuses_the_current_folder_holding_a_users_files(
    tiny_model_dir: Path, texts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "important.txt").write_text("mine")
    (folder / "data" / "table.csv").write_text("a,b\n")
    monkeypatch.chdir(folder)
    result = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", ".", *COMMON, "--overwrite")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: --output {folder}: holds files sentadapt did not write (data, important.txt); --overwrite replaces "
        "only a run folder of `sentadapt adapt`; choose a new or empty folder")
    assert (folder / "important.txt").read_text() == "mine" and (folder / "data" / "table.csv").is_file()


def test_overwrite_refuses_a_folder_whose_config_yaml_is_another_tools(
    tiny_model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "config.yaml").write_text("model: resnet\nepochs: 3\n")
    result = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(folder), *COMMON,
                       "--overwrite")
    assert result.exit_code == 2
    assert "holds files sentadapt did not write (config.yaml)" in result.stderr
    assert (folder / "config.yaml").read_text() == "model: resnet\nepochs: 3\n"


def test_export_overwrite_refuses_a_folder_it_did_not_write_and_replaces_its_own(
    old_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentadapt.errors import ConfigError
    from sentadapt.exporting import export

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.csv").write_text("x\n")
    monkeypatch.chdir(precious)
    with pytest.raises(ConfigError) as error:
        export(old_run, ".", format="hf", overwrite=True)
    assert str(error.value) == (".: holds files sentadapt did not write (notes.csv); --overwrite replaces only an "
                                "earlier `sentadapt export`; choose a new or empty folder")
    assert (precious / "notes.csv").read_text() == "x\n"
    out = tmp_path / "out"
    export(old_run, out, format="hf")
    assert export(old_run, out, format="hf", overwrite=True).output == out  # its own export: replaced


def test_overwrite_refuses_a_run_holding_a_users_file_and_folder_and_touches_neither(
    run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    (run / "notes.txt").write_text("mine")
    (run / "my-analysis").mkdir()
    (run / "my-analysis" / "plot.csv").write_text("x\n")
    before = files_of(run)
    result = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: --output {run}: holds files sentadapt did not write (my-analysis, notes.txt), which --overwrite "
        "would delete; move them out of the folder, or choose another output")
    assert files_of(run) == before
    assert not (run.parent / ".run.replaced").exists()


def test_a_run_finished_before_model_files_were_recorded_is_still_replaced_and_a_users_file_still_refused(
    run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    import json

    metrics = json.loads((run / "metrics.json").read_text())
    assert "modules.json" in metrics.pop("model_files")  # what an older run's metrics.json lacks
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "README.md").write_text("my notes on this run")
    refused = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert refused.exit_code == 2 and "did not write (README.md)" in refused.stderr
    (run / "README.md").unlink()
    replaced = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert replaced.exit_code == 0, replaced.output


def test_export_overwrite_refuses_an_export_holding_a_users_file_or_folder(old_run: Path, tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError
    from sentadapt.exporting import export

    out = tmp_path / "ship"
    export(old_run, out, format="hf")
    (out / "DEPLOY-NOTES.txt").write_text("deploy on friday")
    (out / "k8s").mkdir()
    (out / "k8s" / "deploy.yaml").write_text("kind: Deployment\n")
    before = files_of(out)
    with pytest.raises(ConfigError) as error:
        export(old_run, out, format="hf", overwrite=True)
    assert str(error.value) == (f"{out}: holds files sentadapt did not write (DEPLOY-NOTES.txt, k8s), which "
                                "--overwrite would delete; move them out of the folder, or choose another output")
    assert files_of(out) == before
    shutil.rmtree(out / "k8s")
    (out / "DEPLOY-NOTES.txt").unlink()
    assert export(old_run, out, format="hf", overwrite=True).output == out


def test_pairs_overwrite_replaces_only_its_own_unlabelled_file(tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError
    from sentadapt.pairs.devset import check_pairs_request

    mine = tmp_path / "labels.tsv"
    mine.write_text("sentence1\tsentence2\tscore\na\tb\t1\n")
    with pytest.raises(ConfigError) as error:
        check_pairs_request(10, mine, overwrite=True)
    assert str(error.value) == (f"--output {mine}: not a file `sentadapt pairs` wrote (its first line is not the '# "
                                "Label each pair' comment); --overwrite replaces only such a file; choose another name")
    proposed = tmp_path / "to-label.tsv"
    proposed.write_text("# Label each pair: …\nsentence1\tsentence2\tlabel\na\tb\t\nc\td\t\n")
    check_pairs_request(10, proposed, overwrite=True)  # nothing labelled yet: replaced
    proposed.write_text("# Label each pair: …\nsentence1\tsentence2\tlabel\na\tb\t4\nc\td\t\n")
    with pytest.raises(ConfigError) as error:
        check_pairs_request(10, proposed, overwrite=True)
    assert str(error.value) == (f"--output {proposed}: 1 of its 2 pairs are labelled, and --overwrite would lose them; "
                                "move the file, or choose another --output")


@pytest.mark.parametrize("inside", ["corpus", "base"])
def test_what_a_run_reads_cannot_live_in_the_folder_it_replaces(
    inside: str, run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    corpus, base = texts, tiny_model_dir
    if inside == "corpus":
        corpus = run / "corpus.txt"
        shutil.copy(texts, corpus)
    else:
        base = run  # adapting a finished run further, into its own folder
    before = files_of(run)
    result = run_adapt(str(corpus), "--base", str(base), "--output", str(run), *COMMON, "--overwrite")
    assert result.exit_code == 2
    option = "corpus" if inside == "corpus" else "--base"
    assert result.stderr.strip() == (
        f"Error: --output {run}: {option} {corpus if inside == 'corpus' else run} is inside this folder, which the new "
        "run replaces; write the new run to another --output, or move it out first")
    assert files_of(run) == before


def test_resume_on_a_finished_run_says_it_is_finished_and_what_to_do(run: Path, tiny_model_dir: Path,
                                                                      texts: Path) -> None:
    result = run_adapt("--resume", "--output", str(run))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: --resume: {run} is a finished run (its metrics.json is written); nothing to resume: evaluate or "
        "export it, or pass --overwrite instead of --resume to train a new run there")
    # without either: what to pass, not a loop back to --resume
    fresh = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON)
    assert fresh.stderr.strip().splitlines()[-1] == (
        f"Error: --output {run}: holds a finished run; pass --overwrite to replace it, or choose another --output")


def test_an_interrupted_replacement_is_named_as_unfinished_by_eval_and_decide_with_the_way_back(
    run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    """eval RUN / decide RUN on a run an `--overwrite` stopped after its first checkpoint: not 'not a model folder',
    but what it is, how to finish it and where the replaced run waits; a folder that is no run gets no --resume."""
    from typer.testing import CliRunner

    from sentadapt.cli import app

    process, marker = start("pause-after-log", 2, run, tiny_model_dir, texts, "--overwrite")
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)
    marker.with_suffix(".go").write_text("go")
    process.communicate()
    aside = run.parent / ".run.replaced"
    expected = (f"Error: {run}: an unfinished run of `sentadapt adapt` (no model published yet); finish it with: "
                f"sentadapt adapt --resume --output {run}; the run it replaces is kept in {aside} (get it back with: "
                f"rm -r {run} && mv {aside} {run})")
    runner = CliRunner()
    evaluated = runner.invoke(app, ["eval", str(run), "--sts", "stsb"])
    assert evaluated.exit_code == 1 and " ".join(evaluated.stderr.split()) == expected
    decided = runner.invoke(app, ["decide", str(run), "--dev", str(texts)])
    assert decided.exit_code == 2 and " ".join(decided.stderr.split()) == expected
    data = run.parent / "data"
    data.mkdir()
    (data / "pairs.tsv").write_text("sentence1\tsentence2\tscore\n")
    not_a_run = runner.invoke(app, ["decide", str(data), "--dev", str(texts)])
    assert " ".join(not_a_run.stderr.split()) == (
        f"Error: {data}: not a finished run with a model in it; pass the --output folder of a finished `sentadapt "
        "adapt`")


@pytest.mark.parametrize(("place", "named"), [
    ("notes.txt", "notes.txt"),  # depth 1, a file
    ("my-analysis/plot.csv", "my-analysis"),  # depth 1, a folder: named once
    ("2_Pooling/mynote.txt", "2_Pooling/mynote.txt"),  # depth 2, beside the model's own file
    ("2_Pooling/mine/keep.txt", "2_Pooling/mine"),  # depth 2, a folder
    ("checkpoints/my-backup/keep.txt", "checkpoints/my-backup"),  # a folder inside checkpoints/
    ("checkpoints/keep.txt", "checkpoints/keep.txt"),  # a file inside checkpoints/
    ("checkpoints/step-0000010/keep.txt", "checkpoints/step-0000010/keep.txt"),  # inside a checkpoint
    ("checkpoints/step-0000010/mine/keep.txt", "checkpoints/step-0000010/mine"),
], ids=lambda value: value.replace("/", "|"))
def test_overwrite_refuses_a_users_file_or_folder_at_any_depth_and_deletes_nothing(
    place: str, named: str, run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    assert (run / "checkpoints" / "step-0000010").is_dir() and (run / "2_Pooling" / "config.json").is_file()
    (run / place).parent.mkdir(parents=True, exist_ok=True)
    (run / place).write_text("mine")
    before = files_of(run)
    result = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"Error: --output {run}: holds files sentadapt did not write ({named}), which --overwrite would delete; move "
        "them out of the folder, or choose another output")
    assert files_of(run) == before
    assert not (run.parent / ".run.replaced").exists()


@pytest.mark.parametrize("place", ["2_Pooling/config.json", "checkpoints/step-0000010/model.safetensors"])
def test_overwrite_refuses_a_file_sentadapt_wrote_that_the_user_changed_since(
    place: str, run: Path, tiny_model_dir: Path, texts: Path
) -> None:
    with (run / place).open("ab") as handle:
        handle.write(b" ")
    result = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert result.exit_code == 2, result.output
    assert f"did not write ({place} (changed since sentadapt wrote it))" in result.stderr


def test_a_run_with_only_its_own_files_at_every_depth_is_replaced(run: Path, tiny_model_dir: Path, texts: Path) -> None:
    import json

    sums = json.loads((run / "metrics.json").read_text())["model_files"]  # each published file with its SHA-256
    assert "2_Pooling/config.json" in sums and all(len(digest) == 64 for digest in sums.values())
    replaced = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    again = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert again.exit_code == 0, again.output  # what the first replacement wrote is recognised in turn


def test_export_overwrite_refuses_a_users_file_nested_in_its_output_or_a_changed_one(old_run: Path,
                                                                                      tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError
    from sentadapt.exporting import export

    out = tmp_path / "ship"
    export(old_run, out, format="sentence-transformers")
    (out / "2_Pooling" / "mine.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"did not write \(2_Pooling/mine.txt\)"):
        export(old_run, out, format="sentence-transformers", overwrite=True)
    (out / "2_Pooling" / "mine.txt").unlink()
    (out / "2_Pooling" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"did not write \(2_Pooling/config.json \(changed since sentadapt wrote it"):
        export(old_run, out, format="sentence-transformers", overwrite=True)


def test_the_run_card_is_the_runs_own_file_until_the_user_edits_it(run: Path, tiny_model_dir: Path,
                                                                   texts: Path) -> None:
    """Issue 82: RUN/README.md, the decision first, is written by the run and listed with its SHA-256."""
    import json

    card = (run / "README.md").read_text()
    assert card.splitlines()[2].startswith("**Decision: none yet** — no labelled pairs measured whether this beats")
    assert "`sentadapt pairs CORPUS --run " in card
    assert " -n 100 --output to-label.tsv`, then `sentadapt decide " in card
    assert "README.md" in json.loads((run / "metrics.json").read_text())["model_files"]
    (run / "README.md").write_text(card + "\nmy notes\n")
    refused = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert refused.exit_code == 2 and "did not write (README.md (changed since sentadapt wrote it))" in refused.stderr
    (run / "README.md").write_text(card)
    replaced = run_adapt(str(texts), "--base", str(tiny_model_dir), "--output", str(run), *COMMON, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
