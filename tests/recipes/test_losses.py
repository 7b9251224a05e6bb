from __future__ import annotations

import datetime
import math
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sentadapt.recipes.losses import gather_across_processes, nt_xent
from tests.conftest import FLOAT32_RTOL


def reference_nt_xent(view1: torch.Tensor, view2: torch.Tensor, temperature: float,
                      related: set[tuple[int, int]] = frozenset()) -> float:
    """ConSERT eq. (1), term by term: r_1..r_N = view1, r_{N+1}..r_{2N} = view2, mean over the 2N anchors. `related`:
    sentence pairs (i, j) whose views leave each other's denominators."""
    r = [v.double() for v in view1] + [v.double() for v in view2]
    n = len(view1)

    def sim(a: torch.Tensor, b: torch.Tensor) -> float:
        return (a @ b / (a.norm() * b.norm())).item()

    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        numerator = math.exp(sim(r[i], r[j]) / temperature)
        denominator = sum(math.exp(sim(r[i], r[k]) / temperature) for k in range(2 * n)
                          if k != i and (k == j or (i % n, k % n) not in related))
        total += -math.log(numerator / denominator)
    return total / (2 * n)


def views(n: int, d: int, seed: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=dtype), torch.randn(n, d, generator=g, dtype=dtype)


@pytest.mark.parametrize(("n", "d", "temperature"), [(1, 4, 0.1), (2, 3, 0.5), (5, 8, 0.1), (16, 32, 0.05)])
def test_nt_xent_matches_the_papers_equation(n: int, d: int, temperature: float) -> None:
    a, b = views(n, d, seed=n, dtype=torch.float64)
    expected = reference_nt_xent(a, b, temperature)
    assert nt_xent(a, b, temperature).item() == pytest.approx(expected, abs=1e-6)
    # float32 inputs: same value up to float32 rounding
    assert nt_xent(a.float(), b.float(), temperature).item() == pytest.approx(expected, abs=1e-5)


def test_nt_xent_known_value() -> None:
    # 2 sentences, orthogonal unit vectors, identical views: every anchor has positive sim 1, negatives 0, 0
    e = torch.eye(2)
    assert nt_xent(e, e, 1.0).item() == pytest.approx(math.log(1 + 2 / math.e), rel=FLOAT32_RTOL)
    # a single sentence has no negatives: the positive is the whole denominator
    assert nt_xent(torch.ones(1, 3), torch.randn(1, 3), 0.1).item() == pytest.approx(0.0, abs=1e-7)


def test_related_pairs_leave_the_denominators_and_the_positive_stays() -> None:
    a, b = views(6, 8, seed=3, dtype=torch.float64)
    pairs = {(0, 1), (1, 0), (4, 5), (5, 4), (2, 2)}  # (2, 2): a sentence and itself, i.e. its own positive
    related = torch.zeros(6, 6, dtype=torch.bool)
    for i, j in pairs:
        related[i, j] = True
    expected = reference_nt_xent(a, b, 0.1, pairs - {(2, 2)})
    assert nt_xent(a, b, 0.1, related.repeat(2, 2)).item() == pytest.approx(expected, abs=1e-6)
    assert expected < reference_nt_xent(a, b, 0.1) - 1e-3  # fewer negatives: a lower loss, so the mask did act
    assert nt_xent(a, b, 0.1, torch.zeros(12, 12, dtype=torch.bool)).item() == pytest.approx(
        reference_nt_xent(a, b, 0.1), abs=1e-6)


def test_nt_xent_is_symmetric_in_the_views() -> None:
    a, b = views(8, 16, seed=1)
    assert nt_xent(a, b, 0.1).item() == pytest.approx(nt_xent(b, a, 0.1).item(), rel=FLOAT32_RTOL)


def test_nt_xent_computes_in_float32_for_bf16_inputs() -> None:
    a, b = views(32, 64, seed=2, dtype=torch.bfloat16)
    loss = nt_xent(a, b, 0.05)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert loss.item() == pytest.approx(nt_xent(a.float(), b.float(), 0.05).item(), rel=FLOAT32_RTOL)


def test_nt_xent_ignores_autocast() -> None:
    a, b = views(32, 64, seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = nt_xent(a, b, 0.05)
    assert under_autocast.dtype == torch.float32
    assert under_autocast.item() == pytest.approx(nt_xent(a, b, 0.05).item(), rel=FLOAT32_RTOL)  # bf16: ~1e-2 off


def test_nt_xent_is_lower_for_aligned_views() -> None:
    a, b = views(16, 32, seed=4)
    aligned = a + 0.05 * b
    assert nt_xent(a, aligned, 0.1).item() < 0.1 < nt_xent(a, b, 0.1).item()


def test_nt_xent_refuses_mismatched_views() -> None:
    with pytest.raises(ValueError, match=r"got \(3, 4\) and \(2, 4\)"):
        nt_xent(torch.zeros(3, 4), torch.zeros(2, 4), 0.1)


def test_gather_is_identity_without_a_process_group() -> None:
    assert not dist.is_initialized()
    tensor = torch.randn(3, 4)
    assert gather_across_processes(tensor) is tensor


# ---------------------------------------------------------------------- two real processes

WORLD, N, D_IN, D, TAU = 2, 8, 6, 5, 0.1


def global_problem() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs of both views for the whole global batch, and a shared linear 'encoder'."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, D_IN, generator=g), torch.randn(N, D_IN, generator=g), torch.randn(D_IN, D, generator=g)


def _worker(rank: int, port: int, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
        timeout=datetime.timedelta(seconds=30),
    )
    try:
        x1, x2, weight = global_problem()
        shard = slice(rank * N // WORLD, (rank + 1) * N // WORLD)
        w = weight.clone().requires_grad_(True)  # a replicated parameter, as under DDP
        x1_local, x2_local = x1[shard].clone().requires_grad_(True), x2[shard].clone().requires_grad_(True)
        view1 = gather_across_processes(x1_local @ w)
        view2 = gather_across_processes(x2_local @ w)
        loss = nt_xent(view1, view2, TAU)
        (loss * WORLD).backward()
        dist.all_reduce(w.grad)  # DDP's gradient averaging
        w.grad /= WORLD
        torch.save(
            {"loss": loss.detach(), "view1": view1.detach(), "w_grad": w.grad,
             "x1_grad": x1_local.grad, "x2_grad": x2_local.grad},
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_gathered_loss_and_scaled_gradients_match_one_process(tmp_path: Path) -> None:
    mp.spawn(_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    results = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD)]

    x1, x2, weight = global_problem()
    w = weight.clone().requires_grad_(True)
    x1, x2 = x1.clone().requires_grad_(True), x2.clone().requires_grad_(True)
    full_view1 = x1 @ w
    loss = nt_xent(full_view1, x2 @ w, TAU)
    loss.backward()

    for rank, result in enumerate(results):
        shard = slice(rank * N // WORLD, (rank + 1) * N // WORLD)
        assert torch.allclose(result["view1"], full_view1.detach(), atol=1e-6), "shards out of rank order"
        assert result["loss"].item() == pytest.approx(loss.item(), rel=FLOAT32_RTOL)
        assert torch.allclose(result["w_grad"], w.grad, atol=1e-6)
        # the local shard's gradient is the exact global one, times the world-size scale
        assert torch.allclose(result["x1_grad"] / WORLD, x1.grad[shard], atol=1e-6)
        assert torch.allclose(result["x2_grad"] / WORLD, x2.grad[shard], atol=1e-6)
