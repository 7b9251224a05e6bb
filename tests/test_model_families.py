"""Model families beyond BERT: a T5 checkpoint loads as its encoder (as sentence-transformers loads sentence-T5 and
GTR), trains with the ConSERT views that edit its embedding layer, and an encoder-decoder model that has no
encoder-only class is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sentadapt.errors import ConfigError, ExportError, ModelError
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
from sentadapt.train.objective import Objective
from tests.conftest import tiny_tokenizer, tiny_vocabulary_size


def _save_with_tiny_tokenizer(model: torch.nn.Module, folder: Path) -> Path:
    model.save_pretrained(folder, safe_serialization=True)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def _t5_config() -> object:
    from transformers import T5Config

    return T5Config(vocab_size=tiny_vocabulary_size(), d_model=32, num_layers=2, num_decoder_layers=1, num_heads=2,
                    d_ff=37, d_kv=16, pad_token_id=0, decoder_start_token_id=0)


@pytest.fixture(scope="module")
def t5_whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A T5 checkpoint as the Hub holds them: encoder and decoder (T5ForConditionalGeneration)."""
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    return _save_with_tiny_tokenizer(T5ForConditionalGeneration(_t5_config()), tmp_path_factory.mktemp("t5"))


def test_a_t5_checkpoint_loads_as_its_encoder_and_encodes_as_the_encoder_alone(t5_whole: Path) -> None:
    from transformers import T5EncoderModel

    encoder = Encoder.load(t5_whole, device="cpu")
    assert type(encoder.backbone).__name__ == "T5EncoderModel"
    vectors = encoder.encode(["the server is down", "a man plays the guitar"])
    assert vectors.shape == (2, 32) and torch.isfinite(vectors).all()
    # the same weights through transformers' own encoder class, mean-pooled by hand
    reference = T5EncoderModel.from_pretrained(t5_whole).eval()
    batch = encoder.collate(encoder.tokenize_ids(["the server is down"]))
    with torch.no_grad():
        states = reference(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    expected = torch.nn.functional.normalize(states.mean(dim=1), dim=-1) if encoder.normalize else states.mean(dim=1)
    torch.testing.assert_close(vectors[:1], expected, rtol=1e-5, atol=1e-6)


def test_an_encoder_decoder_model_without_an_encoder_class_is_refused(tmp_path: Path) -> None:
    from transformers import BartConfig, BartModel

    config = BartConfig(vocab_size=tiny_vocabulary_size(), d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37,
                        max_position_embeddings=64, pad_token_id=0)
    folder = _save_with_tiny_tokenizer(BartModel(config), tmp_path / "bart")
    with pytest.raises(ModelError) as error:
        Encoder.load(folder, device="cpu")
    assert str(error.value) == (
        f"{folder}: a bart encoder-decoder model; sentadapt encodes sentences with an encoder: pass an encoder model "
        "(BERT, RoBERTa, MPNet, ...) or a t5/mt5/umt5 one")


def test_consert_on_t5_edits_its_token_embeddings_and_refuses_the_shuffle_view(t5_whole: Path) -> None:
    encoder = Encoder.load(t5_whole, device="cpu")
    with pytest.raises(ConfigError) as error:
        ConsertRecipe(ConsertConfig(), encoder)  # the default pair has shuffle; T5 takes no position ids
    assert str(error.value) == ("views: 'shuffle' permutes position ids, which t5 models do not accept; choose other "
                                "views (e.g. views=token-cutoff,feature-cutoff)")
    recipe = ConsertRecipe(ConsertConfig(views=("token-cutoff", "feature-cutoff")), encoder)
    batch = encoder.collate(encoder.tokenize_ids(["the server is down", "a man plays the guitar", "red car"]))
    plain = encoder(batch.input_ids, batch.attention_mask)
    zeroed = encoder(batch.input_ids, batch.attention_mask, embedding_transform=torch.zeros_like)
    assert not torch.allclose(plain, zeroed)  # the transform reached the embedding layer
    loss = Objective(recipe)(encoder, recipe.trainable_heads(),
                               {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}).total
    assert torch.isfinite(loss)


def test_a_transform_of_an_embedding_module_the_forward_never_calls_is_an_error(
        t5_whole: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T5's `shared` holds the token embeddings' weight, but its encoder calls a module of its own: a hook there would
    make every view the sentence unchanged. The encoder says so instead."""
    encoder = Encoder.load(t5_whole, device="cpu")
    monkeypatch.setattr(Encoder, "embedding_layer", property(lambda self: self.backbone.shared))
    batch = encoder.collate(encoder.tokenize_ids(["the server is down"]))
    with pytest.raises(ModelError) as error:
        encoder(batch.input_ids, batch.attention_mask, embedding_transform=torch.zeros_like)
    assert str(error.value) == (
        f"{t5_whole}: its embedding layer (Embedding) was not called by the forward pass, so a view that edits it "
        "cannot be made; choose views that do not edit it (shuffle, span-cutoff, encoder-dropout)")


def test_an_onnx_export_the_exporter_cannot_do_is_one_line(tiny_encoder: Encoder, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from sentadapt.exporting.onnx import export_graph

    def failing_export(*args: object, **kwargs: object) -> None:
        try:
            raise ValueError("Cannot view a tensor with shape [s1, s2, 2, 16]\nmore detail")
        except ValueError as cause:
            raise RuntimeError("\x1b[96mThis is step 2/3\x1b[0m of exporting the model to ONNX") from cause

    monkeypatch.setattr(torch.onnx, "export", failing_export)
    with pytest.raises(ExportError) as error:
        export_graph(tiny_encoder, tmp_path / "model.onnx")
    assert str(error.value) == ("--format onnx: torch.onnx could not export this bert model (ValueError: Cannot view "
                                "a tensor with shape [s1, s2, 2, 16]); export --format sentence-transformers or hf "
                                "instead")


def test_lora_on_t5_targets_its_attention_projections(t5_whole: Path) -> None:
    from sentadapt.model.lora import target_modules

    encoder = Encoder.load(t5_whole, device="cpu")
    chosen = target_modules(encoder.backbone, "attention")
    assert chosen == [f"encoder.block.{block}.layer.0.SelfAttention.{name}" for block in (0, 1)
                      for name in ("q", "k", "v", "o")]


def _family(name: str, vocabulary: int) -> torch.nn.Module:
    import transformers as hf

    shared = dict(vocab_size=vocabulary, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=37, max_position_embeddings=64, pad_token_id=0)
    configs: dict[str, tuple[str, str, dict[str, object]]] = {
        "bert": ("BertConfig", "BertModel", shared),
        "roberta": ("RobertaConfig", "RobertaModel", shared | {"max_position_embeddings": 66}),
        "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaModel", shared | {"max_position_embeddings": 66}),
        "distilbert": ("DistilBertConfig", "DistilBertModel", dict(vocab_size=vocabulary, dim=32, n_layers=2,
                                                                    n_heads=2, hidden_dim=37, pad_token_id=0)),
        "mpnet": ("MPNetConfig", "MPNetModel", shared | {"max_position_embeddings": 66}),
        "electra": ("ElectraConfig", "ElectraModel", shared | {"embedding_size": 16}),
        "albert": ("AlbertConfig", "AlbertModel", shared | {"embedding_size": 16}),
        "deberta-v2": ("DebertaV2Config", "DebertaV2Model", shared),
        "modernbert": ("ModernBertConfig", "ModernBertModel", shared | {"bos_token_id": 2, "eos_token_id": 3,
                                                                        "cls_token_id": 2, "sep_token_id": 3}),
        "t5": ("T5Config", "T5EncoderModel", dict(vocab_size=vocabulary, d_model=32, num_layers=2, num_heads=2,
                                                  d_ff=37, d_kv=16, pad_token_id=0)),
    }
    config_class, model_class, values = configs[name]
    torch.manual_seed(0)
    return getattr(hf, model_class)(getattr(hf, config_class)(**values))


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "electra", "albert",
                                    "deberta-v2", "modernbert", "t5"])
def test_every_family_trains_a_consert_step_through_its_embedding_layer(family: str) -> None:
    """One ConSERT step on each encoder family: its views (the paper's pair where the model reads position ids,
    token and feature cutoff on T5) give a finite loss whose gradient reaches the embedding layer they edit."""
    from sentadapt.model.pooling import Pooling

    encoder = Encoder(_family(family, tiny_vocabulary_size()), tiny_tokenizer(), Pooling("mean"))
    encoder.train()
    views = ("token-cutoff", "feature-cutoff") if family == "t5" else ("shuffle", "feature-cutoff")
    recipe = ConsertRecipe(ConsertConfig(views=views), encoder)
    batch = encoder.collate(encoder.tokenize_ids(["the server is down", "a man plays the guitar", "red car",
                                                  "dns timeout on the cluster"]))
    loss = Objective(recipe)(encoder, recipe.trainable_heads(),
                               {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}).total
    loss.backward()
    assert torch.isfinite(loss)
    layer = encoder.embedding_layer
    assert layer is not None
    gradients = [parameter.grad for parameter in layer.parameters() if parameter.grad is not None]
    assert gradients and all(torch.isfinite(grad).all() for grad in gradients)
    assert any(grad.abs().sum() > 0 for grad in gradients)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_a_decoder_embedder_with_last_token_pooling_encodes_as_sentence_transformers_does(
        tmp_path: Path, padding_side: str) -> None:
    """A sentence-transformers folder of a causal model pooled by its last token (Qwen3-Embedding's layout, tiny and
    random): sentadapt reads its Pooling and gives sentence-transformers' vectors, whichever side its tokenizer
    pads (sentadapt pads right; a causal model's last token does not see the padding after it)."""
    from sentence_transformers import SentenceTransformer, models

    backbone = _qwen3(tiny_vocabulary_size())
    transformer = models.Transformer(str(_save_with_tiny_tokenizer(backbone, tmp_path / "qwen3")))
    transformer.tokenizer.padding_side = padding_side
    reference = SentenceTransformer(modules=[transformer, models.Pooling(32, "lasttoken"), models.Normalize()],
                                    device="cpu")
    reference.save(str(tmp_path / "st"))
    sentences = ["the server is down and the backup failed", "a man plays the guitar", "red car"]
    encoder = Encoder.load(tmp_path / "st", device="cpu")
    assert encoder.pooling_name == "lasttoken"
    expected = reference.encode(sentences, convert_to_tensor=True, batch_size=3)
    torch.testing.assert_close(encoder.encode(sentences), expected, rtol=1e-4, atol=1e-5)


def _qwen3(vocabulary: int) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(0)
    return Qwen3Model(Qwen3Config(vocab_size=vocabulary, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  num_key_value_heads=1, intermediate_size=37, head_dim=16,
                                  max_position_embeddings=64))


def test_a_tokenizer_without_a_padding_token_pads_with_its_end_of_sequence_token(tmp_path: Path) -> None:
    """Decoder tokenizers often have no padding token: sentadapt pads with the end-of-sequence token (masked out),
    so a padded batch gives each sentence's vector alone; with neither token it says what to set."""
    tokenizer = tiny_tokenizer()
    tokenizer.pad_token = None
    tokenizer.eos_token = "[SEP]"
    folder = tmp_path / "decoder"
    _qwen3(tiny_vocabulary_size()).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    encoder = Encoder.load(folder, pooling="lasttoken", device="cpu")
    assert encoder.tokenizer.pad_token == "[SEP]"
    sentences = ["the server is down and the backup failed", "red car"]
    alone = torch.cat([encoder.encode([sentence]) for sentence in sentences])
    torch.testing.assert_close(encoder.encode(sentences), alone, rtol=1e-4, atol=1e-5)

    tokenizer.eos_token = None
    tokenizer.save_pretrained(folder)
    with pytest.raises(ModelError) as error:
        Encoder.load(folder, device="cpu")
    assert str(error.value) == (f"{folder}: tokenizer has neither a padding nor an end-of-sequence token; sentadapt "
                                "needs one to batch: set pad_token in its tokenizer_config.json")


def test_sg_opt_on_a_last_token_decoder_pulls_the_last_token_not_the_first(tmp_path: Path) -> None:
    """A causal model's first token sees nothing after it: SG-OPT's [CLS] there is its last real token (the base
    pools by it), and the loss moves with a change at the end of a sentence."""
    from sentadapt.model.pooling import Pooling
    from sentadapt.recipes.sgopt import SgOptConfig, SgOptRecipe

    encoder = Encoder(_qwen3(tiny_vocabulary_size()), tiny_tokenizer(), Pooling("lasttoken"))
    recipe = SgOptRecipe(SgOptConfig(head_hidden=8), encoder)
    assert recipe.sentence_pooling == Pooling("lasttoken")
    batch = encoder.collate(encoder.tokenize_ids(["the server is down", "a man plays the guitar"]))
    vectors = recipe.sentence_pooling(encoder.backbone(input_ids=batch.input_ids,
                                                       attention_mask=batch.attention_mask).last_hidden_state,
                                      batch.attention_mask)
    ended_otherwise = batch.input_ids.clone()
    ended_otherwise[0, 3] = 7  # the first sentence's last word before [SEP]: the first token cannot see it
    changed = recipe.sentence_pooling(encoder.backbone(input_ids=ended_otherwise,
                                                       attention_mask=batch.attention_mask).last_hidden_state,
                                      batch.attention_mask)
    assert not torch.allclose(vectors[0], changed[0]) and torch.allclose(vectors[1], changed[1])
    encoder.train()
    loss = Objective(recipe)(encoder, recipe.trainable_heads(),
                               {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}).total
    assert torch.isfinite(loss)
    assert SgOptRecipe(SgOptConfig(head_hidden=8), Encoder(_qwen3(tiny_vocabulary_size()), encoder.tokenizer,
                                                           Pooling("mean"))).sentence_pooling == Pooling("cls")
