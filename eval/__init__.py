"""Evaluation of word vectors: word-pair similarity, analogies, synonym MR/MRR and POS tagging.

Typical use::

    from semhuff.eval import load_vectors, run_suite, format_text
    report = run_suite([load_vectors("a.bin"), load_vectors("b.kv")])
    print(format_text(report))

Each task also works on its own with a :class:`Lookup` (unit vectors + gensim's lookup rules).
A task is a registered :class:`EvaluationTask` (``semhuff.eval.tasks``); a new one is one file
with ``@register_task("name")``, imported before the suite runs (``semhuff-eval --plugin``).
"""
# the built-in tasks register in this order: the order of the report's rows and of --tasks
from . import similarity, analogy, synonyms, pos  # noqa: F401  (isort: skip)
from .analogy import METHODS as ANALOGY_METHODS, evaluate_analogies, predict as predict_analogies, read_analogies
from .datasets import DatasetMissing, data_root, SIMILARITY_FILES
from .pos import POS_CORPORA, evaluate_pos, load_pos_corpus, load_pos_files, read_conllu
from .report import dump_json, format_markdown, format_text, plot, to_json
from .results import Score
from .similarity import evaluate_word_pairs, read_word_pairs
from .suite import Report, SuiteConfig, run_suite
from .synonyms import evaluate_synonyms, read_synonym_pairs, synonym_ranks
from .tasks import EVALUATION_TASKS, EvaluationTask, Panel, register_task, task_names
from .thesaurus import mythes_synsets, synonym_pairs, wordnet_synsets
from .vectors import LoadedVectors, LoadReport, Lookup, VectorsError, load_vectors

__all__ = [
    "ANALOGY_METHODS", "DatasetMissing", "EVALUATION_TASKS", "EvaluationTask", "LoadReport", "LoadedVectors",
    "Lookup", "POS_CORPORA", "Panel", "Report", "SIMILARITY_FILES", "Score", "SuiteConfig", "VectorsError",
    "data_root", "dump_json", "evaluate_analogies", "evaluate_pos", "evaluate_synonyms", "evaluate_word_pairs",
    "format_markdown", "format_text", "load_pos_corpus", "load_pos_files", "load_vectors", "mythes_synsets",
    "plot", "predict_analogies", "read_analogies", "read_conllu", "read_synonym_pairs", "read_word_pairs",
    "register_task", "run_suite", "synonym_pairs", "synonym_ranks", "task_names", "to_json", "wordnet_synsets",
]
