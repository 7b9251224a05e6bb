"""ConSERT's data augmentations (Yan et al. 2021, §3.2), vectorised over the batch.

Each view is made through explicit forward arguments — `position_ids` (shuffle), an
`embedding_transform` applied to the embedding layer's output (cutoffs, dropout), a new
`attention_mask` (span cutoff) — never by patching the model (the official code's `set_flag`
mechanism breaks on a stock `transformers`, ANCHORS §b.1).

"Real" tokens are those with attention_mask == 1; [CLS] and [SEP] count as real, as in the paper's
code. Padding is never augmented. The official code loops over examples in Python; here every
augmentation is one batched tensor operation. When a `generator` is given, all randomness comes from
it, so the same seed gives the same view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentadapt.errors import ConfigError
from sentadapt.registry import unknown_name_message

if TYPE_CHECKING:  # torch is imported where views are made, so config validation stays fast
    import torch
    from torch import Tensor

AUGMENTATIONS = (
    "none", "shuffle", "token-cutoff", "feature-cutoff", "dropout", "span-cutoff", "encoder-dropout",
)

EmbeddingTransform = Callable[["Tensor"], "Tensor"]


# ---------------------------------------------------------------------- helpers


def check_rate(rate: float) -> None:
    """Raise ConfigError unless 0 <= rate < 1 (a rate of 1 would erase the whole sentence)."""
    if not 0.0 <= rate < 1.0:  # also rejects NaN
        raise ConfigError(f"augmentation rate must be in [0, 1), got {rate}")


def _rand(shape: tuple[int, ...], device: torch.device, generator: torch.Generator | None) -> Tensor:
    """Uniform [0, 1) noise on `device`, drawn from `generator` when one is given.

    A generator on another device type (a CPU generator with CUDA inputs) draws where it lives and
    the noise is moved, so a seeded view is the same on every device.
    """
    import torch

    if generator is None or generator.device.type == device.type:
        return torch.rand(shape, generator=generator, device=device)
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def _random_ranks(keys: Tensor) -> Tensor:
    """Rank of each entry along dim 1 (0 = smallest): a uniform random permutation for iid keys."""
    return keys.argsort(dim=1).argsort(dim=1)


def _count(lengths: Tensor, rate: float) -> Tensor:
    """floor(lengths * rate), in float64 so it matches the official code's Python `int(n * rate)`."""
    import torch

    return (lengths.to(torch.float64) * rate).floor().long()


def _real(attention_mask: Tensor) -> Tensor:
    return attention_mask.bool()


# ---------------------------------------------------------------------- augmentations


def shuffle_position_ids(
    attention_mask: Tensor, generator: torch.Generator | None = None, offset: int = 0
) -> Tensor:
    """Token shuffle: position ids (B, T) where each row's real tokens get a random permutation.

    Row i's real tokens receive a random permutation of `offset + 0..n_i-1` (n_i = its number of
    real tokens, [CLS]/[SEP] included); padding positions keep `offset + their index`. Input ids are
    not changed — the position embeddings are the transformer's only notion of order. `offset` is 0
    for BERT and `padding_idx + 1` for RoBERTa (whose positions do not start at 0; the official code
    got this wrong). With right padding (what `pad_batch` produces) this is the official behaviour;
    other layouts do not break it (real tokens still get 0..n_i-1, padding its own index).
    """
    import torch

    real = _real(attention_mask)
    batch, length = real.shape
    keys = _rand((batch, length), real.device, generator).masked_fill(~real, float("inf"))
    # +inf pushes padding after every real token, so real tokens rank 0..n_i-1 in random order
    ranks = _random_ranks(keys)
    index = torch.arange(length, device=real.device).expand(batch, length)
    return torch.where(real, ranks, index) + offset


def _token_cutoff_mask(attention_mask: Tensor, rate: float, generator: torch.Generator | None) -> Tensor:
    """(B, T, 1) bool: floor(n_i * rate) real tokens of row i, chosen uniformly."""
    real = _real(attention_mask)
    keys = _rand(tuple(real.shape), real.device, generator).masked_fill(~real, float("inf"))
    cut = _random_ranks(keys) < _count(real.sum(dim=1), rate).unsqueeze(1)
    return cut.unsqueeze(-1)


def _feature_cutoff_mask(
    attention_mask: Tensor, hidden: int, rate: float, generator: torch.Generator | None
) -> Tensor:
    """(B, T, H) bool: floor(H * rate) feature columns per example, at its real tokens only."""
    real = _real(attention_mask)
    keys = _rand((real.shape[0], hidden), real.device, generator)
    columns = _random_ranks(keys) < int(hidden * rate)
    return columns.unsqueeze(1) & real.unsqueeze(-1)


def _dropout_mask(
    attention_mask: Tensor, hidden: int, rate: float, generator: torch.Generator | None
) -> Tensor:
    """(B, T, H) bool: each element of a real-token row independently with probability `rate`."""
    real = _real(attention_mask)
    drop = _rand((*real.shape, hidden), real.device, generator) < rate
    return drop & real.unsqueeze(-1)


def token_cutoff(
    embeddings: Tensor, attention_mask: Tensor, rate: float, generator: torch.Generator | None = None
) -> Tensor:
    """Token cutoff: zero `floor(n_i * rate)` whole token rows of example i.

    The rows are chosen uniformly among its real tokens ([CLS]/[SEP] may be chosen, as in the
    official code); padding rows are untouched. The attention mask is NOT changed, as in the paper:
    the zeroed tokens still take part in attention. `floor` means short sentences at small rates
    lose no token (e.g. 6 tokens at 0.15). Returns a new (B, T, H) tensor.
    """
    check_rate(rate)
    return embeddings.masked_fill(_token_cutoff_mask(attention_mask, rate, generator), 0.0)


def feature_cutoff(
    embeddings: Tensor, attention_mask: Tensor, rate: float, generator: torch.Generator | None = None
) -> Tensor:
    """Feature cutoff: zero `floor(H * rate)` feature columns, chosen independently per example.

    The same columns are zeroed at every real-token position of an example. Padding positions are
    left untouched: the official code zeroes them too, which changes nothing since attention and
    pooling ignore padding. Returns a new (B, T, H) tensor.
    """
    check_rate(rate)
    return embeddings.masked_fill(_feature_cutoff_mask(attention_mask, embeddings.shape[-1], rate, generator), 0.0)


def element_dropout(
    embeddings: Tensor, attention_mask: Tensor, rate: float, generator: torch.Generator | None = None
) -> Tensor:
    """"Dropout" augmentation: zero each element of real-token rows independently with prob. `rate`.

    No 1/(1-rate) rescaling of the kept elements (unlike `nn.Dropout`), as in the paper's code: kept
    values are exactly the input's. Padding is untouched. The official code zeroes exactly
    floor(n_i * H * rate) elements; a Bernoulli draw is what the paper describes (same expected
    count). Returns a new (B, T, H) tensor.
    """
    check_rate(rate)
    return embeddings.masked_fill(_dropout_mask(attention_mask, embeddings.shape[-1], rate, generator), 0.0)


def span_cutoff(attention_mask: Tensor, rate: float, generator: torch.Generator | None = None) -> Tensor:
    """Span cutoff: a new attention mask keeping one random contiguous span of real tokens per row.

    Row i keeps `max(floor(n_i * (1 - rate)), 1)` consecutive real tokens starting at a uniformly
    random offset; its other real tokens get attention 0 (so mean pooling over the returned mask
    ignores them too); padding stays 0. Input ids and position ids are unchanged (the span keeps its
    original positions). [CLS] may fall outside the span: use mean pooling with this view, not CLS.
    Returns a tensor of the input mask's dtype and shape.
    """
    import torch

    check_rate(rate)
    real = _real(attention_mask)
    lengths = real.sum(dim=1)
    keep = _count(lengths, 1.0 - rate).clamp(min=1)
    choices = (lengths - keep + 1).clamp(min=1)  # valid start offsets (an all-padding row has none)
    noise = _rand((real.shape[0],), real.device, generator).to(torch.float64)
    # float64 keeps u * choices < choices for u < 1; the clamp guards the bound regardless
    start = torch.minimum((noise * choices).floor().long(), choices - 1)
    rank = real.long().cumsum(dim=1) - 1  # index of each real token among the real tokens of its row
    inside = (rank >= start.unsqueeze(1)) & (rank < (start + keep).unsqueeze(1))
    return (real & inside).to(attention_mask.dtype)


# ---------------------------------------------------------------------- views


@dataclass
class ViewInputs:
    """What one augmented view passes to `Encoder.forward`.

    `model_dropout` asks the recipe to run the backbone in train mode for this view (the model's own
    dropout is then the augmentation, as in SimCSE); otherwise the backbone runs as the recipe set it.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor | None
    embedding_transform: EmbeddingTransform | None
    model_dropout: bool


@dataclass
class _LazyZeroMask:
    """An embedding_transform that zeroes a random mask drawn on first call and reused afterwards.

    Drawn lazily because the hidden size is only known once the embeddings exist; reused so that a
    view is one fixed corruption even if the embedding forward runs again (e.g. a second pass).
    """

    draw: Callable[[int], Tensor]  # hidden size -> bool mask broadcastable to the embeddings
    mask: Tensor | None = None

    def __call__(self, embeddings: Tensor) -> Tensor:
        return embeddings.masked_fill(self._drawn(embeddings.shape[-1]), 0.0)

    def for_rows(self, rows: Tensor, width: int) -> EmbeddingTransform:
        """The transform of the batch's `rows`, trimmed to `width` tokens (an encoder pass in length chunks): the
        whole batch's mask, drawn once, sliced."""
        return lambda embeddings: embeddings.masked_fill(self._drawn(embeddings.shape[-1])[rows, :width], 0.0)

    def _drawn(self, hidden: int) -> Tensor:
        if self.mask is None:
            self.mask = self.draw(hidden)
        return self.mask


def make_view(
    name: str,
    input_ids: Tensor,
    attention_mask: Tensor,
    rate: float,
    generator: torch.Generator | None = None,
    position_offset: int = 0,
) -> ViewInputs:
    """Inputs for one view of the batch under augmentation `name` (one of AUGMENTATIONS).

    `rate` is validated for every name but only used by the cutoffs and dropout. Cutoff and dropout
    views return an `embedding_transform`; their random mask is drawn when the transform first runs.
    """
    if name not in AUGMENTATIONS:
        raise ConfigError(unknown_name_message("augmentation", name, list(AUGMENTATIONS)))
    check_rate(rate)
    view = ViewInputs(input_ids, attention_mask, None, None, model_dropout=False)
    if name == "shuffle":
        view.position_ids = shuffle_position_ids(attention_mask, generator, position_offset)
    elif name == "token-cutoff":
        view.embedding_transform = _LazyZeroMask(lambda _h: _token_cutoff_mask(attention_mask, rate, generator))
    elif name == "feature-cutoff":
        view.embedding_transform = _LazyZeroMask(lambda h: _feature_cutoff_mask(attention_mask, h, rate, generator))
    elif name == "dropout":
        view.embedding_transform = _LazyZeroMask(lambda h: _dropout_mask(attention_mask, h, rate, generator))
    elif name == "span-cutoff":
        view.attention_mask = span_cutoff(attention_mask, rate, generator)
    elif name == "encoder-dropout":
        view.model_dropout = True
    return view


@dataclass
class _RowSplitTransform:
    """The embedding transforms of two stacked views: `first` edits rows [:rows], `second` the rest."""

    rows: int
    first: EmbeddingTransform | None
    second: EmbeddingTransform | None

    def __call__(self, embeddings: Tensor) -> Tensor:
        import torch

        top, bottom = embeddings[:self.rows], embeddings[self.rows:]
        return torch.cat([self.first(top) if self.first else top, self.second(bottom) if self.second else bottom])

    def for_rows(self, rows: Tensor, width: int) -> EmbeddingTransform | None:
        """The transform of the batch's `rows` (from both views, in any order) trimmed to `width` tokens: each view's
        own transform on its rows, which are then put back in the order given. None when a view's transform cannot
        be sliced (length_chunks.sliced_transform)."""
        import torch

        from sentadapt.model.length_chunks import sliced_transform

        in_first = rows < self.rows
        places = [torch.nonzero(in_first).squeeze(1), torch.nonzero(~in_first).squeeze(1)]
        sides = []
        for view_transform, view_rows in ((self.first, rows[in_first]), (self.second, rows[~in_first] - self.rows)):
            sliced = None if view_transform is None else sliced_transform(view_transform, view_rows, width)
            if view_transform is not None and sliced is None:
                return None
            sides.append(sliced)
        order = torch.argsort(torch.cat(places))

        def split(embeddings: Tensor) -> Tensor:
            pieces = [embeddings[at] if edit is None else edit(embeddings[at]) for at, edit in zip(places, sides)]
            return torch.cat(pieces)[order]
        return split


def stack_views(first: ViewInputs, second: ViewInputs, position_offset: int = 0) -> ViewInputs:
    """Two views of one (B, T) batch as one view of 2B rows, so a single forward pass encodes both.

    One pass of 2B rows launches half the kernels of two passes of B, and at ConSERT's batch of 96 the kernel
    launches, not the arithmetic, bound a GPU step (bench/README.md, H200: 17 % GPU utilisation with two
    passes). The rows do not interact in a transformer, so each half equals its own pass up to float
    reassociation. A view without position ids gets the model's plain ones (`position_offset + index`, what
    `shuffle_position_ids` gives padding too); the model's own dropout must be off in both (one pass, one mode).
    """
    import torch

    if first.model_dropout or second.model_dropout:
        raise ValueError("stack_views: a view that runs the model's own dropout needs its own forward pass")
    rows, length = first.input_ids.shape
    positions = None
    if first.position_ids is not None or second.position_ids is not None:
        plain = torch.arange(length, device=first.input_ids.device) + position_offset
        positions = torch.cat([view.position_ids if view.position_ids is not None
                               else plain.expand(view.input_ids.shape[0], length) for view in (first, second)])
    transform = None
    if first.embedding_transform is not None or second.embedding_transform is not None:
        transform = _RowSplitTransform(rows, first.embedding_transform, second.embedding_transform)
    return ViewInputs(torch.cat([first.input_ids, second.input_ids]),
                      torch.cat([first.attention_mask, second.attention_mask]), positions, transform, False)
