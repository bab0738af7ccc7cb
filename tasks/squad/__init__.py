"""SQuAD v1.1 / v2.0 (reference §5.2): data.py (reading, character alignment, windowed features, records),
postprocess.py (n-best spans, v1/v2 answers, null-score thresholds, prediction files), schedule.py (the recipe's
epochs against the data) and task.py (the fine-tuning task). The evaluation scripts' equivalent is
`tasks.squad_evaluate`."""

from tasks.squad.data import align_tokens
from tasks.squad.data import answer_token_span
from tasks.squad.data import convert_examples_to_features
from tasks.squad.data import feature_record
from tasks.squad.data import features_to_arrays
from tasks.squad.data import FeatureStats
from tasks.squad.data import load_dataset
from tasks.squad.data import preprocess_with_offsets
from tasks.squad.data import read_squad_examples
from tasks.squad.data import shuffle_training_order
from tasks.squad.data import SPIECE_UNDERLINE
from tasks.squad.data import SquadDataError
from tasks.squad.data import SquadExample
from tasks.squad.data import SquadFeature
from tasks.squad.data import SquadRecords
from tasks.squad.data import UNIQUE_ID_START
from tasks.squad.postprocess import apply_null_threshold
from tasks.squad.postprocess import evaluate_v2_protocols
from tasks.squad.postprocess import feature_text
from tasks.squad.postprocess import NULL_FALLBACK_SCORE
from tasks.squad.postprocess import postprocess_v1
from tasks.squad.postprocess import postprocess_v2
from tasks.squad.postprocess import V1_EMPTY_TEXT
from tasks.squad.postprocess import write_predictions
from tasks.squad.schedule import epoch_steps
from tasks.squad.schedule import resolve_steps
from tasks.squad.schedule import WARMUP_PROPORTION
from tasks.squad.task import squad_feature_spec
from tasks.squad.task import SquadTask
from tasks.squad.task import SquadTaskConfig
from tasks.squad.task import V1_OUTPUT_KEYS
from tasks.squad.task import V2_OUTPUT_KEYS
