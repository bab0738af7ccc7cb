"""`text_embedding`'s scores must fit the loss: `task.loss=cosine` regresses the cosine on the score, so a score outside
[-1, 1] (STS-B's 0–5 scale) is refused naming file:line and the fix; cosent reads only the order and takes any.

(Before the check, a 0–5 file trained every pair towards a cosine it can never reach, without a word.)
"""

import csv
import functools

import pytest

from tasks.embedding import data as pair_data
from tasks.embedding import TextEmbeddingTask
from tests import tiny

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32}
ROWS = [("a cat sits on the mat", "a cat is on a mat", "0.8"), ("the sun is hot", "it rains today", "-0.5"),
        ("he reads a book", "she reads a novel", "4.8"), ("dogs bark", "a dog barks", "1")]
make_task = functools.partial(tiny.build_task, TextEmbeddingTask, "text_embedding")


def write_scored(path, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(("anchor", "positive", "score"))
    writer.writerows(rows)
  return str(path)


def config(train_file, dev_file, spm_model_file, loss, records_dir):
  data = {"global_batch_size": 2, "seq_length": 16, "seed": 7}
  return tiny.finetune_override(MODEL, train_file, dev_file, spm_model_file, 1, 1e-3, data, loss=loss,
                                score_column="score", skip_bad_rows=True, records_dir=records_dir)


def test_check_scores_refuses_a_score_outside_minus_one_one_for_cosine_only(tmp_path):
  path = write_scored(tmp_path / "sts.csv", ROWS)
  pairs = pair_data.read_pairs(path, {"anchor": "anchor", "positive": "positive"}, score_column="score")
  with pytest.raises(ValueError, match=r"sts.csv:4: column 'score' \(task.score_column\): score 4.8 is outside "
                                       r"\[-1, 1\] \(1 of 4 rows.*s / 2.5 - 1.*task.loss=cosent"):
    pair_data.check_scores(pairs, "score", "cosine")
  assert pair_data.check_scores(pairs, "score", "cosent") == pairs
  inside = pair_data.read_pairs(write_scored(tmp_path / "ok.csv", [r for r in ROWS if r[2] != "4.8"]),
                                {"anchor": "anchor", "positive": "positive"}, score_column="score")
  assert [e.score for e in pair_data.check_scores(inside, "score", "cosine")] == [0.8, -0.5, 1.0]


@pytest.mark.parametrize("split", ["train_data", "validation_data"])
def test_cosine_training_on_0_to_5_scores_is_refused_naming_file_and_line_and_cosent_accepts_them(
    tmp_path, spm_model_file, split):
  """Training and validation files alike; refused even with task.skip_bad_rows (the file's scale, not one bad row),
  and when a cosent run cached the same files' records in a shared task.records_dir first (the cache is rebuilt)."""
  good = write_scored(tmp_path / "good.csv", [r for r in ROWS if r[2] != "4.8"])
  bad = write_scored(tmp_path / "sts.csv", ROWS)
  files = (bad, good) if split == "train_data" else (good, bad)
  records_dir = str(tmp_path / "records")
  task = make_task(config(*files, spm_model_file, "cosent", records_dir), str(tmp_path / "cosent"))
  batch = next(iter(task.build_inputs(getattr(task.params, split))))
  assert batch["score"].shape[0] == 2
  task = make_task(config(*files, spm_model_file, "cosine", records_dir), str(tmp_path / "cosine"))
  with pytest.raises(ValueError, match=r"sts.csv:4: .*score 4.8 is outside \[-1, 1\].*task.loss=cosent"):
    task.build_inputs(getattr(task.params, split))
