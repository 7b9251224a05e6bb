"""Contrastive losses shared by the recipes (NT-Xent; SG-OPT's L_opt1–3 and regulariser), the distillation
terms toward the frozen base (kl, mse), the prefix a Matryoshka term trains (`keep_prefix`), and the cross-process
gather that enlarges their negatives."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor


def nt_xent(view1: Tensor, view2: Tensor, temperature: float, not_negatives: Tensor | None = None) -> Tensor:
    """NT-Xent over 2N views (ConSERT eq. (1), SimCLR): a scalar, the mean over all 2N anchors.

    `view1[i]` and `view2[i]` are two views of sentence i, shape (N, D). Vectors are L2-normalised
    (cosine similarity). For each of the 2N views the positive is the other view of the same sentence
    and the negatives are the 2(N−1) views of the other sentences; its similarity to itself is
    excluded from the denominator. Computed in (at least) float32 with autocast off, so bf16/fp16
    inputs neither overflow at small temperatures nor lose the loss's precision.

    The official ConSERT code returns the SUM of the two directions (view1→view2 plus view2→view1,
    each a batch mean), i.e. 2× this value — a pure scale of the loss and its gradients. We follow
    the paper's mean over the 2N anchors.

    `not_negatives` (2N, 2N) bool over the views [view1; view2], optional: True where view k is not a negative of
    view i and leaves its denominator (one sentence twice in a batch: CLSR's pairs of one id). Each
    view's positive stays whatever it says. Without it (or all False) this is the plain NT-Xent.
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
        # row i (a view1 anchor) has its positive at column i + N; row i + N (view2) at column i
        index = torch.arange(n, device=logits.device)
        targets = torch.cat([index + n, index])
        left_out = torch.eye(2 * n, dtype=torch.bool, device=logits.device)
        if not_negatives is not None:
            left_out = left_out | not_negatives.to(device=logits.device, dtype=torch.bool)
            left_out[torch.arange(2 * n, device=logits.device), targets] = False  # a positive is never left out
        return F.cross_entropy(logits.masked_fill(left_out, float("-inf")), targets)


def opt1_loss(sentences: Tensor, views: Tensor, temperature: float) -> Tensor:
    """SG-OPT's L_opt1 (Kim et al. 2021, §3.2), the mean over the N anchors c_i.

    L_opt1_i = −log( φ(c_i, h_i) / Ẑ ),  Ẑ = Σ_{j≠i} φ(c_i, c_j) + Σ_j φ(c_i, h_j),
    φ(u, v) = exp(cos(u, v) / τ). Only the sentence vectors `sentences` (c, shape (N, D)) are anchors;
    the views (h, shape (N, D)) are targets, so the NT-Xent factor h_i ↔ h_j is gone. The inputs are
    the projected vectors f(c), f(h). Computed in (at least) float32 with autocast off, like `nt_xent`.
    """
    _check_pairs("opt1_loss", sentences, views, temperature)
    with torch.autocast(device_type=sentences.device.type, enabled=False):
        c, h = _unit(sentences), _unit(views)
        to_views = c @ h.T / temperature  # (N, N); the positive of row i is column i
        self_pairs = torch.eye(len(c), dtype=torch.bool, device=c.device)
        to_sentences = (c @ c.T / temperature).masked_fill(self_pairs, float("-inf"))
        logits = torch.cat([to_views, to_sentences], dim=1)
        return F.cross_entropy(logits, torch.arange(len(c), device=c.device))


def opt2_loss(sentences: Tensor, views: Tensor, temperature: float) -> Tensor:
    """SG-OPT's L_opt2 (§3.2): L_opt1 without the c_i ↔ c_j repulsion, the mean over the N anchors c_i.

    L_opt2_i = −log( φ(c_i, h_i) / Σ_j φ(c_i, h_j) ): one-directional InfoNCE from c to h.
    """
    _check_pairs("opt2_loss", sentences, views, temperature)
    with torch.autocast(device_type=sentences.device.type, enabled=False):
        c, h = _unit(sentences), _unit(views)
        return F.cross_entropy(c @ h.T / temperature, torch.arange(len(c), device=c.device))


def opt3_loss(sentences: Tensor, views: Tensor, temperature: float) -> Tensor:
    """SG-OPT's L_opt3 (§3.2, the `sg-opt` objective): every layer's view of a sentence is a positive.

    `sentences` (c): (N, D); `views` (h): (N, K, D), view k of sentence i (K layers). For each (i, k):

        L_opt3_{i,k} = −log( φ(c_i, h_{i,k}) / ( φ(c_i, h_{i,k}) + Σ_{m≠i} Σ_n φ(c_i, h_{m,n}) ) )

    and the loss is the mean over the N·K pairs (1 / (b(l+1)) Σ_i Σ_k). The negatives of anchor c_i are
    the views of all layers of the other sentences — (N−1)·K of them, shared by its K positives; its
    own other layers are not negatives. This is also what the official code computes (galsang/SG-BERT
    `NTXentLoss`, ANCHORS §b.2). Computed as logaddexp(pos, logsumexp(negatives)) − pos: no
    (N·K)² logit matrix, in (at least) float32 with autocast off.
    """
    if sentences.dim() != 2 or views.dim() != 3 or views.shape[0] != sentences.shape[0] \
            or views.shape[2] != sentences.shape[1]:
        raise ValueError(f"opt3_loss: expected (N, D) sentences and (N, K, D) views, got "
                         f"{tuple(sentences.shape)} and {tuple(views.shape)}")
    if not temperature > 0:
        raise ValueError(f"opt3_loss: temperature must be > 0, got {temperature}")
    n, k = views.shape[0], views.shape[1]
    with torch.autocast(device_type=sentences.device.type, enabled=False):
        c, h = _unit(sentences), _unit(views)
        logits = torch.einsum("id,mkd->imk", c, h) / temperature  # (N, N, K): anchor i, sentence m, layer k
        index = torch.arange(n, device=c.device)
        positives = logits[index, index]  # (N, K)
        # row i: the views of every sentence m ≠ i (its own masked to −inf, not dropped: a boolean index
        # would wait for the device to learn the result's size)
        own = torch.eye(n, dtype=torch.bool, device=c.device)[:, :, None]
        negatives = logits.masked_fill(own, float("-inf")).reshape(n, n * k)
        negative_mass = torch.logsumexp(negatives, dim=1, keepdim=True)  # (N, 1); −inf when N = 1
        return (torch.logaddexp(positives, negative_mass) - positives).mean()


def squared_distance(parameters: list[Tensor], reference: list[Tensor]) -> Tensor:
    """Σ_p ‖p − p_ref‖²₂ over matching tensors (SG-OPT's L_reg = ‖BERT_F − BERT_T‖²₂), in float32 or wider.

    `reference` carries no gradient; the result is exactly 0 while the parameters equal it.
    """
    if len(parameters) != len(reference):
        raise ValueError(f"squared_distance: {len(parameters)} parameters but {len(reference)} references")
    if not parameters:
        raise ValueError("squared_distance: no parameters")
    for parameter, fixed in zip(parameters, reference):
        if parameter.shape != fixed.shape:
            raise ValueError(f"squared_distance: shape {tuple(parameter.shape)} vs {tuple(fixed.shape)}")
    device = parameters[0].device
    dtype = torch.promote_types(parameters[0].dtype, torch.float32)
    with torch.autocast(device_type=device.type, enabled=False):
        # foreach kernels: a handful of launches for BERT-base's ~200 tensors instead of 4 per tensor (the
        # per-tensor loop cost more than the guide's forward at batch 16); autograd flows through both
        differences = torch._foreach_sub([p.to(dtype) for p in parameters], [r.detach().to(dtype) for r in reference])
        return torch.stack(torch._foreach_norm(differences)).pow(2).sum()


def distillation_kl(adapted: Tensor, base: Tensor, temperature: float, similarities: Tensor | None = None) -> Tensor:
    """Row-wise KL(P_base ‖ P_adapted) of in-batch similarity distributions, the mean over the N rows.

    S = cos(e_i, e_j) / T over the batch (N, D) → (N, N); row i, softmax-ed, is how sentence i spreads
    its similarity over the others. The self-pair (j = i) is left out of every row: its cosine is 1 on
    both sides, and at T = 0.05 its e^20 would hold nearly all of the row's mass and flatten the signal
    (64 sentences at cos ≈ 0.3: e^20 / (e^20 + 63·e^6) ≈ 99.99 % of it). Exactly 0 when `adapted`
    equals `base`; `base` carries no gradient. With two sentences each row has one entry, so the term is
    always 0 (with one there is no row): kl needs at least 3 sentences per process; mse has no such limit.
    Only the N × N similarities are compared, so the two widths may differ (a teacher of another size).
    `similarities`: the target's (N, N) cosines when given (a blend of two models'), instead of `base`'s.
    """
    _check_pairs("distillation_kl", adapted, base, temperature, same_width=False)
    n = adapted.shape[0]
    with torch.autocast(device_type=adapted.device.type, enabled=False):
        if n < 2:
            return _unit(adapted).sum() * 0.0
        others = ~torch.eye(n, dtype=torch.bool, device=adapted.device)
        a = _unit(adapted)
        log_q = F.log_softmax((a @ a.T)[others].reshape(n, n - 1) / temperature, dim=-1)
        log_p = F.log_softmax(_target_cosines(base, similarities)[others].reshape(n, n - 1) / temperature, dim=-1)
        return F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")  # Σ_ij p (log p − log q) / N


def distillation_mse(adapted: Tensor, target: Tensor) -> Tensor:
    """Mean over sentences of ‖e_adapted − e_target‖²₂ on the vectors as they are (not normalised), as
    sentence-transformers' distillation (MSELoss) and LEAF compare them: the student also learns the target's
    norms. Equal widths (a teacher of another width goes through a projection first: train/distill.py).
    Exactly 0 when equal; `target` carries no gradient."""
    _check_pairs("distillation_mse", adapted, target, 1.0)
    with torch.autocast(device_type=adapted.device.type, enabled=False):
        wide = torch.promote_types(adapted.dtype, torch.float32)
        return (adapted.to(wide) - target.detach().to(wide)).pow(2).sum(dim=-1).mean()


def distillation_cosine(adapted: Tensor, target: Tensor) -> Tensor:
    """Mean over sentences of 1 − cos(e_adapted, e_target): each vector's direction only. Computed as half the
    squared distance of the unit vectors (the same value), which is exactly 0 when the two are equal. Equal
    widths, as mse."""
    _check_pairs("distillation_cosine", adapted, target, 1.0)
    with torch.autocast(device_type=adapted.device.type, enabled=False):
        return 0.5 * (_unit(adapted) - _unit(target.detach())).pow(2).sum(dim=-1).mean()


def _target_cosines(target: Tensor, similarities: Tensor | None) -> Tensor:
    """The target's (N, N) cosine matrix: given (a blend), or of its vectors; never carries a gradient."""
    if similarities is not None:
        return similarities.detach().float()
    b = _unit(target.detach())
    return b @ b.T


def blended_cosines(teacher: Tensor, base: Tensor, alpha: float) -> Tensor:
    """α · cos(teacher) + (1 − α) · cos(base) over the batch: the similarity structure of the blend target
    (docs/teacher.md, "Blend targets"), whose cosine ranking of pairs beat both models' on 3 of 4 suite domains."""
    with torch.autocast(device_type=teacher.device.type, enabled=False):
        return alpha * _target_cosines(teacher, None) + (1 - alpha) * _target_cosines(base, None)


def distillation_sim_mse(adapted: Tensor, target: Tensor, similarities: Tensor | None = None) -> Tensor:
    """Mean over the N(N − 1) ordered pairs i ≠ j of (cos_adapted(i, j) − cos_target(i, j))²: the in-batch
    cosine matrices compared entry by entry, so the student learns the target's similarity VALUES (what STS
    scores rank), not only their softmax-ed order as kl does. The diagonal (1 on both sides) is left out.
    Only N × N similarities are compared, so the widths may differ. Needs 2 sentences; 0 for 1."""
    _check_pairs("distillation_sim_mse", adapted, target, 1.0, same_width=False)
    n = adapted.shape[0]
    with torch.autocast(device_type=adapted.device.type, enabled=False):
        if n < 2:
            return _unit(adapted).sum() * 0.0
        a = _unit(adapted)
        others = ~torch.eye(n, dtype=torch.bool, device=adapted.device)
        return (a @ a.T - _target_cosines(target, similarities))[others].pow(2).mean()


def distillation_loss(kind: str, adapted: Tensor, target: Tensor, temperature: float,
                      similarities: Tensor | None = None) -> Tensor:
    """`kind` is the distill_kind setting: kl, sim-mse (in-batch similarity structure), mse or cosine (each
    vector against its target). `similarities`: the structure kinds' target cosines, when not `target`'s own."""
    if kind == "kl":
        return distillation_kl(adapted, target, temperature, similarities)
    if kind == "sim-mse":
        return distillation_sim_mse(adapted, target, similarities)
    if kind == "mse":
        return distillation_mse(adapted, target)
    if kind == "cosine":
        return distillation_cosine(adapted, target)
    raise ValueError(f"distillation_loss: unknown kind {kind!r}; expected kl, sim-mse, mse or cosine")


def _check_pairs(name: str, sentences: Tensor, views: Tensor, temperature: float, same_width: bool = True) -> None:
    matrices = sentences.dim() == views.dim() == 2
    if not matrices or (sentences.shape != views.shape if same_width else len(sentences) != len(views)):
        what = "of equal shape" if same_width else "with the same number of rows"
        raise ValueError(f"{name}: expected two (N, D) tensors {what}, got {tuple(sentences.shape)} "
                         f"and {tuple(views.shape)}")
    if not temperature > 0:
        raise ValueError(f"{name}: temperature must be > 0, got {temperature}")


def _unit(vectors: Tensor) -> Tensor:
    """L2-normalised along the last dim, in float32 or wider (cosine similarity as a dot product)."""
    return F.normalize(vectors.to(torch.promote_types(vectors.dtype, torch.float32)), dim=-1)


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


def keep_prefix(vectors: Tensor, dim: int) -> Tensor:
    """Each vector's first `dim` coordinates, the others set to 0. Under a cosine (every loss here compares
    cosines) this is the `dim`-wide prefix itself — a zero adds nothing to a dot product or a norm — and it keeps
    the full width, so a head that reads the vector (SG-OPT's and CLSR's projections) still takes it."""
    width = vectors.shape[-1]
    if dim >= width:
        return vectors
    return F.pad(vectors[..., :dim], (0, width - dim))
