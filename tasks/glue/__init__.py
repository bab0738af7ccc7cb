"""GLUE (reference §5.1): files.py (TSV reading, the release's header rows), data.py (task specs, examples, feature
conversion, records, metrics, submission files; no Keras of its own: `data_prep.create_finetuning_data` calls it) and
task.py (the fine-tuning task). Registers the `glue` task."""

from tasks.glue.data import compute_metrics
from tasks.glue.data import convert_example
from tasks.glue.data import convert_examples
from tasks.glue.data import get_spec
from tasks.glue.data import GlueRecords
from tasks.glue.data import GlueTaskSpec
from tasks.glue.data import InputExample
from tasks.glue.data import key_metric
from tasks.glue.data import predictions_to_labels
from tasks.glue.data import read_examples
from tasks.glue.data import task_file
from tasks.glue.data import TASKS
from tasks.glue.data import write_submission
from tasks.glue.files import GlueDataError
from tasks.glue.files import HEADERS
from tasks.glue.files import is_header
from tasks.glue.files import iter_tsv
from tasks.glue.files import read_tsv
from tasks.glue.task import glue_feature_spec
from tasks.glue.task import GlueTask
from tasks.glue.task import GlueTaskConfig
from tasks.glue.task import head_order
from tasks.glue.task import records_source
