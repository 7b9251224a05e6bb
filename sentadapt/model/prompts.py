"""A model's prompts ("query: ", "passage: "), as sentence-transformers stores and applies them, without torch.

sentence-transformers keeps them in `config_sentence_transformers.json` (`prompts`: name → text,
`default_prompt_name`) and the Pooling module's `include_prompt` (false: the prompt's tokens are not pooled).
`encode(prompt_name=…)` prepends the text; with neither a prompt nor a name the default prompt applies.
sentence-transformers 6 always has a "query" and a "document" prompt ("" unless the model sets them), so
`encode_query` gets the "query" prompt or none (never the default), and `encode_document` the "document"
prompt or none. `Prompts.default_for` mirrors that, with one deliberate difference: documents get the first
NON-EMPTY prompt of "document", "passage", "corpus" (e5's "passage: " is what it was trained with; ST 6's
placeholder "document": "" would hide it).
Read here (before torch loads) so `adapt --prompt` and `eval --query-prompt` fail fast on an unknown name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.errors import ConfigError, ModelError
from sentadapt.model.resolve import ResolvedModel
from sentadapt.model.st_modules import module_kind, read_json, read_modules
from sentadapt.registry import one_line
from sentadapt.storage.hub import hub_file

CONFIG_FILE = "config_sentence_transformers.json"
NO_PROMPT = "none"  # the option value that asks for no prompt
PAIR, QUERY, DOCUMENT = "pair", "query", "document"  # the sides of a task that get a prompt
SIDES = (PAIR, QUERY, DOCUMENT)
DOCUMENT_NAMES = ("document", "passage", "corpus")  # encode_document's candidates, in its order
SIDE_OPTIONS = {PAIR: "--prompt", QUERY: "--query-prompt", DOCUMENT: "--document-prompt"}


@dataclass(frozen=True)
class Prompts:
    """What a model says about prompts: `texts` (name → text), the default name, and whether pooling keeps the
    prompt's tokens (sentence-transformers' Pooling `include_prompt`)."""

    texts: Mapping[str, str] = field(default_factory=dict)
    default_name: str | None = None
    include_prompt: bool = True

    def text_of(self, name: str, option: str = "--prompt", model: str = "the model") -> str:
        """The text of prompt `name`; an unknown name is a one-line ConfigError listing the model's prompts."""
        if name in self.texts:
            return self.texts[name]
        if not self.texts:
            raise ConfigError(f"{option}: '{one_line(name)}' is not a prompt of {model}, which has no prompts; "
                              f"pass {NO_PROMPT} or leave {option} out")
        raise ConfigError(f"{option}: '{one_line(name)}' is not a prompt of {model}; its prompts: "
                          f"{', '.join(sorted(self.texts))} (or {NO_PROMPT})")

    def resolve(self, prompt: str | None = None, prompt_name: str | None = None, model: str = "the model") -> str:
        """sentence-transformers' `encode` rule: an explicit `prompt` wins, then `prompt_name`, then the default
        prompt; "" means no prompt."""
        if prompt is not None:
            return prompt
        if prompt_name is not None:
            return self.text_of(prompt_name, "prompt_name", model)
        return self.texts.get(self.default_name, "") if self.default_name else ""

    def default_for(self, side: str) -> str | None:
        """The prompt name a side gets when no option says (see the module docstring): queries "query", documents
        the first non-empty of DOCUMENT_NAMES, pairs (and training sentences) the default name; None: no prompt."""
        if side == PAIR:
            return self.default_name
        names = (QUERY,) if side == QUERY else DOCUMENT_NAMES
        return next((name for name in names if self.texts.get(name)), None)

    def name_for(self, side: str, choice: str | None, model: str = "the model") -> str:
        """The prompt name `side` gets: `choice` (checked), else the side's default; NO_PROMPT when none applies."""
        if choice == NO_PROMPT:
            return NO_PROMPT
        if choice is not None:
            self.text_of(choice, SIDE_OPTIONS[side], model)
            return choice
        return self.default_for(side) or NO_PROMPT

    def for_side(self, side: str, choice: str | None = None, model: str = "the model") -> str:
        """The prompt text `side` gets ("" for none): see `name_for`."""
        name = self.name_for(side, choice, model)
        return "" if name == NO_PROMPT else self.texts.get(name, "")

    def to_config(self) -> dict[str, Any]:
        """The `config_sentence_transformers.json` fields."""
        return {"prompts": dict(self.texts), "default_prompt_name": self.default_name}


@dataclass(frozen=True)
class PromptChoice:
    """Which prompt each task side gets (`eval --prompt/--query-prompt/--document-prompt`): a prompt name,
    NO_PROMPT, or None for the model's default (Prompts.default_for)."""

    pair: str | None = None
    query: str | None = None
    document: str | None = None

    def of(self, side: str) -> str | None:
        return {PAIR: self.pair, QUERY: self.query, DOCUMENT: self.document}[side]


def read_prompts(model: ResolvedModel) -> Prompts:
    """The prompts of a model folder or Hub id (none for a plain Hugging Face model)."""
    if model.is_local:
        folder = Path(model.location)
        return parse_prompts(folder / CONFIG_FILE, folder / "modules.json", lambda path: folder / path / "config.json")
    config = hub_file(model.location, CONFIG_FILE)
    if config is None:  # a plain Hugging Face model: no prompts, and no Pooling to ask (saves two requests)
        return Prompts()
    return parse_prompts(config, hub_file(model.location, "modules.json"),
                         lambda path: hub_file(model.location, f"{path}/config.json" if path else "config.json"))


def parse_prompts(config_file: Path | None, modules_file: Path | None, pooling_config: Any) -> Prompts:
    """Prompts from the JSON files; `pooling_config(module path)` finds a Pooling module's config."""
    texts: dict[str, str] = {}
    default_name = None
    if config_file is not None and config_file.is_file():
        config = read_json(config_file)
        raw = (config.get("prompts") or {}) if isinstance(config, dict) else {}
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise ModelError(f"{config_file}: 'prompts' must map prompt names to texts")
        texts = {str(name): text for name, text in raw.items()}
        default_name = config.get("default_prompt_name")
        if default_name is not None and default_name not in texts:
            raise ModelError(f"{config_file}: default_prompt_name '{one_line(str(default_name))}' is not one of its "
                             f"prompts ({', '.join(sorted(texts)) or 'none'})")
    return Prompts(texts, default_name, _include_prompt(modules_file, pooling_config))


def _include_prompt(modules_file: Path | None, pooling_config: Any) -> bool:
    if modules_file is None or not modules_file.is_file():
        return True
    for module in read_modules(modules_file):
        if module_kind(module.get("type", "")) == "Pooling":
            path = pooling_config(module.get("path", ""))
            if path is not None and Path(path).is_file():
                return bool(read_json(Path(path)).get("include_prompt", True))
    return True
