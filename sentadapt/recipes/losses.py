"""Contrastive losses shared by the recipes, and the cross-process gather that enlarges their negatives."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor


def nt_xent(view1: Tensor, view2: Tensor, temperature: float) -> Tensor:
    """NT-Xent over 2N views (ConSERT eq. (1), SimCLR): a scalar, the mean over all 2N anchors.

    `view1[i]` and `view2[i]` are two views of sentence i, shape (N, D). Vectors are L2-normalised
    (cosine similarity). For each of the 2N views the positive is the other view of the same sentence
    and the negatives are the 2(N−1) views of the other sentences; its similarity to itself is
    excluded from the denominator. Computed in (at least) float32 with autocast off, so bf16/fp16
    inputs neither overflow at small temperatures nor lose the loss's precision.

    The official ConSERT code returns the SUM of the two directions (view1→view2 plus view2→view1,
    each a batch mean), i.e. 2× this value — a pure scale of the loss and its gradients. We follow
    the paper's mean over the 2N anchors.
    """
    if view1.dim() != 2 or view1.shape != view2.shape:
        raise ValueError(f"nt_xent: expected two (N, D) tensors of equal shape, got {tuple(view1.shape)} "
                         f"and {tuple(view2.shape)}")
    if not temperature > 0:
        raise ValueError(f"nt_xent: temperature must be > 0, got {temperature}")
    n = view1.shape[0]
    dtype = torch.promote_types(view1.dtype, torch.float32)
    # autocast would otherwise run the matmul below in bf16/fp16 despite the cast
    with torch.autocast(device_type=view1.device.type, enabled=False):
        views = F.normalize(torch.cat([view1, view2]).to(dtype), dim=-1)
        logits = views @ views.T / temperature
        self_pairs = torch.eye(2 * n, dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(self_pairs, float("-inf"))
        # row i (a view1 anchor) has its positive at column i + N; row i + N (view2) at column i
        index = torch.arange(n, device=logits.device)
        targets = torch.cat([index + n, index])
        return F.cross_entropy(logits, targets)


def gather_across_processes(tensor: Tensor) -> Tensor:
    """Concatenate `tensor` from every process along dim 0, in rank order (identity when not distributed).

    Used to compute a contrastive loss with the negatives of the whole global batch. Every process
    must pass the same shape (so the loader drops or pads an uneven last batch; all_gather hangs or
    fails otherwise). `all_gather` carries no gradient, so this rank's slot is refilled with the
    local, gradient-carrying tensor (as SimCSE does): a loss computed on the gathered tensors then
    back-propagates only through the local shard. Each rank thus gets the exact gradient of the
    global loss w.r.t. its own shard, but DDP *averages* parameter gradients over ranks, which would
    give 1/world_size of the global loss's gradient: the training loop must multiply the loss by
    the world size before backward (this function does not).
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    shards = [torch.empty_like(tensor, memory_format=torch.contiguous_format) for _ in range(dist.get_world_size())]
    dist.all_gather(shards, tensor.detach().contiguous())
    shards[dist.get_rank()] = tensor
    return torch.cat(shards, dim=0)


def world_size() -> int:
    """Number of training processes (1 without torch.distributed)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1
