"""SQuAD evaluation from prebuilt records: the records' settings are checked against the features rebuilt from the
JSON, and the v2 predictions.json holds the answers the reported F1 scores (reference §5.2)."""

import json
import shutil

import numpy as np
import pytest

from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from tasks import squad
from tasks.squad import task as squad_task

SEQ = 128  # short windows: the 14 dev questions give many, so a wrong doc_stride maps outputs to other windows


@pytest.fixture(scope="module")
def dev_file(shared_data_dir):
  return str(shared_data_dir / "squad" / "dev-v2.0.json")


@pytest.fixture(scope="module")
def records(tmp_path_factory, dev_file, spm_model_file):
  """create_finetuning_data's squad_v2 dev and train records, made with --doc_stride=32."""
  from data_prep.create_finetuning_data import create_finetuning_data
  out = str(tmp_path_factory.mktemp("squad_records"))
  dev = create_finetuning_data("squad_v2", out, spm_model_file, splits=["dev"], input_file=dev_file,
                               max_seq_length=SEQ, doc_stride=32)["dev"]["record_path"]
  train = create_finetuning_data("squad_v2", out, spm_model_file, splits=["train"], input_file=dev_file,
                                 max_seq_length=SEQ, doc_stride=32)["train"]["record_path"]
  return {"dev": dev, "train": train}


def _task(spm_model_file, input_path, dev_file, logging_dir=None, **overrides):
  from official_albert.training.experiment_config import DataConfig
  data = DataConfig(input_path=input_path, seq_length=SEQ, global_batch_size=8, is_training=False,
                    drop_remainder=False)
  cfg = squad.SquadTaskConfig(version_2_with_negative=True, spm_model_file=spm_model_file, predict_file=dev_file,
                              validation_data=data, predict_data=data, **overrides)
  return squad.SquadTask(cfg, logging_dir=logging_dir)


def _oracle_logs(dev_file, spm_model_file, doc_stride, impossible_span=False):
  """v2 head outputs that point at the gold span of every window of the dev records (windows of `doc_stride`);
  an unanswerable question's windows get a high null score (and, with `impossible_span`, some paragraph span)."""
  from official_albert.tokenization import FullTokenizer
  examples = squad.read_squad_examples(dev_file, is_training=False, version_2_with_negative=True)
  features, _ = squad.convert_examples_to_features(examples, FullTokenizer(spm_model_file), SEQ, doc_stride, 64)
  logs = {k: [] for k in squad.V2_OUTPUT_KEYS + ("unique_ids",)}
  for f in features:
    starts, ends = np.zeros(5, np.int64), np.zeros(25, np.int64)
    impossible = examples[f.example_index].is_impossible
    if f.start_position > 0:
      starts[0], ends[0] = f.start_position, f.end_position
    elif impossible and impossible_span:
      starts[0], ends[0] = f.doc_offset + 1, f.doc_offset + 3
    logs["start_top_log_probs"].append(np.array([[0.0] + [-50.0] * 4], np.float32))
    logs["start_top_index"].append(starts[None])
    logs["end_top_log_probs"].append(np.array([[0.0] + [-50.0] * 24], np.float32))
    logs["end_top_index"].append(ends[None])
    logs["cls_logits"].append(np.array([(5.0 if impossible else -5.0) + 0.01 * f.example_index], np.float32))
    logs["unique_ids"].append(np.array([f.unique_id]))
  return examples, logs


def test_records_made_with_other_settings_are_refused(records, dev_file, spm_model_file, tmp_path):
  # Before: task.doc_stride left at 128 beside --doc_stride=32 records scored 42.86 F1 instead of 100, silently.
  _, logs = _oracle_logs(dev_file, spm_model_file, 32)
  result = _task(spm_model_file, records["dev"], dev_file, doc_stride=32).reduce_aggregated_logs(logs)
  assert result["exact"] == result["f1"] == 100.0
  with pytest.raises(ValueError, match=r"squad_v2_dev\.meta\.json: .*doc_stride: records 32, task\.doc_stride 128"):
    _task(spm_model_file, records["dev"], dev_file).reduce_aggregated_logs(logs)
  with pytest.raises(ValueError, match=r"do_lower_case: records True, task\.do_lower_case False"):
    _task(spm_model_file, records["dev"], dev_file, doc_stride=32, do_lower_case=False).reduce_aggregated_logs(logs)
  with pytest.raises(ValueError, match=r"max_query_length: records 64, task\.max_query_length 16"):
    _task(spm_model_file, records["dev"], dev_file, doc_stride=32, max_query_length=16).write_prediction_files(
        logs, str(tmp_path))
  with pytest.raises(ValueError, match=r"squad_v2_train\.meta\.json: these are training records .*--split=dev"):
    _task(spm_model_file, records["train"], dev_file, doc_stride=32).reduce_aggregated_logs(logs)


def test_records_made_with_other_tokenizer_options_than_the_models_are_refused(records, dev_file, spm_model_file,
                                                                               tmp_path):
  """Evaluation rebuilds the features with the model's keep_accents / remove_space (task.init_checkpoint's folder's
  tokenizer_config.json here): records made with the defaults (a key without them) are refused naming the key and
  the fix; records made with create_finetuning_data --keep_accents pass, and the defaults' records pass a default
  model. (Before, only do_lower_case, the mode and the SentencePiece model were compared: wrong spans, silently.)"""
  from data_prep.create_finetuning_data import create_finetuning_data
  init = tmp_path / "accented"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"keep_accents": True})
  accented_task = _task(spm_model_file, records["dev"], dev_file, doc_stride=32, init_checkpoint=str(init))
  field = accented_task.params.validation_data
  with pytest.raises(ValueError, match=r"keep_accents: records False, the model's tokenizer_config.json .* True.*"
                                       r"create_finetuning_data"):
    accented_task.check_records(field, "validation_data")
  _task(spm_model_file, records["dev"], dev_file, doc_stride=32).check_records(field, "validation_data")
  accented = create_finetuning_data("squad_v2", str(tmp_path / "out"), spm_model_file, splits=["dev"],
                                    input_file=dev_file, max_seq_length=SEQ, doc_stride=32, keep_accents=True)["dev"]
  assert accented["cache_key"]["keep_accents"] is True and "remove_space" not in accented["cache_key"]
  _task(spm_model_file, accented["record_path"], dev_file, doc_stride=32,
        init_checkpoint=str(init)).check_records(field.replace(input_path=accented["record_path"]), "validation_data")
  with pytest.raises(ValueError, match=r"keep_accents: records True, .* False"):
    _task(spm_model_file, accented["record_path"], dev_file, doc_stride=32).check_records(
        field.replace(input_path=accented["record_path"]), "validation_data")


def test_result_ids_must_be_the_rebuilt_feature_ids():
  features = [type("F", (), {"unique_id": squad.UNIQUE_ID_START + i})() for i in range(4)]
  squad_task.check_result_ids({squad.UNIQUE_ID_START + i: {} for i in range(4)}, features)
  squad_task.check_result_ids({squad.UNIQUE_ID_START + i: {} for i in (1, 0)}, features)  # validation_steps
  with pytest.raises(ValueError, match=r"1 unknown unique ids, e\.g\. \[1000000007\]"):
    squad_task.check_result_ids({squad.UNIQUE_ID_START + i: {} for i in (0, 1, 7)}, features)
  with pytest.raises(ValueError, match=r"1 of the first 2 features without a result"):
    squad_task.check_result_ids({squad.UNIQUE_ID_START + i: {} for i in (0, 2)}, features)


def test_v2_eval_predictions_file_is_at_the_reported_threshold(dev_file, spm_model_file, tmp_path):
  """Reference §5.2 step 4: predictions.json is re-written at the dev-tuned threshold ("" where the null score is at
  or above it), so the official script on the file gives the reported best_f1; nbest / null_odds keep the spans."""
  from tasks import squad_evaluate
  examples, logs = _oracle_logs(dev_file, spm_model_file, 128, impossible_span=True)
  result = _task(spm_model_file, dev_file, dev_file, logging_dir=str(tmp_path)).reduce_aggregated_logs(logs)
  preds = json.load(open(tmp_path / "predictions.json"))
  null_odds = json.load(open(tmp_path / "null_odds.json"))
  nbest = json.load(open(tmp_path / "nbest_predictions.json"))
  # Before: every unanswerable question was answered with its best span (official f1 57.1 vs best_f1 92.9).
  assert all(preds[e.qas_id] == "" for e in examples if e.is_impossible)
  thresh = result["best_f1_thresh"]
  assert all(preds[q] == ("" if null_odds[q] >= thresh else nbest[q][0]["text"]) for q in preds)
  assert any(nbest[e.qas_id][0]["text"] for e in examples if e.is_impossible)
  dataset = json.load(open(dev_file))["data"]
  assert squad_evaluate.evaluate_v2(dataset, preds)["f1"] == pytest.approx(result["best_f1"])


def test_an_evaluation_cut_short_scores_only_the_questions_it_reached(dev_file, spm_model_file, caplog):
  """trainer.validation_steps stops evaluation after some windows: the questions with every window evaluated are
  scored as a smaller dev set. Before, the others got the fallback answer "" — under v2 every unreached unanswerable
  question scored as correct and every unreached answerable one as wrong (total 14 with 14 questions, exact < 100
  on outputs that are right wherever they exist)."""
  examples, logs = _oracle_logs(dev_file, spm_model_file, 128)
  cut = len(logs["unique_ids"]) // 2
  partial = {k: v[:cut] for k, v in logs.items()}
  with caplog.at_level("WARNING"):
    result = _task(spm_model_file, dev_file, dev_file).reduce_aggregated_logs(partial)
  from official_albert.tokenization import FullTokenizer
  features, _ = squad.convert_examples_to_features(examples, FullTokenizer(spm_model_file), SEQ, 128, 64)
  reached = {f.example_index for f in features[:cut]} - {f.example_index for f in features[cut:]}
  assert 0 < len(reached) < len(examples)
  assert result["total"] == len(reached) and result["exact"] == result["f1"] == 100.0
  assert result["NoAns_total"] == sum(examples[i].is_impossible for i in reached)
  assert f"{len(reached)} questions whose windows were all evaluated are scored" in caplog.text
  full = _task(spm_model_file, dev_file, dev_file).reduce_aggregated_logs(logs)
  assert full["total"] == len(examples) and full["exact"] == 100.0
