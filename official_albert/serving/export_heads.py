"""Which head an export reads from a model directory: the one its files say, unless `--head` names it, and never one
its run's records contradict.

A sequence classifier, a token classifier and a multiple-choice model store the same `classifier` variables ([H, K],
[H, K] and [H, 1]), so loading one as another raises no shape error: `--head=classifier` on a `token_classification`
run exported a sequence classifier that labelled whole texts with its tag set, and on a `text_multiple_choice` run a
one-output regression. The run's records (labels.json's task, params.yaml's experiment,
`loading.recorded_classifier_kind`) tell them apart, as they do for `convert_checkpoint` and the server.
"""

from __future__ import annotations

from typing import Optional

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.loading import CLASSIFIER_KINDS
from official_albert.checkpoints.loading import infer_model_type
from official_albert.checkpoints.loading import recorded_classifier_kind


def export_head(model_dir: str) -> str:
  """The head of `model_dir` when the export names none: an HF / KerasHub directory's architecture, a native
  checkpoint's head (a classifier-style one by the run's records), "encoder" for a sentence-transformers folder,
  else "pretrainer" (an original TF1 release, which records no head).

  Raises:
    ValueError: a native classifier-style head without records (naming the --head values to choose from).
  """
  if file_io.exists(md.path(model_dir, md.SENTENCE_TRANSFORMERS_MODULES_FILE)):
    return "encoder"
  try:
    model_format = md.detect_format(model_dir)
  except FileNotFoundError:
    return "pretrainer"  # (the load that follows names what the folder lacks)
  if model_format == "tf1":
    return "pretrainer"
  try:
    return infer_model_type(model_format, model_dir)
  except ValueError as error:
    raise ValueError(f"{model_dir}: a classifier-style head and no record of the task that trained it (labels.json, "
                     "params.yaml); pass --head=classifier, token_classifier or multiple_choice.") from error


def check_recorded_head(model_dir: str, head: str) -> None:
  """Refuses a classifier-style `head` that `model_dir`'s records name another kind of (see the module docstring).

  Raises:
    ValueError: naming the head, the recorded kind and the --head to pass.
  """
  if head not in CLASSIFIER_KINDS:
    return
  recorded: Optional[str] = recorded_classifier_kind(model_dir)
  if recorded and recorded != head:
    raise ValueError(f"--head={head}: {model_dir} was trained as a {recorded} (its labels.json / params.yaml name the "
                     f"task), whose variables load as a {head} without an error but compute another task; pass "
                     f"--head={recorded}, or leave --head out to export the head the directory records.")
