"""One tokenizer mode default across the whole recipe: vocabulary → pretraining data → fine-tuning data → serving.

The vocabulary must be learnt on the strings the data tools will feed to SentencePiece: with the SentencePiece
trainer on "hf" (`` and '' become ") and the pretraining-data tool on "reference" (kept), the vocabulary was trained
on text the data tool never produces. Every default below must be the `FullTokenizer` default ("hf"); this test fails
as soon as one of them drifts. The other modes stay reachable through each tool's flag.
"""

import dataclasses
import importlib.util
import inspect

from absl import flags
import pytest

from data_prep import create_finetuning_data as cfd
from data_prep import create_pretraining_data as cpd
from data_prep import train_sentencepiece as tsp
from official_albert import export_saved_model
from official_albert.serving import export_spec
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import in_graph
from tasks.squad import task as squad_task

RECIPE_DEFAULT = "hf"


def _arg_default(fn, name):
  return inspect.signature(fn).parameters[name].default


def _flag_default(define_flags, name):
  fv = flags.FlagValues()
  define_flags(fv)
  return fv[name].default


def _field_default(config_cls, name):
  return {f.name: f.default for f in dataclasses.fields(config_cls)}[name]


def recipe_defaults():
  """Every place of the recipe that picks a tokenizer mode when the user does not."""
  defaults = {
      "FullTokenizer(mode)": _arg_default(FullTokenizer.__init__, "mode"),
      "AlbertTextTokenizer(mode)": _arg_default(in_graph.AlbertTextTokenizer.__init__, "mode"),
      "AlbertPreprocessor(mode)": _arg_default(in_graph.AlbertPreprocessor.__init__, "mode"),
      "train_sentencepiece(mode)": _arg_default(tsp.train_sentencepiece, "mode"),
      "train_sentencepiece.preprocess_corpus(mode)": _arg_default(tsp.preprocess_corpus, "mode"),
      "train_sentencepiece --mode": _flag_default(tsp.define_flags, "mode"),
      "GenerationConfig.tokenizer_mode": _field_default(cpd.GenerationConfig, "tokenizer_mode"),
      "create_pretraining_data --tokenizer_mode": _flag_default(cpd.define_flags, "tokenizer_mode"),
      "create_finetuning_data(tokenizer_mode)": _arg_default(cfd.create_finetuning_data, "tokenizer_mode"),
      "create_finetuning_data --tokenizer_mode": _flag_default(cfd.define_flags, "tokenizer_mode"),
      "SquadTaskConfig.tokenizer_mode": _field_default(squad_task.SquadTaskConfig, "tokenizer_mode"),
      # (AlbertServingModule takes its tokenizer settings from an ExportSpec.)
      "ExportSpec.tokenizer_mode": _field_default(export_spec.ExportSpec, "tokenizer_mode"),
      "export_saved_model --tokenizer_mode": _flag_default(export_saved_model.define_flags, "tokenizer_mode"),
  }
  if importlib.util.find_spec("data_prep.tokenize_corpus") is not None:  # the on-the-fly pretraining data tool
    from data_prep import tokenize_corpus
    defaults["tokenize_corpus --tokenizer_mode"] = _flag_default(tokenize_corpus.define_flags, "tokenizer_mode")
  return defaults


def test_every_tool_of_the_recipe_defaults_to_one_tokenizer_mode():
  defaults = recipe_defaults()
  drifted = {k: v for k, v in defaults.items() if v != RECIPE_DEFAULT}
  assert not drifted, f"tokenizer mode defaults that differ from {RECIPE_DEFAULT!r}: {drifted}"


@pytest.mark.parametrize("define_flags, name", [(tsp.define_flags, "mode"), (cpd.define_flags, "tokenizer_mode"),
                                                (cfd.define_flags, "tokenizer_mode")])
def test_every_mode_stays_reachable_by_flag(define_flags, name):
  fv = flags.FlagValues()
  define_flags(fv)
  for mode in ("hf", "reference", "upstream_py3"):
    fv[name].parse(mode)
    assert fv[name].value == mode


def test_vocabulary_training_and_pretraining_data_see_the_same_strings(spm_model_file):
  """With the defaults, the text train_sentencepiece learns from is the text the data tools hand to SentencePiece."""
  text = "He said ``Hello'' to the CAFÉ  team."
  sentencepiece_input = tsp._Normaliser(do_lower_case=True, mode=_arg_default(tsp.train_sentencepiece, "mode"))(text)
  data_tool = FullTokenizer(spm_model_file, do_lower_case=True,
                            mode=_field_default(cpd.GenerationConfig, "tokenizer_mode"))
  assert data_tool.preprocess(text) == sentencepiece_input == 'he said "hello" to the cafe team.'
