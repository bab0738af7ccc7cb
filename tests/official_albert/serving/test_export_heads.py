"""Which head an export reads (serving/export_heads.py): the directory's own when `--head` is left out, and never a
classifier-style head its run's records name another kind of (the variables would load without an error).

Before: `--head` defaulted to pretrainer, and `--head=classifier` on a token_classification run exported a sequence
classifier built from the tagger's [H, K] layer, silently.
"""


from absl import app
from absl import flags
import pytest
import tensorflow as tf

from official_albert import export_saved_model
from official_albert import model_directory as md
from official_albert.serving import export_heads
from official_albert.serving.served_heads import saved_model_head
from tests import tiny


def _recorded(tiny_model_dirs, name, destination, task=None, experiment=None):
  """A private copy of a tiny head's directory with its run's records: labels.json's task, params.yaml's line."""
  folder = tiny_model_dirs.copy(name, destination)
  if task:
    md.write_label_file(folder, md.LabelFile(list(tiny.LABELS), task=task))
  if experiment:
    with open(md.path(folder, md.PARAMS_FILE), "w", encoding="utf-8") as f:
      f.write(f"# experiment: {experiment}\ntask: {{}}\n")
  return folder


@pytest.fixture(scope="module")
def folders(tiny_model_dirs, tmp_path_factory):
  root = tmp_path_factory.mktemp("export_heads")
  return {"tagger": _recorded(tiny_model_dirs, "token_classifier", root / "tagger", task="token_classification"),
          "classifier": _recorded(tiny_model_dirs, "classifier", root / "classifier", task="text_classification"),
          "quiz": _recorded(tiny_model_dirs, "multiple_choice", root / "quiz", experiment="text_multiple_choice"),
          "bare": tiny_model_dirs["classifier"], "pretrainer": tiny_model_dirs["pretrainer"],
          "span": tiny_model_dirs["span"]}


def test_the_head_is_read_from_the_directory(folders):
  assert {name: export_heads.export_head(folders[name]) for name in ("tagger", "classifier", "quiz", "pretrainer",
                                                                     "span")} == {
      "tagger": "token_classifier", "classifier": "classifier", "quiz": "multiple_choice", "pretrainer": "pretrainer",
      "span": "span"}
  with pytest.raises(ValueError, match="no record of the task that trained it.*--head=classifier, token_classifier "
                                       "or multiple_choice"):
    export_heads.export_head(folders["bare"])


def test_a_head_the_records_contradict_is_refused(folders):
  for name, head, recorded in (("tagger", "classifier", "token_classifier"), ("classifier", "token_classifier",
                                                                               "classifier"),
                               ("quiz", "classifier", "multiple_choice")):
    with pytest.raises(ValueError, match=rf"--head={head}: .* was trained as a {recorded} .*pass --head={recorded}"):
      export_heads.check_recorded_head(folders[name], head)
  export_heads.check_recorded_head(folders["tagger"], "token_classifier")
  export_heads.check_recorded_head(folders["bare"], "token_classifier")  # (no records: the user's word)
  export_heads.check_recorded_head(folders["tagger"], "encoder")  # (any directory's encoder)


def _main(*argv):
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["export_saved_model", *argv])
  return export_saved_model.main([], fv)


def test_the_binary_exports_the_recorded_head_and_refuses_another(folders, tmp_path, capsys):
  _main(f"--model_dir={folders['tagger']}", f"--export_dir={tmp_path / 'tagger'}", "--seq_length=16",
        f"--spm_model_file={tiny.SPM_MODEL_FILE}")
  assert f"--head=token_classifier (read from {folders['tagger']})" in capsys.readouterr().out
  assert saved_model_head(tf.saved_model.load(str(tmp_path / "tagger")).signatures) == "token_classifier"
  with pytest.raises(ValueError, match="--head=classifier: .* was trained as a token_classifier"):
    _main(f"--model_dir={folders['tagger']}", f"--export_dir={tmp_path / 'wrong'}", "--head=classifier")
  assert not (tmp_path / "wrong").exists()
  with pytest.raises(app.UsageError, match="--head=classifier, token_classifier or multiple_choice"):
    _main(f"--model_dir={folders['bare']}", f"--export_dir={tmp_path / 'bare'}")


def test_every_reader_refuses_the_head_the_records_contradict(folders):
  """The pipelines (and through them the server) and the converter load through `loading.load_model_from`, which
  refuses it too (`check_recorded_kind`)."""
  from official_albert import pipelines  # noqa: PLC0415 (a heavy import, only here)
  from official_albert.checkpoints.loading import load_model  # noqa: PLC0415
  from official_albert.serving import task_pipelines  # noqa: PLC0415
  read_as = r"trained as a {}, but it is read as a {}: the two store the same variables"
  with pytest.raises(ValueError, match=read_as.format("token_classifier", "classifier")):
    pipelines.classify(folders["tagger"], "a text")
  with pytest.raises(ValueError, match=read_as.format("classifier", "token_classifier")):
    task_pipelines.token_classification(folders["classifier"], "a text")
  with pytest.raises(ValueError, match=read_as.format("multiple_choice", "classifier")):
    load_model(folders["quiz"], "classifier")
  assert pipelines.classify(folders["classifier"], ["a text"])[0]["label"] in tiny.LABELS
  assert len(task_pipelines.token_classification(folders["tagger"], "two words")) == 2
