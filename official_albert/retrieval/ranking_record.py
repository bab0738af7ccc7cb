"""A reranker's training record: the loss a `text_ranking` run trained with, in its directory's ranking_training.json.

The file is one JSON object, `{"loss": "listwise"}` or `{"loss": "bce"}`. A later run in the directory (`--mode=eval`)
reads it to report the trained loss's `eval_loss`, and `convert_checkpoint` carries it beside a converted reranker's
weights. Both read it here, so a hand-edited file is refused where it is first read (the converter's input, not only
the output a run later reads it from), in the same words.
"""

from __future__ import annotations

from official_albert import file_io

# listwise: softmax cross-entropy over each query's group (the positive against its negatives); bce: each (query,
# document) pair on its own, relevant (1) or not (0).
LOSSES = ("listwise", "bce")
RECORD_FIX = ("It records the loss the reranker was trained with, as {\"loss\": \"listwise\"} or {\"loss\": \"bce\"}: "
              "correct it or delete it")


def read_ranking_loss(file_path: str, fix: str = RECORD_FIX + ".", error: type = ValueError) -> str:
  """The loss that the ranking_training.json at `file_path` records.

  Args:
    file_path: the record (it exists).
    fix: the next step the message ends with (a run adds its own choices: task.loss).
    error: the exception type raised (a ValueError subclass: the train binary's ConfigError).

  Raises:
    `error`: the file is not JSON, not an object, or its "loss" is missing or not one of LOSSES; the message names
      the file, the key, the value, the allowed values and `fix`.
  """
  settings = file_io.read_json(file_path, "text_ranking training record", fix, error=error)
  if not isinstance(settings, dict):
    raise error(f"{file_path}: expected a JSON object whose \"loss\" is one of {LOSSES}, got "
                f"{type(settings).__name__} {repr(settings)[:80]}. {fix}")
  value = settings.get("loss")
  if value not in LOSSES:
    got = f"is {value!r}" if "loss" in settings else "is missing"
    raise error(f"{file_path}: \"loss\" {got}, not one of {LOSSES}. {fix}")
  return value
