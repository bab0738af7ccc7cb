"""`model_directory.ModelDirectory`: one directory's answers, resolved once."""

import json

from official_albert import model_directory as md


def test_model_format_and_its_first_name(tmp_path):
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", "vocab_size": 10}))
  (tmp_path / md.SPM_FILE).write_bytes(b"x")
  directory = md.ModelDirectory(str(tmp_path))
  assert directory.model_format == "hf" and directory.format == "hf"  # `format` shadowed the builtin: kept as alias
  assert directory.config_file == str(tmp_path / md.CONFIG_FILE)
  assert directory.spm_model == str(tmp_path / md.SPM_FILE)
