"""Your own data: generic text tasks read straight from CSV / TSV / JSONL / CoNLL files.

data.py (readers, bad-row handling, label sets, word-piece alignment, records), metrics.py (entity F1 in the
conlleval / seqeval manner, multi-label and macro F1), config.py (the configs), task.py (`text_classification`,
`text_regression`, raw files → cached records, labels.json), tagging.py (`token_classification`), conll.py (CoNLL
columns and layout), sentence_ids.py (which records build a tagging record comes from), label_names.py and
repeated_rows.py (label-set and repeated-text checks), predictions.py (prediction files).
"""

from tasks.text.data import align_words
from tasks.text.data import FORMATS
from tasks.text.data import IGNORE_LABEL
from tasks.text.data import read_examples
from tasks.text.data import read_text_examples
from tasks.text.data import read_token_examples
from tasks.text.data import ReadOptions
from tasks.text.data import TextDataError
from tasks.text.data import TextExample
from tasks.text.metrics import entities
from tasks.text.metrics import entity_scores
from tasks.text.tagging import TokenClassificationTask
from tasks.text.task import LABELS_FILE
from tasks.text.task import SPM_FILE
from tasks.text.task import TextClassificationConfig
from tasks.text.task import TextClassificationTask
from tasks.text.task import TextRegressionConfig
from tasks.text.task import TextRegressionTask
from tasks.text.task import TextTaskConfig
from tasks.text.task import TokenClassificationConfig
