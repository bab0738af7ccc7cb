"""`model_directory`: one directory's answers, resolved once; a config.json or labels.json of the wrong JSON types is
refused naming the file and key."""

import json
import re

import pytest

from official_albert import model_directory as md


def test_model_format(tmp_path):
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", "vocab_size": 10}))
  (tmp_path / md.SPM_FILE).write_bytes(b"x")
  directory = md.ModelDirectory(str(tmp_path))
  assert directory.model_format == "hf"
  assert not hasattr(directory, "format")  # the first name shadowed the builtin; every caller moved to model_format
  assert directory.config_file == str(tmp_path / md.CONFIG_FILE)
  assert directory.spm_model == str(tmp_path / md.SPM_FILE)


def test_labels_txt_drops_a_byte_order_mark_and_refuses_a_name_given_twice(tmp_path):
  """labels.txt is the hand-written file: Notepad's UTF-8 starts it with a BOM, which stuck to the first name
  ('\\ufeffbilling', so `classify`'s `r["label"] == "billing"` was false). A name on two lines would make
  `classify`'s probabilities dict lose one of the two outputs."""
  (tmp_path / md.LABELS_TEXT_FILE).write_bytes("billing\r\nbug\r\n\r\npraise\r\n".encode("utf-8-sig"))
  assert md.label_names(str(tmp_path), 3) == ["billing", "bug", "praise"]
  (tmp_path / md.LABELS_TEXT_FILE).write_text("billing\nbug\n\nbilling \n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"labels\.txt:4: label 'billing' is named again \(first on line 1\)"):
    md.label_names(str(tmp_path), 3)


@pytest.mark.parametrize("content", ["null", "5", "[1, 2]"])
def test_a_config_json_that_is_no_object_is_refused_naming_the_file(tmp_path, content):
  """(`"model_type" in data` raised a bare TypeError naming no file.)"""
  (tmp_path / md.CONFIG_FILE).write_text(content)
  with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / md.CONFIG_FILE))}: expected a JSON object"):
    md.detect_format(str(tmp_path))


@pytest.mark.parametrize("id2label", [["neg", "pos"], {"1": "neg", "2": "pos"}, {"0": "neg", "1": None}, "neg,pos"])
def test_an_hf_id2label_not_as_transformers_writes_it_is_refused_naming_the_file(tmp_path, id2label):
  """(A list gave "list indices must be integers", other keys a bare KeyError; transformers refuses a list too.)"""
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", "id2label": id2label}))
  config = re.escape(str(tmp_path / md.CONFIG_FILE))
  with pytest.raises(ValueError, match=f"^{config}: id2label must map \"0\" .. \"1\""):
    md.label_names(str(tmp_path), 2)
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", "id2label": {"1": "pos", "0": "neg"}}))
  assert md.label_names(str(tmp_path), 2) == ["neg", "pos"]
  assert md.label_names(str(tmp_path), 3) == ["LABEL_0", "LABEL_1", "LABEL_2"]  # (another head's: as before)


@pytest.mark.parametrize("value", ["false", 0, None])
def test_labels_json_multi_label_must_be_a_json_boolean(tmp_path, value):
  """(`bool("false")` is True: a single-label model was served as multi-label, sigmoid at the threshold, silently.)"""
  (tmp_path / md.LABELS_FILE).write_text(json.dumps({"labels": ["neg", "pos"], "multi_label": value}))
  labels = re.escape(str(tmp_path / md.LABELS_FILE))
  with pytest.raises(ValueError, match=f"^{labels}: \"multi_label\" must be true or false"):
    md.read_label_file(str(tmp_path))
  (tmp_path / md.LABELS_FILE).write_text(json.dumps({"labels": ["neg", "pos"], "multi_label": True}))
  assert md.read_label_file(str(tmp_path)).multi_label is True
  (tmp_path / md.LABELS_FILE).write_text(json.dumps(["neg", "pos"]))
  assert md.read_label_file(str(tmp_path)).multi_label is False
