"""The SQuAD settings a question-answering model is served with: the ones its run's `--mode=predict` used.

A trainer directory records them in params.yaml (task.doc_stride, max_query_length, max_answer_length, n_best_size,
null_score_threshold); an export of it carries them (a SavedModel's `tokenization_info`, an OpenVINO folder's
serving_config.json), since an export folder has no params.yaml. Without them the pipelines and the server fell back
to the reference windows fitted to the length and to a 0.0 threshold, so a served v2 model answered other questions
than its predictions.json (a tuned threshold, a run's query cap: review s57).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Dict, Optional, Set, Tuple, Union

from official_albert import model_directory as md
from official_albert.data import squad_features

# The recorded keys and their kinds: the windows and the post-processing of `pipelines.question_answering`.
QA_KEYS = {"doc_stride": int, "max_query_length": int, "max_answer_length": int, "n_best_size": int,
           "null_score_threshold": float}
QA_HEADS = ("span", "squad_v2")

logger = logging.getLogger(__name__)

Number = Union[int, float]

# The (folder, max_seq_length) pairs whose too-long recorded question cap this process has warned about: a pipeline
# called in a loop (each call resolves the settings again) warned on every call, burying the other log lines.
_WARNED_SHORT: Set[Tuple[object, int]] = set()


def _valid(kind, value) -> bool:
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return False
  return value > 0 and float(value).is_integer() if kind is int else math.isfinite(value)


def recorded_qa_settings(model_dir: Optional[str]) -> Dict[str, Number]:
  """The QA_KEYS the run that wrote `model_dir` recorded (params.yaml's task section); {} without."""
  task = md.recorded_task(model_dir or None)
  return {key: kind(task[key]) for key, kind in QA_KEYS.items() if key in task and _valid(kind, task[key])}


def served_qa_settings(model, model_dir: Optional[str]) -> Dict[str, Number]:
  """The QA_KEYS a model answers with when called on `model_dir`: an export's recorded ones (`model.settings`),
  else its trainer directory's."""
  settings = getattr(model, "settings", None)
  if isinstance(settings, dict) and any(key in settings for key in QA_KEYS):
    return {key: kind(settings[key]) for key, kind in QA_KEYS.items()
            if key in settings and _valid(kind, settings[key])}
  return recorded_qa_settings(model_dir)


def resolved_qa_settings(model, model_dir: Optional[str], max_seq_length: int,
                         **given: Optional[Number]) -> Dict[str, Number]:
  """The windows and post-processing of `pipelines.question_answering` at `max_seq_length`: each `given` one (a
  QA_KEYS name) that is not None, else the run's (`served_qa_settings`), else the reference's (128 / 64 windows
  fitted to the length, `squad_features.fit_windows`; 30 / 20 / 0.0)."""
  recorded = served_qa_settings(model, model_dir)
  if recorded.get("max_query_length", 0) + 3 >= max_seq_length:  # (an export, or a call, shorter than the run)
    _warn_short_windows(model, model_dir, max_seq_length, recorded["max_query_length"])
    recorded = {k: v for k, v in recorded.items() if k not in ("doc_stride", "max_query_length")}
  chosen = {**recorded, **{k: v for k, v in given.items() if v is not None}}
  stride, query = squad_features.fit_windows(max_seq_length, chosen.get("doc_stride"), chosen.get("max_query_length"))
  return {"doc_stride": stride, "max_query_length": query, "max_answer_length": chosen.get("max_answer_length", 30),
          "n_best_size": chosen.get("n_best_size", 20),
          "null_score_threshold": chosen.get("null_score_threshold", 0.0)}


def _warn_short_windows(model, model_dir: Optional[str], max_seq_length: int, query: int) -> None:
  """Warns that the recorded question cap `query` leaves no context piece at `max_seq_length`, once per folder and
  length in this process (a model object without a folder: per object)."""
  key = (os.path.abspath(model_dir) if model_dir else id(model), int(max_seq_length))
  if key in _WARNED_SHORT:
    return
  _WARNED_SHORT.add(key)
  logger.warning("%s: the run recorded max_query_length=%d, which leaves no context piece in %d-piece windows: the "
                 "windows are fitted to the length instead (export, or call, at max_seq_length=%d or more to keep "
                 "the run's). Said once per folder and length.", model_dir or "the model", query, max_seq_length,
                 query + 4)
