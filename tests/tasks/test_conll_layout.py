"""CoNLL columns: tab- or space-separated per file (`tasks.text.conll.file_layout`), `task.conll_separator`, and the
prediction files read back by the same reader."""

import json
import logging
import os

import pytest

from official_albert import model_directory as md
from official_albert import train
from official_albert.training.experiment_config import ConfigError
from tasks import text
from tasks.text import conll
from tasks.text import data as text_data
from tasks.text import predictions
from tests.tasks.test_text_classification import TINY_MODEL

TAGS = text_data.ReadOptions(label_kind="tags")
# One sentence of two-word names, tab-separated: every line holds one space, so its column counts are a tie.
TIE = "Hà Nội\tB-LOC\nSài Gòn\tB-LOC\n\n"


def _read(path, **options):
  return text_data.read_token_examples(str(path), text_data.ReadOptions(label_kind="tags", **options))


def test_a_forced_tab_separator_keeps_a_tokens_spaces_where_auto_reads_a_tie_at_spaces(tmp_path, caplog):
  path = tmp_path / "vi.conll"
  path.write_text(TIE, encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    (auto,) = _read(path)
  assert auto.tokens == ["Hà", "Sài"] and auto.label == ["B-LOC", "B-LOC"]  # (today's rule, now with a warning)
  assert f"{path}: every token line holds a tab" in caplog.text and "task.conll_separator=tab" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    (tab,) = _read(path, conll_separator="tab")
  assert tab.tokens == ["Hà Nội", "Sài Gòn"] and tab.label == ["B-LOC", "B-LOC"]
  assert not caplog.text  # (the setting decided: nothing to warn about)


def test_a_forced_space_separator_splits_a_tab_file_at_spaces(tmp_path, caplog):
  path = tmp_path / "vi.conll"
  path.write_text("Tôi\tP\tO\nở\tE\tO\nHà Nội\tNp\tB-LOC\n\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    (auto,) = _read(path)
  assert auto.tokens == ["Tôi", "ở", "Hà Nội"] and not caplog.text  # (evidence, not a tie: no warning)
  (space,) = _read(path, conll_separator="space", conll_tag_column=1)
  assert space.tokens == ["Tôi", "ở", "Hà"] and space.label == ["P", "E", "Nội"]


def test_no_tie_warning_where_the_splits_agree_or_the_tabs_decide(tmp_path, caplog):
  plain = tmp_path / "plain.conll"  # (no space in any tab column: both splits give the same columns)
  plain.write_text("John\tB-PER\nran\tO\n\n", encoding="utf-8")
  spaces = tmp_path / "spaces.conll"
  spaces.write_text("John NNP B-PER\nran VBD O\n\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    assert _read(plain)[0].tokens == _read(spaces)[0].tokens == ["John", "ran"]
  assert not caplog.text


def test_a_bad_separator_is_an_error_naming_the_setting(tmp_path, spm_model_file):
  path = tmp_path / "a.conll"
  path.write_text(TIE, encoding="utf-8")
  with pytest.raises(ValueError, match=r"task\.conll_separator='tabs' is not one of auto, tab, space"):
    _read(path, conll_separator="tabs")
  with pytest.raises(ConfigError, match=r"task\.conll_separator='tabs' is not one of auto, tab, space"):
    train.build_params("token_classification", params_override=json.dumps({"task": {
        "labels": ["B-LOC", "O"], "spm_model_file": spm_model_file, "conll_separator": "tabs"}}))


def test_the_task_reads_with_its_separator_and_caches_records_per_setting(tmp_path, spm_model_file):
  path = tmp_path / "vi.conll"
  path.write_text(TIE, encoding="utf-8")
  metas = []
  for separator in ("tab", "auto"):
    params = train.build_params("token_classification", params_override=json.dumps({"task": {
        "model": TINY_MODEL, "labels": ["B-LOC", "O"], "spm_model_file": spm_model_file,
        "records_dir": str(tmp_path / "records"), "conll_separator": separator}}))
    task = text.TokenClassificationTask(params.task)
    options = task.read_options(True, task.labels)
    assert options.conll_separator == separator
    tokens = [e.tokens for e in text_data.read_examples([str(path)], options)]
    assert tokens == ([["Hà Nội", "Sài Gòn"]] if separator == "tab" else [["Hà", "Sài"]])
    record = task.record_path(params.task.validation_data.replace(input_path=str(path)))
    with open(record[:-len(".tf_record")] + ".meta.json", encoding="utf-8") as f:
      metas.append(json.load(f))
  # The records of one setting are not reused for the other (the cache key holds it).
  assert [m["cache_key"]["options"]["conll_separator"] for m in metas] == ["tab", "auto"]
  assert metas[0]["record_path"] != metas[1]["record_path"]


def test_a_one_column_line_does_not_turn_tab_splitting_off(tmp_path):
  """a123ae7: one line with a single column (no separator at all) in a tab file cut 'Hà Nội' to 'Hà' (that line
  lacks a tab, so "every line holds a tab" failed)."""
  path = tmp_path / "vi.conll"
  path.write_text("Tôi\tP\tO\nở\tE\tO\nHà Nội\tNp\tB-LOC\n\nVâng\n\n", encoding="utf-8")
  first, second = _read(path, with_labels=False)
  assert first.tokens == ["Tôi", "ở", "Hà Nội"] and second.tokens == ["Vâng"]


def test_the_layout_is_decided_from_the_first_lines_and_the_file_is_read_once(tmp_path, monkeypatch, caplog):
  """The layout pass read the whole file a second time, splitting every line twice."""
  path = tmp_path / "vi.conll"
  path.write_text("Tôi\tO\nHà Nội\tB-LOC\n\nsays VBZ O\n\n", encoding="utf-8")
  opened = []
  real = conll.text_lines
  monkeypatch.setattr(conll, "text_lines", lambda p: opened.append(p) or real(p))
  monkeypatch.setattr(conll, "LAYOUT_SAMPLE_LINES", 2)
  with caplog.at_level(logging.WARNING):
    first, second = _read(path, with_labels=False)
  assert opened == [str(path)]
  # Decided from its first two lines: tabs (the whole file, with a line of spaces and no tab, would read at spaces);
  # the later line without a tab is one column, named in a warning.
  assert first.tokens == ["Tôi", "Hà Nội"] and second.tokens == ["says VBZ O"]
  assert f"{path}:4: no tab, but spaces, in a file read as tab-separated" in caplog.text


# --------------------------------------------------------------------------------------------------- predictions
def test_a_conll_prediction_file_keeps_a_tokens_spaces_and_reads_back_whole(tmp_path, caplog):
  """Before: a token's spaces were written as '_' ("Hà_Nội"), though the reader keeps them in a tab file."""
  source = str(tmp_path / "vi.conll")
  examples = [text_data.TextExample(source, 1, "1", tokens=["Tôi", "ở", "Hà Nội"]),
              text_data.TextExample(source, 5, "5", tokens=["Hà Nội", "\u00a0x", "a\tb", " "])]
  rows = [{"tokens": e.tokens, "tags": t} for e, t in zip(examples, (["O", "O", "B-LOC"], ["B-LOC", "O", "O", None]))]
  with caplog.at_level(logging.WARNING):
    written = predictions.write_rows(examples, rows, str(tmp_path / "out"), "", "")[source]
  with open(written, encoding="utf-8") as f:
    assert f.read() == "Tôi\tO\nở\tO\nHà Nội\tB-LOC\n\nHà Nội\tB-LOC\n\u00a0x\tO\na_b\tO\n_\t_\n\n"
  assert "2 token(s) held a tab or a line break, or were empty or had spaces at an end" in caplog.text
  first, second = text_data.read_token_examples(written, TAGS)
  assert first.tokens == ["Tôi", "ở", "Hà Nội"] and first.label == ["O", "O", "B-LOC"]
  assert second.tokens == ["Hà Nội", "\u00a0x", "a_b", "_"]
  # A file whose every token holds one space is a tie for the reader: the writer names the setting that reads it.
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    tie = predictions.write_rows(examples[:1], [{"tokens": ["Hà Nội"], "tags": ["B-LOC"]}], str(tmp_path / "tie"),
                                 "", "")[source]
  assert f"{tie}: every token holds 1 space(s)" in caplog.text and "task.conll_separator=tab" in caplog.text
  (back,) = _read(tie, conll_separator="tab")
  assert back.tokens == ["Hà Nội"] and back.label == ["B-LOC"]


def test_a_later_run_reads_with_the_separator_training_saved(tmp_path, spm_model_file):
  """`task.conll_separator` is one of the reading settings labels.json keeps: a predict run on the model directory
  that leaves it unset splits its CoNLL file as training did ("Hà Nội" stays one word)."""
  model_dir = str(tmp_path / "model")
  os.makedirs(model_dir)
  md.write_label_file(model_dir, md.LabelFile(["B-LOC", "O"], columns={"conll_separator": "tab"},
                                              task="token_classification"))
  params = train.build_params("token_classification", params_override=json.dumps({"task": {
      "model": TINY_MODEL, "spm_model_file": spm_model_file}}))
  task = text.TokenClassificationTask(params.task, logging_dir=model_dir)
  assert task.read_options(False).conll_separator == "tab"
  params = params.override({"task": {"conll_separator": "space"}})  # (set, the run's own wins)
  assert text.TokenClassificationTask(params.task, logging_dir=model_dir).read_options(False).conll_separator == "space"


def test_a_space_file_padded_to_align_its_columns_keeps_its_columns(tmp_path):
  """Columns, not separator characters, decide the layout: a space-separated file padded to align its columns, with
  one tab before its last (a tab before the tag), holds other numbers of spaces per line but four columns each; read
  at tabs its token was "EU   NNP  B-NP"."""
  path = tmp_path / "padded.conll"
  path.write_text("EU   NNP  B-NP\tB-ORG\nrejects  VBZ B-VP\tO\n\nGerman JJ   B-NP\tB-MISC\n", encoding="utf-8")
  assert [e.tokens for e in _read(path)] == [["EU", "rejects"], ["German"]]
  assert [e.label for e in _read(path)] == [["B-ORG", "O"], ["B-MISC"]]


def test_a_token_with_a_space_past_the_sample_turns_an_all_tab_file_to_tabs(tmp_path, caplog, monkeypatch):
  """A tab file whose sampled lines hold no space inside a token splits alike both ways; a later "Hà Nội" line was
  cut to "Hà" (the whole-file rule, before the sample, read it at tabs). It turns the rest of the file to tabs."""
  monkeypatch.setattr(conll, "LAYOUT_SAMPLE_LINES", 4)
  path = tmp_path / "vi.conll"
  path.write_text("Tôi\tP\tO\nđi\tV\tO\n\n" * 2 + "Hà Nội\tNp\tB-LOC\nđẹp\tA\tO\n\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    examples = _read(path)
  assert examples[-1].tokens == ["Hà Nội", "đẹp"] and examples[-1].label == ["B-LOC", "O"]
  assert f"{path}:7: a token with a space inside" in caplog.text
  # A space file (a line without a tab) stays at spaces whatever follows.
  spaced = tmp_path / "mixed.conll"
  spaced.write_text("Tôi\tP\tO\nđi V O\n\nx\ty\tO\n\nHà Nội\tNp\tB-LOC\n\n", encoding="utf-8")
  assert _read(spaced)[-1].tokens == ["Hà"]
