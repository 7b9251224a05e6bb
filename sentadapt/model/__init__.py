"""The model: the encoder (tokenizer, transformer, pooling, head), its loading and saving in the sentence-transformers
folder format, prompts, LoRA adapters, compilation, and the cache of its vectors."""
