"""A KerasHub ALBERT preset's task record (`task.json`): which head the preset holds, its classes and activation.

Kept apart from keras_hub_preset (the weights and the backbone's config) because these are the rules a conversion
checks before it reads or writes a weight, and the two directions share them:

- the task class names our model type (`TASK_MODEL_TYPES`). Our sequence, token and multiple-choice classifiers store
  the same variables, so a KerasHub AlbertTextClassifier read as a token classifier loaded with no error and tagged
  tokens with the text's classes: `check_task_kind` refuses that, naming the type to read it as;
- the classifier's `activation` is KerasHub's record of multi-label: "sigmoid" means independent labels, which ours
  records as labels.json's `multi_label` (`preset_multi_label`); a sigmoid classifier read as softmax answered one
  label per text with no error. None / "linear" (logits) and "softmax" (probabilities of one label) are our
  single-label classifier; any other activation has no counterpart here and is refused by name.
"""

from __future__ import annotations

from typing import Dict, Optional

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.names import CheckpointMismatchError

# KerasHub task class → our model type; a preset without task.json is a bare backbone (our encoder).
TASK_MODEL_TYPES = {"AlbertTextClassifier": "classifier", "AlbertMaskedLM": "pretrainer"}
MODEL_TYPE_TASKS = {"encoder": None, "classifier": "AlbertTextClassifier", "pretrainer": "AlbertMaskedLM"}
CLASSIFIER_TASK = "AlbertTextClassifier"
# KerasHub's way to say multi-label (AlbertTextClassifier's `activation`), and the activations of one label per text.
MULTI_LABEL_ACTIVATION = "sigmoid"
SINGLE_LABEL_ACTIVATIONS = (None, "linear", "softmax")
# Our heads that store the same `output_weights` / `output_bias` as KerasHub's AlbertTextClassifier.
CLASSIFIER_STYLE_TYPES = ("classifier", "token_classifier", "multiple_choice")


class KerasHubPresetError(CheckpointMismatchError):
  """A KerasHub preset that this converter cannot read or a model that KerasHub cannot hold (the fix is named)."""


def read_config_file(file_path: str, expected_classes) -> Dict:
  """A preset's serialized Keras object (config.json, task.json), refused unless its class is one of
  `expected_classes` and it has its arguments ("config")."""
  data = md.read_json(file_path)
  class_name = data.get("class_name") if isinstance(data, dict) else None
  if class_name not in expected_classes:
    raise KerasHubPresetError(f"{file_path}: class_name {class_name!r}, expected one of {sorted(expected_classes)}; "
                              "this converter reads KerasHub ALBERT presets only.")
  if not isinstance(data.get("config"), dict):
    raise KerasHubPresetError(f"{file_path}: no \"config\" object (the {class_name}'s arguments); the preset is "
                              "damaged: save it again with save_to_preset.")
  return data


def preset_task(directory: str) -> Optional[Dict]:
  """The preset's task.json (None for a bare backbone)."""
  task_file = md.path(directory, md.KERAS_HUB_TASK_FILE)
  if not file_io.exists(task_file):
    return None
  return read_config_file(task_file, TASK_MODEL_TYPES)


def preset_model_type(directory: str) -> str:
  """Our model type for a preset: its task's (`TASK_MODEL_TYPES`), "encoder" for a bare backbone."""
  task = preset_task(directory)
  return "encoder" if task is None else TASK_MODEL_TYPES[task["class_name"]]


def preset_num_labels(directory: str) -> Optional[int]:
  """The classes of a preset's AlbertTextClassifier; None for any other preset."""
  task = preset_task(directory)
  if task is None or task["class_name"] != CLASSIFIER_TASK:
    return None
  return int(task["config"]["num_classes"])


def preset_multi_label(directory: str) -> bool:
  """Whether a preset's AlbertTextClassifier is multi-label (`activation="sigmoid"`); False for any other preset.

  Raises:
    KerasHubPresetError: an activation this code has no counterpart for, or a one-class sigmoid (a binary
      probability: our one-output classifier is a regressor, whose score would be the raw logit), naming the fix.
  """
  task = preset_task(directory)
  if task is None or task["class_name"] != CLASSIFIER_TASK:
    return False
  task_file = md.path(directory, md.KERAS_HUB_TASK_FILE)
  activation = task["config"].get("activation")
  if activation in SINGLE_LABEL_ACTIVATIONS:
    return False
  if activation != MULTI_LABEL_ACTIVATION:
    raise KerasHubPresetError(
        f"{task_file}: the AlbertTextClassifier's activation is {activation!r}; official_albert's classifier is "
        f"single-label (activation None, 'linear' or 'softmax') or multi-label ({MULTI_LABEL_ACTIVATION!r}) only. "
        "Save the preset with one of those activations, or convert it with --model_type=encoder (the encoder "
        "without the head).")
  if int(task["config"]["num_classes"]) < 2:
    raise KerasHubPresetError(
        f"{task_file}: a one-class AlbertTextClassifier with activation {MULTI_LABEL_ACTIVATION!r} (a binary "
        "probability); official_albert reads a one-output classifier as a regressor, whose score would be the raw "
        "logit. Save it with num_classes=2 and softmax, or convert it with --model_type=encoder.")
  return True


def check_task_kind(directory: str, model_type: str) -> None:
  """Refuses to read a preset's AlbertTextClassifier as another classifier-style head (`CLASSIFIER_STYLE_TYPES`),
  and a classifier whose activation has no counterpart here (`preset_multi_label`).

  Raises:
    KerasHubPresetError: naming task.json, both kinds and the --model_type to read it as.
  """
  task = preset_task(directory)
  if task is None or task["class_name"] != CLASSIFIER_TASK or model_type not in CLASSIFIER_STYLE_TYPES:
    return
  if model_type != TASK_MODEL_TYPES[CLASSIFIER_TASK]:
    raise KerasHubPresetError(
        f"{md.path(directory, md.KERAS_HUB_TASK_FILE)}: the preset is a KerasHub {CLASSIFIER_TASK} (one label per "
        f"text), but it is read as a {model_type}: the two store the same variables, so it would load without an "
        "error and compute another task. Read it with --model_type=classifier (or --model_type=encoder for the "
        "encoder alone).")
  preset_multi_label(directory)
