"""The albert-fill-mask binary's casing: by default as the model directory records it (as `pipelines.fill_mask`),
so a cased model is not fed lower-cased text; `--do_lower_case` is refused with `--saved_model_dir`."""

import json

from absl import flags
import pytest

from official_albert import fill_mask
from official_albert.serving import pipelines

TEXT = "The Invoice Is Wrong and it CRASHES on [MASK]"


def _flags(*args):
  fv = flags.FlagValues()
  fill_mask.define_flags(fv)
  fv(["fill_mask", *args])
  return fv


def test_the_binary_reads_a_cased_model_directory_cased_by_default(tiny_model_dirs, tmp_path, capsys):
  cased = tiny_model_dirs.copy("pretrainer", tmp_path / "cased")
  (tmp_path / "cased" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  fv = _flags(f"--model_dir={cased}", f"--text={TEXT}", "--top_k=2")
  assert fv.do_lower_case is None  # the directory's record decides
  fill_mask.main([], fv)
  served = [json.loads(line) for line in capsys.readouterr().out.splitlines()[1:]]
  assert served == pipelines.fill_mask(cased, TEXT, top_k=2)
  lowered = pipelines.fill_mask(cased, TEXT, top_k=2, do_lower_case=True)
  assert [p["sequence"] for p in served] != [p["sequence"] for p in lowered]  # (what the old default True gave)


def test_do_lower_case_is_refused_with_a_saved_model(tmp_path):
  fv = _flags(f"--saved_model_dir={tmp_path / 'sm'}", f"--text={TEXT}", "--nodo_lower_case")
  with pytest.raises(ValueError, match=r"--do_lower_case=False does not apply with --saved_model_dir=.*Drop "
                                       r"--do_lower_case\."):
    fill_mask.main([], fv)
