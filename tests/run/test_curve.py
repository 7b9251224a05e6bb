"""`adapt --plot` (issue 82): RUN/curve.png, the dev curve with each evaluation's paired CI over the base and the
training loss, drawn from what the run folder records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentadapt.evaluation.bootstrap import CONFIDENCE
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.run.curve import read_curve
from tests.conftest import run_adapt

PNG = b"\x89PNG\r\n\x1a\n"
TRAIN = ["--batch-size", "8", "--max-steps", "6", "--max-length", "16", "--set", "log_every=1"]


def test_plot_draws_the_dev_curve_with_each_steps_interval_and_the_loss(corpus: Path, tiny_model_dir: Path,
                                                                         pairs_tsv: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                       "--eval-every", "2", "--plot", *TRAIN)
    assert result.exit_code == 0, result.output
    assert (output / "curve.png").read_bytes().startswith(PNG)
    assert f"curve: {output / 'curve.png'}" in " ".join(result.stderr.split())
    # the three things a run ends with (issue 82): the curve (above), the card and the next step, in the summary
    summary = "".join(result.stdout.replace("│", "").split())
    assert "".join(f"card {output / 'README.md'}: the decision first, how to use the model".split()) in summary
    assert (output / "README.md").is_file() and "next" in summary
    metrics = json.loads((output / "metrics.json").read_text())
    curve = read_curve(output, StsEvaluator.from_pairs_file(pairs_tsv))
    assert curve.steps == [2, 4, 6] and curve.dev == [point["dev"] for point in metrics["history"][1:]]
    assert curve.base == metrics["base_score"] and curve.published == metrics["published_step"]
    # each band is base + the paired Δ's 95 % interval: it holds that step's score, and the last one is the decision's
    assert CONFIDENCE == 0.95
    assert all(band is not None and band[0] <= dev <= band[1] for band, dev in zip(curve.bands, curve.dev))
    if metrics["published_step"] == 6:
        last = curve.bands[-1]
        assert last is not None
        assert [last[0] - curve.base, last[1] - curve.base] == pytest.approx(metrics["dev_change_ci"], abs=1e-9)
    assert curve.loss_steps == list(range(1, 7)) and len(curve.losses) == 6
    # the curve is one of the run's own records: an --overwrite replaces it without a word
    again = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none",
                      "--overwrite", "--plot", *TRAIN)
    assert again.exit_code == 0, again.output
    assert read_curve(output, None).steps == [] and (output / "curve.png").read_bytes().startswith(PNG)


def test_plot_without_matplotlib_says_so_before_training(corpus: Path, tiny_model_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none",
                       "--plot", *TRAIN)
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: --plot needs matplotlib: pip install 'sentadapt[plot]'"
    assert not (tmp_path / "run" / "metrics.json").exists()
