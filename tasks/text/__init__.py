"""Your own data: generic text tasks read straight from CSV / TSV / JSONL / CoNLL files.

data.py (readers, bad-row handling, label sets, word-piece alignment, records), metrics.py (entity F1 in the
conlleval / seqeval manner, multi-label and macro F1), task.py (configs, `text_classification`, `text_regression`,
raw files → cached records, labels.json), tagging.py (`token_classification`), predictions.py (prediction files).
"""

from tasks.text.data import (FORMATS, IGNORE_LABEL, ReadOptions, TextDataError, TextExample, align_words,
                             read_examples, read_text_examples, read_token_examples)
from tasks.text.metrics import entities, entity_scores
from tasks.text.tagging import TokenClassificationTask
from tasks.text.task import (LABELS_FILE, SPM_FILE, TextClassificationConfig, TextClassificationTask,
                             TextRegressionConfig, TextRegressionTask, TextTaskConfig, TokenClassificationConfig)
