"""Where bytes live: durable writes, the run folder and its files, row files, memos, the Hugging Face Hub."""
