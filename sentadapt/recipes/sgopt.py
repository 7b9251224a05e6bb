"""SG-OPT (Kim, Yoo & Lee, ACL-IJCNLP 2021): self-guided contrastive learning for sentence vectors.

The base model is cloned before training into a *guide* (BERT_F: frozen, eval mode, no gradient) and
the *tuned* copy (BERT_T: the encoder being trained). For every sentence s_i of the batch, the guide's
hidden states at each layer k (0 = the embedding layer … L) are pooled over tokens — max pooling as in
the paper, mean as an option — into views h_{i,k}; the tuned copy's last-layer [CLS] vector (without
BERT's pooler MLP) is the sentence vector c_i. A projection head f (Linear → GELU → Linear → GELU,
hidden 4096), shared by c and h, maps both before the cosine similarity φ(u, v) = exp(cos(f(u), f(v)) / τ).

Objectives (`objective`), exactly the paper's equations (§3; `sentadapt.recipes.losses`):

- `sg`: L_base — NT-Xent over X = {c_i} ∪ {h_i}, h_i one layer's view drawn uniformly per sentence.
- `opt1`: L_opt1 — only c_i are anchors; negatives c_j (j≠i) and h_j.
- `opt2`: L_opt2 — only the views h_j are candidates.
- `sg-opt` (default): L_opt3 — all L+1 views of s_i are positives of c_i; the negatives of c_i are the
  views of every layer of the other sentences (also what the official code computes).

Plus λ·L_reg, L_reg = Σ ‖θ_F − θ_T‖²₂ over the tuned copy's trainable parameters (exactly 0 at step 0).
The tuned copy's embedding layer ("layer 0") is frozen by default, as in the paper.

Where we depart from the official code (galsang/SG-BERT, ANCHORS §b.2), deliberately:

- The guide stays in eval mode (no dropout) for the whole run. The official code puts it in eval
  mode once, and sentence-transformers' `fit` switches it back to train mode at every epoch and after
  every evaluation, so its views were in practice dropout-noised. Here the guide is not part of the
  trained module tree (the recipe holds it, and the recipe is not a module), so the loop's
  `.train()` cannot reach it.
- Views are max-pooled as the paper says; the official script's default is mean (`view_pooling: mean`).
- The tuned copy runs with its internal dropout on, as ordinary fine-tuning (and the official code) do;
  the paper does not say otherwise.
- c_i is the raw hidden state of [CLS], before any Dense/Normalize module of a sentence-transformers
  base model: the shared head f sees c and the guide's raw views in the same space. Such modules are
  kept at export as they were (frozen here: they are not trained); Normalize does not change cosine.
- A base that pools by its last token (a decoder embedder: causal attention) has no [CLS]: its first token sees
  nothing after it, so c_i is its last real token, the one position that has read the whole sentence.

The trained model is exported with CLS pooling (`export_pooling`; `auto`: the base's declared pooling); the
head and the guide are discarded. Memory: the guide doubles the model's weights (and the head adds
4096·(4096 + H) ≈ 18–20M parameters, with AdamW state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sentadapt.config.schema import RecipeConfig, check_choice, check_range, setting
from sentadapt.data.readers import counted_sentences
from sentadapt.errors import ConfigError
from sentadapt.model.pooling import POOLING_NAMES, Pooling, resolve_export_pooling
from sentadapt.recipes.base import TEXT, Embedded, RecipeBase, RecipeSpec, Stage, Term, register_recipe
from sentadapt.recipes.matryoshka import Cut

if TYPE_CHECKING:
    from torch import Tensor, nn

    from sentadapt.model.encoder import Encoder

OBJECTIVES = ("sg", "opt1", "opt2", "sg-opt")
VIEW_POOLINGS = ("max", "mean")
# The projection head's initial weights come from their own generator, so they do not depend on what
# the process drew before (tests, earlier stages); --seed changes data order, dropout and layer sampling.
HEAD_INIT_SEED = 0


@dataclass
class SgOptConfig(RecipeConfig):
    # paper Table 6: sg-opt best; τ = 0.1 costs 4.2 points there (the paper's τ is A.1's)
    objective: str = setting("sg-opt", "The loss: sg | opt1 | opt2 | sg-opt (the paper's Table 6).")
    temperature: float = setting(0.01, "The NT-Xent temperature τ.")
    regularizer: float = setting(0.1, "λ, the weight of Σ‖θ_F − θ_T‖² (the tuned copy kept near the frozen one).")
    view_pooling: str = setting("max", "The pooling of the guide's layers into views (the official code's default "
                                "is mean).")
    layer_min: int = setting(0, "The first guide hidden state used as a view (0: the embedding layer).")
    layer_max: int = setting(-1, "The last one, inclusive (-1: the last layer).")
    freeze_embeddings: bool = setting(True, "Keep the tuned copy's embedding layer (the paper's \"layer 0\") fixed.")
    head_hidden: int = setting(4096, "The width of the projection head f (both layers).")
    export_pooling: str = setting("cls", "The pooling the model is evaluated and saved with: a pooling name (the "
                                  "paper's: last-layer [CLS]), or auto: the base model's own when its folder "
                                  "declares one (sentence-transformers), else cls.")

    def validate(self) -> None:
        check_choice("objective", self.objective, OBJECTIVES)
        check_range("temperature", self.temperature, 0, None, low_open=True)
        check_range("regularizer", self.regularizer, 0, None)
        check_choice("view_pooling", self.view_pooling, VIEW_POOLINGS)
        check_range("layer_min", self.layer_min, 0, None)
        check_range("layer_max", self.layer_max, -1, None, hint="-1 = the last layer")
        if self.layer_max != -1 and self.layer_max < self.layer_min:
            raise ConfigError(f"layer_max: {self.layer_max} is below layer_min {self.layer_min}; the views are "
                              "hidden states layer_min..layer_max (inclusive)")
        check_range("head_hidden", self.head_hidden, 1, None)
        check_choice("export_pooling", self.export_pooling, ("auto", *POOLING_NAMES))


@register_recipe("sg-opt")
class SgOptRecipe(RecipeBase):
    spec: ClassVar[RecipeSpec] = RecipeSpec(
        "sg-opt", SgOptConfig, TEXT,
        # paper Appendix A.1 and the official script: AdamW betas (0.9, 0.9), lr 5e-5, batch 16, 1 epoch, no weight
        # decay, 10 % warm-up, STS-B dev every 50 steps, stop after 10 evaluations without gain, max length 128
        # (sentence-transformers' default there). Gradient clipping 1.0 is the loop's default.
        train_defaults={"lr": 5e-5, "batch_size": 16, "epochs": 1, "eval_every": 50, "patience": 10,
                        "adam_beta1": 0.9, "adam_beta2": 0.9, "weight_decay": 0.0, "warmup_ratio": 0.1,
                        "max_length": 128},
        # sentence-tuned bases (presets.py): the base's own pooling (a mean-trained base read through [CLS] loses,
        # research/results.md) and distillation towards the frozen base, the guide SG-OPT already holds
        # (research/findings.md, "Levers on tuned bases")
        tuned_base_defaults={"export_pooling": "auto", "distill": 1.0},
    )
    config: SgOptConfig

    def __init__(self, config: SgOptConfig, encoder: Encoder, stage: str | None = None) -> None:
        import copy

        import torch
        from torch import nn

        super().__init__(config, encoder, stage)
        self.layers = self._layer_range(config, encoder.num_layers)
        backbone = encoder.backbone
        if config.freeze_embeddings:
            embeddings = encoder.embedding_layer
            if embeddings is None:
                model_type = getattr(backbone.config, "model_type", "?")
                raise ConfigError(f"freeze_embeddings: this {model_type} model does not expose its embedding layer; "
                                  "pass --set freeze_embeddings=false")
            embeddings.requires_grad_(False)  # the loop's optimizer only takes parameters that require grad
        # c_i is the raw [CLS] state: a base model's Dense layers get no gradient, so they stay as they are
        encoder.head.requires_grad_(False)
        # BERT_F: the base weights as they are now, before any step. Held in a plain list on the recipe
        # (not a module), so it is outside TrainingModule: never in its state_dict, optimizer, DDP or .train().
        guide = copy.deepcopy(backbone).requires_grad_(False).eval()
        self._guide: list[nn.Module] = [guide]
        self._reference: dict[str, Tensor] = {}
        self._reference_device: Any = None
        # last layer, first token ([CLS]), no pooler MLP; a last-token base's (a decoder's) last real token
        self.sentence_pooling = Pooling("lasttoken" if encoder.pooling.token == "lasttoken" else "cls")

        hidden = encoder.hidden_size
        head = nn.Sequential(nn.Linear(hidden, config.head_hidden), nn.GELU(),
                             nn.Linear(config.head_hidden, config.head_hidden), nn.GELU())
        # official code: weights N(0, initializer_range), biases 0
        std = float(getattr(backbone.config, "initializer_range", 0.02))
        generator = torch.Generator().manual_seed(HEAD_INIT_SEED)
        with torch.no_grad():
            for layer in (head[0], head[2]):
                layer.weight.normal_(0.0, std, generator=generator)  # type: ignore[operator]
                layer.bias.zero_()  # type: ignore[operator]
        self._heads = nn.ModuleDict({"projection": head})

    # ------------------------------------------------------------------ contract
    @classmethod
    def stages(cls, config: SgOptConfig) -> tuple[Stage, ...]:
        return (Stage("unsup", "sentence", counted_sentences),)

    @property
    def guide(self) -> nn.Module:
        """BERT_F, the frozen copy of the base model that provides the views."""
        return self._guide[0]

    def trainable_heads(self) -> nn.ModuleDict:
        return self._heads

    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder:
        """CLS pooling (the paper's sentence vector) unless set otherwise; the projection head is not saved."""
        name = resolve_export_pooling(self.config.export_pooling, encoder, paper="cls")
        encoder.configure(pooling=Pooling.from_name(name, encoder.num_layers))
        return encoder

    # ------------------------------------------------------------------ distillation (--set distill=W)
    def frozen_backbone(self, encoder: Encoder) -> nn.Module:
        """The base's vectors come from the guide (BERT_F is the base model, frozen): no second copy."""
        return self.guide

    # ------------------------------------------------------------------ views and terms
    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        import torch

        from sentadapt.recipes.losses import gather_across_processes, nt_xent, opt1_loss, opt2_loss, opt3_loss

        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        views = self.guide_views(input_ids, attention_mask, encoder.device)  # (B, K, H), no gradient
        project = heads["projection"]
        vectors = self.sentence_vectors(encoder, input_ids, attention_mask)  # c_i, before the projection f
        objective = self.config.objective
        if objective == "sg-opt":
            targets = gather_across_processes(project(views))  # (N, K, P): every layer is a positive
            loss = opt3_loss
        else:
            # the paper's uniform sampler σ: one layer per sentence (the official code's torch.randint)
            picked = torch.randint(len(self.layers), (views.shape[0],), device=views.device)
            targets = gather_across_processes(project(views[torch.arange(views.shape[0], device=views.device),
                                                            picked]))
            loss = {"sg": nt_xent, "opt1": opt1_loss, "opt2": opt2_loss}[objective]  # type: ignore[assignment]

        def pulled(cut: Cut) -> Tensor:  # (a --matryoshka prefix of) c_i pulled toward the guide's whole views
            return loss(gather_across_processes(project(cut(vectors))), targets, self.config.temperature)

        # λ Σ‖θ_T − θ_F‖², the same on every process: a local term (the logged part is λ·distance). λ = 0 skips
        # the pass over every parameter.
        regularizer = self.config.regularizer
        distance = ((lambda cut: torch.zeros((), device=vectors.device)) if regularizer == 0
                    else (lambda cut: regularizer * self.distance_to_guide(encoder)))
        return Embedded([Term("contrastive", pulled), Term("regularizer", distance, local=True, sized=False)])

    def sentence_vectors(self, encoder: Encoder, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """c_i: the tuned copy's last-layer [CLS] hidden state (dropout as the module's mode: on in training)."""
        outputs = encoder.run_backbone(input_ids, attention_mask)
        return self.sentence_pooling(outputs.last_hidden_state, attention_mask, None)

    def guide_views(self, input_ids: Tensor, attention_mask: Tensor, device: Any = None) -> Tensor:
        """h_{i,k}: the guide's hidden states layer_min..layer_max, each pooled over real tokens → (B, K, H)."""
        import torch

        from sentadapt.model.pooling import pool_tokens

        guide = self._guide_on(device if device is not None else input_ids.device)
        with torch.no_grad():
            outputs = guide(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                            return_dict=True)
            hidden = outputs.hidden_states
            return torch.stack([pool_tokens(hidden[k], attention_mask, self.config.view_pooling)
                                for k in self.layers], dim=1)

    def distance_to_guide(self, encoder: Encoder) -> Tensor:
        """L_reg = Σ ‖θ_T − θ_F‖²₂ over the tuned copy's trainable parameters (frozen ones equal the guide's)."""
        from sentadapt.recipes.losses import squared_distance

        if encoder.lora is not None:  # θ_T = θ_F + (alpha / r)·B·A on the adapted layers, θ_F elsewhere
            import torch

            from sentadapt.model import lora

            return torch.stack([delta.pow(2).sum() for delta in lora.weight_deltas(encoder.backbone)]).sum()
        reference = self._reference_on(encoder.device)
        pairs = [(parameter, reference[name]) for name, parameter in encoder.backbone.named_parameters()
                 if parameter.requires_grad]
        return squared_distance([p for p, _ in pairs], [r for _, r in pairs])

    # ------------------------------------------------------------------ the guide
    def _guide_on(self, device: Any) -> nn.Module:
        """The guide on the encoder's device (moved on first use, so `build_inputs` stays on the CPU)."""
        import torch

        guide = self._guide[0]
        target = torch.device(device)
        if next(guide.parameters()).device != target:
            guide.to(target)
        return guide

    def _reference_on(self, device: Any) -> dict[str, Tensor]:
        """θ_F by parameter name: views of the guide's own tensors (no copy), rebuilt if the guide moved."""
        import torch

        target = torch.device(device)
        guide = self._guide_on(target)
        if self._reference_device != target:
            self._reference = {name: parameter.detach() for name, parameter in guide.named_parameters()}
            self._reference_device = target
        return self._reference

    @staticmethod
    def _layer_range(config: SgOptConfig, num_layers: int) -> tuple[int, ...]:
        last = num_layers if config.layer_max == -1 else config.layer_max
        if last > num_layers or config.layer_min > last:
            raise ConfigError(f"layer_min..layer_max: {config.layer_min}..{config.layer_max} is outside this model's "
                              f"hidden states 0..{num_layers} (0 = embeddings, -1 = the last layer)")
        return tuple(range(config.layer_min, last + 1))
