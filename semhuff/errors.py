"""Errors a user can cause: the CLIs turn these into a one-line message and exit code 2."""


class SemhuffError(Exception):
    """Bad input or options: message is meant for the user, no traceback needed."""


class CorpusError(SemhuffError):
    """The corpus is missing, empty, unreadable or not text."""


class VocabError(SemhuffError):
    """The vocabulary cannot be built (e.g. no word reaches min_count)."""
