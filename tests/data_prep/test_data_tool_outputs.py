"""The data tools refuse an output that is one of their inputs, and read a run file's byte-order mark (the data_prep
review): each of these replaced a user's file without a word, or lost a line."""

import pytest

from data_prep import extend_vocabulary
from data_prep import inspect_pretraining_data
from data_prep import mine_hard_negatives
from data_prep import train_sentencepiece
from official_albert.retrieval import run_files
from tests import tiny


def test_extend_vocabulary_refuses_to_replace_its_input_vocabulary_or_a_folder_of_other_files(tmp_path):
  words = tmp_path / "words.txt"
  words.write_text("covid\n", encoding="utf-8")
  spm = tmp_path / "30k.model"
  spm.write_bytes(tiny.SPM_MODEL_FILE.read_bytes())
  with pytest.raises(ValueError, match=r"--output_model_file=.*30k\.model is --spm_model_file: write the extended"):
    extend_vocabulary.extend_vocabulary(str(spm), str(words), str(tmp_path / "." / "30k.model"))
  model_dir, work = tmp_path / "model", tmp_path / "work"
  model_dir.mkdir()
  work.mkdir()
  with pytest.raises(ValueError, match=r"--output_model_dir=.*work holds --new_pieces_file="):
    extend_vocabulary.check_output_model_dir(str(model_dir), str(work), {"--new_pieces_file": str(work / "w.txt")})
  (work / "notes.md").write_text("mine")
  with pytest.raises(ValueError, match=r"--output_model_dir=.*work holds files and no config\.json"):
    extend_vocabulary.check_output_model_dir(str(model_dir), str(work))
  (work / "notes.md").unlink()
  (work / "config.json").write_text("{}")  # an earlier grown model: replaced
  extend_vocabulary.check_output_model_dir(str(model_dir), str(work))


def test_inspect_and_mine_refuse_an_output_that_is_an_input(tmp_path):
  records = tmp_path / "train-00000.tfrecord"
  records.write_bytes(b"")
  with pytest.raises(ValueError, match=r"train-00000\.tfrecord is .*an input of --input_path"):
    inspect_pretraining_data.check_output_apart(str(tmp_path / "train-*"), str(records))
  inspect_pretraining_data.check_output_apart(str(tmp_path / "train-*"), str(tmp_path / "sample.tfrecord"))
  run = tmp_path / "run.trec"
  run.write_text("q1 Q0 d1 1 2.0 bm25\n")
  with pytest.raises(ValueError, match=r"--output_file=.*run\.trec is --run_file's"):
    mine_hard_negatives.check_output_apart(str(run), str(run), str(tmp_path), "train")
  with pytest.raises(ValueError, match=r"corpus\.jsonl is --data_dir's"):
    mine_hard_negatives.check_output_apart(str(tmp_path / "corpus.jsonl"), str(run), str(tmp_path), "train")


def test_a_run_files_byte_order_mark_is_not_part_of_its_first_query_id(tmp_path):
  """Saved with a BOM, the first line went to the query '\\ufeffq1' and its candidate (the top one) was lost."""
  path = tmp_path / "run.trec"
  path.write_bytes("q1 Q0 n1 1 3.0 bm25\nq1 Q0 n2 2 2.0 bm25\n".encode("utf-8-sig"))
  assert run_files.read_run(str(path)) == {"q1": [("n1", 3.0), ("n2", 2.0)]}


def test_train_sentencepiece_refuses_an_input_glob_that_matches_its_own_output(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "corpus.txt").write_text("some text\n", encoding="utf-8")
  (data / "spm.model").write_bytes(b"\xbe an earlier run's model")
  with pytest.raises(ValueError, match=r"--input matches .*spm\.model, this run's own output"):
    train_sentencepiece.train_sentencepiece([str(data / "*")], str(data / "spm"), vocab_size=10)


def test_inspect_refuses_dynamic_masking_flags_on_static_records(tmp_path):
  """--masked_lm_prob / --max_ngram / --short_seq_prob / --seed were read and unused for static records."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  inspect_pretraining_data.define_flags(fv)
  fv(["inspect", f"--input_path={tmp_path / 'x'}", "--max_ngram=1", "--seed=7"])
  with pytest.raises(flags.ValidationError, match="--max_ngram, --seed apply with --dynamic_masking only"):
    inspect_pretraining_data.main([], fv)
