"""QA evaluation: FlashRAG-compatible answer metrics, dataset and corpus loaders, prediction reports.

The report (and its rich import) lives in `ragraph.eval.report`; this package root stays stdlib-only.
"""

from ragraph.eval.corpus import CorpusPassage, iter_corpus, load_corpus
from ragraph.eval.datasets import (
    DatasetError,
    GoldPassage,
    QAExample,
    detect_format,
    iter_dataset,
    load_dataset,
)
from ragraph.eval.metrics import (
    answer_recall_at_k,
    exact_match,
    f1_score,
    normalize_answer,
    passage_recall_at_k,
    substring_match,
    token_scores,
)

__all__ = [
    "CorpusPassage",
    "DatasetError",
    "GoldPassage",
    "QAExample",
    "answer_recall_at_k",
    "detect_format",
    "exact_match",
    "f1_score",
    "iter_corpus",
    "iter_dataset",
    "load_corpus",
    "load_dataset",
    "normalize_answer",
    "passage_recall_at_k",
    "substring_match",
    "token_scores",
]
