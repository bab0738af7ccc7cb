"""`model_directory.ModelDirectory`: one directory's answers, resolved once."""

import json

from official_albert import model_directory as md


def test_model_format(tmp_path):
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", "vocab_size": 10}))
  (tmp_path / md.SPM_FILE).write_bytes(b"x")
  directory = md.ModelDirectory(str(tmp_path))
  assert directory.model_format == "hf"
  assert not hasattr(directory, "format")  # the first name shadowed the builtin; every caller moved to model_format
  assert directory.config_file == str(tmp_path / md.CONFIG_FILE)
  assert directory.spm_model == str(tmp_path / md.SPM_FILE)
