"""`model_directory.ModelDirectory`: one directory's answers, resolved once."""

import json

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
