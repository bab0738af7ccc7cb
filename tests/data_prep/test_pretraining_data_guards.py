"""What the pretraining-data tools refuse or warn about (audit of the data recipe):

- a corpus from which no example can be made (every document a single token) is refused by `tokenize_corpus` as by
  `create_pretraining_data`, and the dynamic pipeline refuses such shards instead of looping forever for a batch;
- <unk> ids are counted (`unk_tokens`) and warned about: an uncased vocabulary with `--do_lower_case=false` turns
  every capital letter into <unk>, silently before;
- `tokenize_corpus` counts and warns about special-token text (`lines_with_special_token_text`) as the static tool.

None of these tests iterates a dataset: the refusals happen when the dataset is built, so a regression fails at once
("DID NOT RAISE") instead of hanging.
"""

import glob
import json
import logging
import os

from absl import flags
import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import pretraining_shards as shards
from data_prep import tokenize_corpus as tc
from official_albert.tokenization import spm_model
from tasks import pretraining_dynamic as pd
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus


def _tokenize(tmp_path, spm_model_file, input_file, name="tok", **kwargs):
  return tc.tokenize_corpus(tc.TokenizeConfig(input_file=input_file, spm_model_file=spm_model_file,
                                              output_dir=str(tmp_path / name), progress=False, **kwargs))


def _static(tmp_path, spm_model_file, input_file, name="static", **kwargs):
  return cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=input_file, output_file=str(tmp_path / name), spm_model_file=spm_model_file, dupe_factor=1,
      progress=False, options=pi.InstanceOptions(max_seq_length=32, max_predictions_per_seq=5), **kwargs))


def test_a_corpus_of_single_token_documents_is_refused_as_by_the_static_tool(tmp_path, spm_model_file):
  """50 documents "the": the static tool makes no instance and says so; tokenize_corpus wrote shards from which the
  dynamic pipeline looped forever for a batch. Now it refuses, naming the file and the counts, and keeps no shard."""
  path = write_corpus(tmp_path / "single.txt", [["the"]] * 50)
  with pytest.raises(shards.InputError, match="no instance could be made"):
    _static(tmp_path, spm_model_file, path)
  with pytest.raises(shards.InputError, match=r"no pretraining example can be made from --input_file \(.*single.txt\)"
                     r".*50 documents with tokens is a single token \(50 tokens\).*2 tokens or more"):
    _tokenize(tmp_path, spm_model_file, path)
  assert not glob.glob(str(tmp_path / "tok" / "tokens-*"))
  # One document of two tokens is enough (the boundary).
  enough = write_corpus(tmp_path / "enough.txt", [["the"]] * 49 + [["the the"]])
  assert _tokenize(tmp_path, spm_model_file, enough, name="enough")["tokens"] == 51


def test_the_dynamic_pipeline_refuses_shards_without_a_two_token_document(tmp_path, spm_model_file):
  """A shard set from which no example can be made (an older tokenize_corpus, or a glob picking such shards only) is
  refused when the dataset is built: the endless epochs would otherwise loop without ever yielding a batch."""
  path = write_corpus(tmp_path / "c.txt", [["the"]] * 50 + [["the module returns.", "a value."]])
  _tokenize(tmp_path, spm_model_file, path, documents_per_shard=50)
  single = str(tmp_path / "tok" / "tokens-000000")
  with pytest.raises(ValueError, match=r"tokens-000000: 50 documents of 50 tokens, none of 2 tokens or more"):
    pd.dynamic_pretraining_dataset(single, 32, 5, 2, is_training=True)
  pd.dynamic_pretraining_dataset(str(tmp_path / "tok" / "tokens-*"), 32, 5, 2, is_training=True)  # builds


def test_an_uncased_vocabulary_with_cased_text_counts_unk_and_warns(tmp_path, spm_model_file, caplog):
  """The test model has no upper-case piece (as ALBERT's released ones): with --do_lower_case=false every capital
  letter became <unk>, with no count and no warning. Both tools now count `unk_tokens` and warn, naming the fix."""
  path = write_corpus(tmp_path / "c.txt", corpus_docs(20))  # capitalised sentences
  caplog.set_level(logging.WARNING)
  stats = _tokenize(tmp_path, spm_model_file, path, do_lower_case=False)
  assert stats["unk_tokens"] > 0
  warnings = [r.getMessage() for r in caplog.records if "<unk>" in r.getMessage()]
  assert len(warnings) == 1 and "no piece with an upper-case letter" in warnings[0], caplog.text
  assert "--do_lower_case=true" in warnings[0] and f"{stats['unk_tokens']} of {stats['tokens']} tokens" in warnings[0]
  manifest = json.load(open(str(tmp_path / "tok" / "tokens-000000.manifest.json")))
  assert manifest["counts"]["unk_tokens"] == stats["unk_tokens"]
  caplog.clear()
  summary = _static(tmp_path, spm_model_file, path, do_lower_case=False)
  assert summary["unk_tokens"] == stats["unk_tokens"] and summary["text_tokens"] == stats["tokens"]
  warnings = [r.getMessage() for r in caplog.records if "<unk>" in r.getMessage()]
  assert len(warnings) == 1 and "--do_lower_case=true" in warnings[0], caplog.text
  caplog.clear()
  assert _tokenize(tmp_path, spm_model_file, path, name="lower")["unk_tokens"] == 0  # the default lower-cases
  assert _static(tmp_path, spm_model_file, path, name="static_lower")["unk_tokens"] == 0
  assert "<unk>" not in caplog.text


def test_unknown_pieces_warn_above_the_threshold_or_on_casing(spm_model_file, caplog):
  log = logging.getLogger("test_unk")
  caplog.set_level(logging.WARNING)
  assert not spm_model.warn_if_unknown_pieces(0, 1000, False, log, spm_model_file)
  assert not spm_model.warn_if_unknown_pieces(5, 1000, True, log, spm_model_file)  # rare characters: fine
  assert spm_model.warn_if_unknown_pieces(50, 1000, True, log, spm_model_file)
  assert "lacks characters of this text" in caplog.text
  caplog.clear()
  # Cased text, uncased model: any <unk> warns (capitals are <unk>), naming the model.
  assert spm_model.warn_if_unknown_pieces(1, 1000, False, log, spm_model_file)
  assert spm_model_file in caplog.text and "--do_lower_case=true" in caplog.text


def test_tokenize_corpus_counts_and_warns_about_special_token_text(tmp_path, spm_model_file, caplog, capsys):
  """In the default hf mode "[MASK]" written in the text becomes the [MASK] id: create_pretraining_data warns and
  counts it; tokenize_corpus did neither (and its summary had no such key)."""
  docs = corpus_docs(10)
  docs[2][0] = "the [MASK] module returns a value."
  docs[5][0] = "a [SEP] b and <pad> c."
  path = write_corpus(tmp_path / "c.txt", docs)
  caplog.set_level(logging.WARNING)
  stats = _tokenize(tmp_path, spm_model_file, path)
  assert stats["lines_with_special_token_text"] == 2
  warnings = [r.getMessage() for r in caplog.records if "spell a special token" in r.getMessage()]
  assert len(warnings) == 1 and warnings[0].startswith("2 input lines") and "tokenizer_mode=hf" in warnings[0]
  assert _static(tmp_path, spm_model_file, path)["lines_with_special_token_text"] == 2  # the same count
  caplog.clear()
  assert _tokenize(tmp_path, spm_model_file, path, name="ref", tokenizer_mode="reference")[
      "lines_with_special_token_text"] == 0
  assert "spell a special token" not in caplog.text
  # The printed summary shows both counts.
  fv = flags.FlagValues()
  tc.define_flags(fv)
  fv(["tokenize_corpus", f"--input_file={path}", f"--spm_model_file={spm_model_file}",
      f"--output_dir={tmp_path / 'printed'}", "--noprogress"])
  capsys.readouterr()
  tc.main([], fv)
  printed = json.loads(capsys.readouterr().out)
  assert printed["lines_with_special_token_text"] == 2 and printed["unk_tokens"] == 0
  assert os.path.exists(tmp_path / "printed" / tc.STATS_NAME)


def test_outputs_never_replace_or_remove_the_corpus(tmp_path, spm_model_file, caplog):
  """Review s50: an --output_file that was also an input renamed its shard over the corpus (reported success); the
  clean-up of another shard count deleted inputs named like shards (Beam's text shards: `train-00000-of-00002`); a
  folder as --output_file failed at the last rename, after the whole run; a glob over the output folder read a
  shard as text; a pattern read hidden files (macOS's `._a.txt`)."""
  docs = corpus_docs(6)
  corpus = write_corpus(tmp_path / "corpus.txt", docs)
  before = open(corpus, "rb").read()
  with pytest.raises(shards.InputError, match=r"--output_file: '.*corpus.txt' is also an input file"):
    _static(tmp_path, spm_model_file, corpus, name="corpus.txt")
  assert open(corpus, "rb").read() == before
  (tmp_path / "existing").mkdir()
  for output in (f"{tmp_path}/out/", str(tmp_path / "existing")):
    with pytest.raises(ValueError, match=r"--output_file '.*' is a folder; give a file path or a shard prefix"):
      cpd.create_pretraining_data(cpd.GenerationConfig(input_file=corpus, output_file=output,
                                                       spm_model_file=spm_model_file, progress=False))
  beam_like = tmp_path / "beam"
  beam_like.mkdir()
  for i in range(2):
    write_corpus(beam_like / f"train-{i:05d}-of-00002", docs[i::2])
  inputs = [str(beam_like / f"train-{i:05d}-of-00002") for i in range(2)]
  stats = _static(beam_like, spm_model_file, str(beam_like / "train-*-of-00002"), name="train", num_output_shards=3)
  assert stats["records"] > 0 and all(os.path.exists(p) for p in inputs), os.listdir(beam_like)
  # A shard of an earlier 2-shard run (its manifest beside it) is still removed.
  _static(tmp_path, spm_model_file, corpus, name="run", num_output_shards=2)
  _static(tmp_path, spm_model_file, corpus, name="run", num_output_shards=3)
  assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "run-*-of-*")) if not p.endswith(".json")) == [
      f"run-{i:05d}-of-00003" for i in range(3)]
  with pytest.raises(shards.InputError, match=r"--input_file matched '.*run-00000-of-00003', a file a "
                                              r"pretraining-data run wrote"):
    _static(tmp_path, spm_model_file, f"{corpus},{tmp_path / 'run-*'}", name="again")
  (tmp_path / "docs").mkdir()
  write_corpus(tmp_path / "docs" / "a.txt", docs)
  (tmp_path / "docs" / "._a.txt").write_bytes(b"\x00\x05\x16\x07Mac OS X resource fork")
  caplog.set_level(logging.INFO, logger=cpd.logger.name)
  assert _static(tmp_path, spm_model_file, str(tmp_path / "docs" / "*.txt"), name="visible")["records"] > 0
  assert "1 hidden file(s) left out" in caplog.text
  with pytest.raises(shards.InputError, match=r"\._a\.txt holds a NUL byte"):  # (named, it is read: and refused)
    _static(tmp_path, spm_model_file, str(tmp_path / "docs" / "._a.txt"), name="hidden")
