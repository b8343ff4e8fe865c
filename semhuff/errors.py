"""Every error a user can cause, in one place. The CLIs turn a ``SemhuffError`` into a one-line
message and exit code 2; the subclasses say which stage of the data flow refused the input."""


class SemhuffError(Exception):
    """Bad input or options: the message is meant for the user, no traceback needed."""


class OptionError(SemhuffError):
    """An option (API argument or CLI flag) is out of range or inconsistent with another."""


class CorpusError(SemhuffError):
    """The corpus is missing, empty, unreadable or not text."""


class VocabError(SemhuffError, RuntimeError):
    """The vocabulary cannot be built or read (e.g. no word reaches min_count). Also a
    ``RuntimeError``: what gensim raises there ("you must first build vocabulary"), so code
    written for gensim catches it through ``semhuff.gensim``."""


class TreeError(SemhuffError):
    """A tree is malformed, does not fit the vocabulary, or cannot be built or read."""


class SimilarityError(SemhuffError):
    """A similarity source cannot be read at all (missing file, no WordNet, bad vectors)."""


class VectorsError(SemhuffError):
    """Word vectors cannot be loaded (missing, empty, unreadable or of an unknown format)."""


class ModelFileError(SemhuffError):
    """A file is not a semhuff model, or was saved by a layer that is not registered here."""


class OutputError(SemhuffError):
    """An output file cannot be written."""


class DatasetMissing(SemhuffError):
    """A data set file or folder is not there; the task that needs it is skipped."""


class DeviceError(SemhuffError):
    """The requested device (e.g. a GPU) is not usable here."""


class TrainingDiverged(SemhuffError):
    """The loss or the weights became non-finite: the run failed and wrote nothing."""


class UnsupportedArgument(OptionError, ValueError):
    """A gensim argument (or value) that semhuff.gensim cannot honour: refused, never ignored."""


class CacheSpaceError(SemhuffError):
    """The first epoch's id cache cannot be written: no room in its folder (``--tmp-dir``)."""


class CheckpointError(SemhuffError):
    """A checkpoint cannot be resumed: not a checkpoint, another corpus, conflicting options."""
