"""SQuAD v1.1 / v2.0 (reference §5.2): data.py (reading, character alignment, windowed features, records),
postprocess.py (n-best spans, v1/v2 answers, null-score thresholds, prediction files) and task.py (the fine-tuning
task). The evaluation scripts' equivalent is `tasks.squad_evaluate`."""

from tasks.squad.data import (SPIECE_UNDERLINE, UNIQUE_ID_START, FeatureStats, SquadDataError, SquadExample,
                              SquadFeature, SquadRecords, align_tokens, answer_token_span,
                              convert_examples_to_features, feature_record, features_to_arrays, load_dataset,
                              preprocess_with_offsets, read_squad_examples, shuffle_training_order)
from tasks.squad.postprocess import (NULL_FALLBACK_SCORE, V1_EMPTY_TEXT, apply_null_threshold, evaluate_v2_protocols,
                                     feature_text, postprocess_v1, postprocess_v2, write_predictions)
from tasks.squad.task import V1_OUTPUT_KEYS, V2_OUTPUT_KEYS, SquadTask, SquadTaskConfig, squad_feature_spec
