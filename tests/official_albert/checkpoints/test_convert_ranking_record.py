"""A converted reranker carries its loss (issue 46): `text_ranking` records it in ranking_training.json, which
`--mode=eval` there reads (`tasks.ranking.task.ranking_record`); without the file beside the converted weights a bce
reranker was evaluated with the listwise loss (1.386 for 0.691 on an untrained model's group of 4), silently.

Every output format carries it (each is also an input format, so the record comes back with the weights); an encoder
taken out of the reranker is no reranker: its conversion leaves the record out and removes a previous model's. A
record that names no loss (a hand edit) is refused by the conversion, naming the input's file, before anything is
written (it was copied, and refused only when a run read the output's copy).
"""

import functools
import json
import shutil

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import model_directory as md
from official_albert import train
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from tasks.ranking import TextRankingTask
from tasks.ranking.task import ranking_record
from tests import tiny

MODEL = dict(tiny.MODEL, preset="", **tiny.NO_DROPOUT)
make_task = functools.partial(tiny.build_task, TextRankingTask, "text_ranking")


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, spm_model_file):
  """A one-output classifier directory with the record a `text_ranking` run with task.loss=bce writes
  (`TextRankingTask.save_assets`)."""
  directory = str(tmp_path_factory.mktemp("reranker") / "trained")
  keras.utils.set_random_seed(3)
  model = build_model("classifier", AlbertConfig(**tiny.MODEL), num_labels=1)
  model({k: np.ones((1, 8), np.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")})
  save_pretrained(model, directory, spm_model_file=spm_model_file)
  make_task({"task": {"model": MODEL, "loss": "bce", "spm_model_file": spm_model_file}}, directory).save_assets()
  return directory


@pytest.mark.parametrize("output_format", ["native", "hf", "tf1", "keras_hub"])
def test_every_output_carries_the_loss_and_a_run_there_reads_it(reranker, tmp_path, output_format):
  out = str(tmp_path / output_format)
  summary = convert_lib.convert("native", reranker, output_format, out, model_type="classifier")
  assert md.RANKING_TRAINING_FILE in summary["files"]
  assert ranking_record(out) == {"loss": ("bce", md.path(out, md.RANKING_TRAINING_FILE))}
  assert make_task({"task": {"model": MODEL}}, out).params.loss == "bce"  # (as --mode=eval there builds it)
  back = str(tmp_path / "back")  # (read back into a model directory)
  convert_lib.convert(output_format, out, "native", back, model_type="classifier")
  assert json.loads((tmp_path / "back" / md.RANKING_TRAINING_FILE).read_text()) == json.loads(
      (tmp_path / output_format / md.RANKING_TRAINING_FILE).read_text())


def test_an_encoder_taken_out_leaves_the_record_and_removes_a_previous_one(reranker, tmp_path):
  out = str(tmp_path / "out")
  convert_lib.convert("native", reranker, "native", out, model_type="classifier")
  summary = convert_lib.convert("native", reranker, "native", out, model_type="encoder")
  assert md.RANKING_TRAINING_FILE not in summary["files"] and md.RANKING_TRAINING_FILE in summary["removed"]
  assert ranking_record(out) == {}


def _converted_and_eval_config(reranker, tmp_path, spm_model_file):
  """(the reranker converted to a native OUT, a --mode=eval override of 8 groups of 4 that a run in OUT reads)."""
  out = str(tmp_path / "out")
  convert_lib.convert("native", reranker, "native", out, model_type="classifier")
  groups = tmp_path / "groups.jsonl"
  groups.write_text("".join(json.dumps({"query": f"query {i} words", "positive": f"the answer {i}",
                                        "negatives": ["a b", "c d", "e f"]}) + "\n" for i in range(8)))
  dev = {"input_path": str(groups), "global_batch_size": 4, "seq_length": 32, "is_training": False,
         "drop_remainder": False}
  return out, json.dumps({"task": {"validation_data": dev, "spm_model_file": spm_model_file},
                          "runtime": {"distribution_strategy": "one_device"}})


def test_eval_of_the_converted_reranker_reports_the_bce_loss(reranker, tmp_path, spm_model_file):
  """`--mode=eval --checkpoint=OUT/model.ckpt` on the native output: the untrained model's near-zero logits give bce
  log 2 per group (0.693); the listwise loss it reported without the record is log 4 (1.386) for groups of 4."""
  out, config = _converted_and_eval_config(reranker, tmp_path, spm_model_file)
  results = train.run("text_ranking", "eval", out, params_override=config, checkpoint=md.path(out, "model.ckpt"))
  assert results["eval_loss"] == pytest.approx(np.log(2), abs=0.01), results


def test_eval_of_a_conversion_output_without_checkpoint_reads_its_model_ckpt(reranker, tmp_path, spm_model_file):
  """`--mode=eval --model_dir=OUT` with no `--checkpoint`: OUT holds a conversion's lone model.ckpt (no ckpt-N, no
  state file), which predict and serving already read; eval said "no checkpoint". Evaluated as a given checkpoint:
  the same numbers as `--checkpoint=OUT/model.ckpt`, global_step 0 (a conversion holds no step), no model.ckpt-best."""
  out, config = _converted_and_eval_config(reranker, tmp_path, spm_model_file)
  found = train.run("text_ranking", "eval", out, params_override=config)
  given = train.run("text_ranking", "eval", out, params_override=config, checkpoint=md.path(out, "model.ckpt"))
  assert found == given and found["global_step"] == 0, (found, given)
  written = json.loads((tmp_path / "out" / "eval_results.json").read_text())
  assert written["checkpoint"] == md.path(out, "model.ckpt")
  assert not list((tmp_path / "out").glob("model.ckpt-best*"))
  empty = str(tmp_path / "empty")
  with pytest.raises(FileNotFoundError, match="no model.ckpt of a conversion"):
    train.run("text_ranking", "eval", empty, params_override=config)


@pytest.mark.parametrize("content", ['{"loss": "softmax"}', '{"objective": "bce"}', '["bce"]', '{"loss": "bce"'])
def test_a_record_that_names_no_loss_is_refused_before_anything_is_written(reranker, tmp_path, content):
  source = tmp_path / "edited"
  shutil.copytree(reranker, source)
  record_file = source / md.RANKING_TRAINING_FILE
  record_file.write_text(content)
  out = tmp_path / "out"
  with pytest.raises(ValueError, match="correct it or delete it, then convert again") as raised:
    convert_lib.convert("native", str(source), "native", str(out), model_type="classifier")
  assert str(record_file) in str(raised.value) and "listwise" in str(raised.value)
  assert not out.exists() or not list(out.iterdir())
  # Taken out as an encoder, the reranker's record is not read (nor written).
  convert_lib.convert("native", str(source), "native", str(out), model_type="encoder")
  assert not (out / md.RANKING_TRAINING_FILE).exists()
