"""Prompts end to end: read from a sentence-transformers folder, applied by encode (parity with
sentence-transformers, include_prompt false too), used in training, written back by save/export, and chosen per
task side by eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from sentadapt.errors import ConfigError
from sentadapt.model.encoder import Encoder
from sentadapt.model.prompts import DOCUMENT, PAIR, QUERY, PromptChoice, Prompts
from tests.conftest import TINY_SENTENCES

st = pytest.importorskip("sentence_transformers")

PROMPTS = {"query": "query: ", "document": "passage: "}
PARITY_ATOL = 1e-6  # the same model in two libraries on one machine (see conftest: FLOAT32_RTOL for the rule)


def build_prompted_model(base: Path, folder: Path, pooling: str = "mean", include_prompt: bool = True) -> Path:
    """A tiny sentence-transformers model with prompts, saved as sentence-transformers saves it."""
    from sentence_transformers.sentence_transformer import modules

    pipeline = [modules.Transformer(str(base), max_seq_length=48),
                modules.Pooling(32, pooling_mode=pooling, include_prompt=include_prompt)]
    model = st.SentenceTransformer(modules=pipeline, device="cpu", prompts=PROMPTS, default_prompt_name="query")
    model.save(str(folder))
    return folder


@pytest.fixture(scope="module")
def prompted_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_prompted_model(tiny_model_dir, tmp_path_factory.mktemp("prompted") / "model")


def _loaded(folder: Path):
    return st.SentenceTransformer(str(folder), device="cpu")


# ---------------------------------------------------------------------------------------------- encoder parity
@pytest.mark.parametrize(("pooling", "include_prompt"), [("mean", True), ("mean", False), ("cls", False),
                                                         ("max", False)])
def test_encode_with_a_prompt_equals_sentence_transformers(tiny_model_dir: Path, tmp_path: Path, pooling: str,
                                                           include_prompt: bool) -> None:
    folder = build_prompted_model(tiny_model_dir, tmp_path / "model", pooling, include_prompt)
    encoder, theirs = Encoder.load(folder, device="cpu"), _loaded(folder)
    assert dict(encoder.prompts.texts) == {"query": "query: ", "document": "passage: "}
    assert (encoder.prompts.default_name, encoder.prompts.include_prompt) == ("query", include_prompt)
    for keywords in ({"prompt_name": "query"}, {"prompt_name": "document"}, {}, {"prompt": ""},
                     {"prompt": "the server "}):
        ours = encoder.encode(TINY_SENTENCES, **keywords)
        reference = theirs.encode(TINY_SENTENCES, convert_to_tensor=True, **keywords).cpu()
        torch.testing.assert_close(ours, reference, atol=PARITY_ATOL, rtol=0, msg=f"{keywords}")
    if not include_prompt:  # the prompt's tokens really are left out: pooled, they would change the vectors
        encoder.prompts = Prompts(encoder.prompts.texts, "query", include_prompt=True)
        assert not torch.allclose(encoder.encode(TINY_SENTENCES, prompt_name="query"), reference, atol=1e-3)


def test_prompt_length_is_counted_as_sentence_transformers_counts_it(prompted_dir: Path) -> None:
    """[CLS] q ##u ##e ##r ##y [UNK]: seven tokens; the trailing [SEP] is not the prompt's."""
    encoder = Encoder.load(prompted_dir, device="cpu")
    assert encoder.prompt_length("query: ") == _loaded(prompted_dir)[0]._get_prompt_length("query: ") == 7
    assert encoder.prompt_length("") == 0


def test_training_forward_leaves_the_training_prompt_out_of_pooling(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Token ids made with the prompt (as the corpus cache makes them) pool like encode(prompt_name=...)."""
    encoder = Encoder.load(build_prompted_model(tiny_model_dir, tmp_path / "m", include_prompt=False), device="cpu")
    encoder.configure(train_prompt_length=encoder.prompt_length("query: "))
    batch = encoder.collate(encoder.tokenize_ids([f"query: {text}" for text in TINY_SENTENCES]))
    with torch.no_grad():
        trained_view = encoder(batch.input_ids, batch.attention_mask)
    torch.testing.assert_close(trained_view, encoder.encode(TINY_SENTENCES, prompt_name="query"), atol=1e-6, rtol=0)


def test_a_base_without_prompts_has_none(tiny_encoder: Encoder) -> None:
    assert tiny_encoder.prompts == Prompts()
    torch.testing.assert_close(tiny_encoder.encode(TINY_SENTENCES), tiny_encoder.encode(TINY_SENTENCES, prompt=""))


# ---------------------------------------------------------------------------------------------- sides and names
def test_each_side_gets_the_prompt_sentence_transformers_gives_it() -> None:
    e5 = Prompts({"query": "query: ", "passage": "passage: ", "document": ""}, "query")
    assert [e5.for_side(side) for side in (QUERY, DOCUMENT, PAIR)] == ["query: ", "passage: ", "query: "]
    assert e5.for_side(DOCUMENT, "query") == "query: " and e5.for_side(QUERY, "none") == ""
    plain = Prompts({"passage": "passage: "}, "passage")  # no "query" prompt: queries get none (ST 6 encode_query)
    assert [plain.for_side(side) for side in (QUERY, DOCUMENT, PAIR)] == ["", "passage: ", "passage: "]


@pytest.mark.parametrize(("prompts", "message"), [
    (Prompts(PROMPTS, "query"), "--query-prompt: 'qury' is not a prompt of m; its prompts: document, query "
                                "(or none)"),
    (Prompts(), "--query-prompt: 'qury' is not a prompt of m, which has no prompts; pass none or leave "
                "--query-prompt out"),
])
def test_an_unknown_prompt_name_lists_the_models_prompts(prompts: Prompts, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        prompts.name_for(QUERY, "qury", "m")
    assert str(error.value) == message


# ---------------------------------------------------------------------------------------------- eval
def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    documents = [("d1", "the server is down"), ("d2", "a man is playing a guitar"), ("d3", "the dog is running fast")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in documents))
    queries = [("q1", "the server is down"), ("q2", "a man is playing music")]  # q1's text is also a document
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def test_retrieval_gives_queries_the_query_prompt_and_documents_the_document_prompt(
        prompted_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sentadapt import evaluate
    from sentadapt.evaluation.retrieval import RetrievalTask

    calls: list[tuple[str, list[str]]] = []
    encode = Encoder.encode

    def recording(self: Encoder, texts: list[str], *args: object, **kwargs: object) -> torch.Tensor:
        calls.append((str(kwargs.get("prompt")), list(texts)))
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", recording)
    folder = _beir(tmp_path / "beir")
    result = evaluate(str(prompted_dir), retrieval=[folder], bootstrap=0)
    assert sorted(calls) == [("passage: ", ["the server is down", "a man is playing a guitar",
                                            "the dog is running fast"]),
                             ("query: ", ["the server is down", "a man is playing music"])]
    assert result.reports[0][0].prompts == {"document": "passage: ", "query": "query: "}

    # the same numbers from sentence-transformers' encode_query / encode_document
    model, task = _loaded(prompted_dir), RetrievalTask.read(folder)
    queries = model.encode_query(task.collection.query_texts, convert_to_tensor=True).cpu()
    documents = model.encode_document(task.collection.corpus_texts, convert_to_tensor=True).cpu()
    scores = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(documents, dim=-1).T
    expected = task.per_query(torch.argsort(scores, dim=1, descending=True).numpy())
    assert result.reports[0][0].tasks[0].metrics["ndcg@10"] == pytest.approx(100 * expected["ndcg@10"].mean())

    calls.clear()
    evaluate(str(prompted_dir), retrieval=[folder], bootstrap=0, query_prompt="none", document_prompt="none")
    assert [prompt for prompt, _ in calls] == [""]  # one prompt for both sides: each unique text once


def test_pairs_get_the_default_prompt_unless_told(prompted_dir: Path, pairs_tsv: Path) -> None:
    from sentadapt import evaluate

    default = evaluate(str(prompted_dir), pairs=[pairs_tsv], bootstrap=0).reports[0][0]
    none = evaluate(str(prompted_dir), pairs=[pairs_tsv], bootstrap=0, prompt="none").reports[0][0]
    assert default.prompts == {"pair": "query: "} and none.prompts == {}
    assert default.tasks[0].outputs["cosine"].tolist() != none.tasks[0].outputs["cosine"].tolist()


def test_eval_refuses_an_unknown_prompt_name_before_loading(prompted_dir: Path, pairs_tsv: Path) -> None:
    from sentadapt import evaluate

    with pytest.raises(ConfigError) as error:
        evaluate(str(prompted_dir), pairs=[pairs_tsv], document_prompt="passage")
    assert str(error.value) == (f"--document-prompt: 'passage' is not a prompt of {prompted_dir}; its prompts: "
                                "document, query (or none)")


def test_evaluator_choice_is_per_side() -> None:
    assert PromptChoice(query="none").of(QUERY) == "none" and PromptChoice().of(DOCUMENT) is None


# ---------------------------------------------------------------------------------------------- training
def test_the_corpus_cache_tokenizes_with_the_prompt(prompted_dir: Path, corpus: Path) -> None:
    from sentadapt.data.prepare import prepare_sentences

    encoder = Encoder.load(prompted_dir, device="cpu")
    plain = prepare_sentences([corpus], encoder.tokenizer, 32).examples
    prompted = prepare_sentences([corpus], encoder.tokenizer, 32, prompt="query: ").examples
    first_plain, first_prompted = (examples.columns[0][0].as_py() for examples in (plain, prompted))
    assert first_prompted == encoder.tokenize_ids(["query: the server 0 is down"])[0]
    assert first_prompted[encoder.prompt_length("query: "):] == first_plain[1:]


def test_adapt_records_the_prompt_and_refuses_an_unknown_one(prompted_dir: Path, tiny_model_dir: Path,
                                                             corpus: Path, tmp_path: Path) -> None:
    from sentadapt import adapt
    from sentadapt.config.merging import load_run_config
    from sentadapt.recipes import RECIPES

    options = {"max_steps": 2, "dev": "none", "dry_run": True}
    assert adapt(corpus, output=tmp_path / "a", base=str(prompted_dir), **options).configs[0].prompt == "query"
    assert adapt(corpus, output=tmp_path / "b", base=str(prompted_dir), prompt="none",
                 **options).configs[0].prompt == "none"
    assert adapt(corpus, output=tmp_path / "c", base=str(tiny_model_dir), **options).configs[0].prompt == "none"
    with pytest.raises(ConfigError) as error:
        adapt(corpus, output=tmp_path / "d", base=str(tiny_model_dir), prompt="query", **options)
    assert str(error.value) == (f"--prompt: 'query' is not a prompt of {tiny_model_dir}, which has no prompts; "
                                "pass none or leave --prompt out")
    saved = tmp_path / "old.yaml"  # a run saved before prompts existed resumes without one
    saved.write_text(yaml.safe_dump({"recipe": "consert", "base": "b", "corpus": ["c"], "output": "o"}))
    assert load_run_config(saved, {"consert": RECIPES.get("consert").spec.settings}).prompt == "none"


def test_adapt_then_export_keeps_the_prompts_for_sentence_transformers(prompted_dir: Path, corpus: Path,
                                                                       tmp_path: Path) -> None:
    """adapt (2 steps, the default prompt) → export → SentenceTransformer(out).encode_query is what sentadapt
    encodes for queries."""
    from sentadapt import adapt, export

    notes: list[str] = []
    run = adapt(corpus, output=tmp_path / "run", base=str(prompted_dir), max_steps=2, batch_size=8, max_length=16,
                dev="none", note=notes.append)
    assert yaml.safe_load((run.output / "config.yaml").read_text())["prompt"] == "query"
    assert "prompt: every training sentence starts with query 'query: ', pooled" in notes
    export(run.output, tmp_path / "out")
    loaded, ours = _loaded(tmp_path / "out"), Encoder.load(tmp_path / "out", device="cpu")
    assert {name: loaded.prompts[name] for name in PROMPTS} == PROMPTS and loaded.default_prompt_name == "query"
    assert dict(ours.prompts.texts) == dict(Encoder.load(run.output, device="cpu").prompts.texts)
    queries = loaded.encode_query(TINY_SENTENCES, convert_to_tensor=True).cpu()
    torch.testing.assert_close(ours.encode(TINY_SENTENCES, prompt=ours.prompts.for_side(QUERY)), queries,
                               atol=1e-5, rtol=0)
    saved = json.loads((run.output / "config_sentence_transformers.json").read_text())
    assert (saved["prompts"], saved["default_prompt_name"]) == (PROMPTS, "query")


def test_the_cli_prints_the_unknown_prompt_as_one_line(prompted_dir: Path, pairs_tsv: Path) -> None:
    from typer.testing import CliRunner

    from sentadapt.cli import app

    result = CliRunner().invoke(app, ["eval", str(prompted_dir), "--pairs", str(pairs_tsv), "--prompt", "qury"])
    assert result.exit_code == 2
    assert (f"--prompt: 'qury' is not a prompt of {prompted_dir}; its prompts: document, query (or none)"
            in " ".join(result.output.split()))
