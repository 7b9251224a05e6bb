"""Errors a user can fix. The CLI prints them as one line and exits non-zero; anything else is a bug."""


class SentadaptError(Exception):
    """Base class: the message must say what is wrong and what to do about it."""

    exit_code = 1


class ConfigError(SentadaptError):
    """A bad option, config file or `--set` value."""

    exit_code = 2


class DataError(SentadaptError):
    """A missing, empty or malformed data file (the message names the file and line)."""


class ModelError(SentadaptError):
    """A model that cannot be found, resolved or loaded."""


class ExportError(SentadaptError):
    """An export that cannot be written or verified."""


class NoImprovement(SentadaptError):
    """`adapt --require-improvement`: the run finished but no checkpoint beat the base model on dev."""

    exit_code = 3


class StorageError(SentadaptError):
    """A file that cannot be written: disk full, file too large, no permission (the message names the path)."""


class ResultNotWritten(StorageError):
    """The work finished but a file of its result (`--json`, `--plot`) could not be written. `result` holds what was
    computed: the CLI prints it, then this line; a Python caller still has it."""

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


class CheckpointError(SentadaptError):
    """A model folder or checkpoint that fails verification (its manifest's checksums)."""
