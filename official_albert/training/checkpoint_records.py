"""The records a checkpoint's own folder holds, adopted by an eval / predict run in another `--model_dir`.

A run's weights mean what the records written beside them say: the label order of the classifier's outputs
(labels.json), the model's shape (config.json), the tokenizer options, a reranker's or an embedder's training record,
and the run's params.yaml (the settings predict and the exports read). The tasks read those records from `model_dir`,
so `--mode=eval --model_dir=NEW --checkpoint=RUN/ckpt-N` read none of RUN's: a classifier trained with
`task.labels=[pos, neg]` was scored against the sorted order [neg, pos] (accuracy 0.0, no warning), and its
predictions named the wrong labels. The run now copies RUN's records into NEW first (NEW then describes the weights
its results came from), so that evaluating there equals evaluating in RUN itself; a record NEW already holds with
other content is refused, naming both files, rather than either being silently preferred.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional

from official_albert import file_io
from official_albert import model_directory as md

logger = logging.getLogger(__name__)

# What a run writes beside its checkpoints that its tasks, predict and the exports read back (not its outputs:
# eval_results.json, predictions, summaries; not the trainer's state: checkpoint, best_checkpoint.json).
RECORDS = (md.PARAMS_FILE, md.CONFIG_FILE, md.LABELS_FILE, md.LABELS_TEXT_FILE, md.TOKENIZER_CONFIG_FILE,
           md.RANKING_TRAINING_FILE, md.EMBEDDING_TRAINING_FILE, md.SPM_FILE)


class RecordConflictError(ValueError):
  """`--model_dir` holds a record that the checkpoint's folder records otherwise."""


def checkpoint_folder(checkpoint: str) -> str:
  """The folder of a checkpoint prefix (`RUN/ckpt-N` → RUN)."""
  return os.path.dirname(checkpoint.rstrip("/")) or "."


def _read(path: str) -> bytes:
  with file_io.open_file(path, "rb") as f:
    return f.read()


def adopt_records(checkpoint: Optional[str], model_dir: str) -> List[str]:
  """Copies the records of `checkpoint`'s folder into `model_dir` when that is another folder; returns the names
  copied (none when the checkpoint is in `model_dir`, or its folder holds no record).

  Raises:
    RecordConflictError: `model_dir` holds one of the records with other content (checked for every record before
      anything is copied, so a refused run changes nothing).
  """
  if not checkpoint:
    return []
  source = checkpoint_folder(checkpoint)
  if file_io.same_location(source, model_dir):
    return []
  present = [name for name in RECORDS if file_io.exists(md.path(source, name))]
  conflicts = [name for name in present if file_io.exists(md.path(model_dir, name))
               and _read(md.path(model_dir, name)) != _read(md.path(source, name))]
  if conflicts:
    raise RecordConflictError(
        f"--checkpoint={checkpoint} is read with its folder's records ({', '.join(present)}: what its weights "
        f"mean, such as the order of its labels), but --model_dir={model_dir} already holds "
        f"{', '.join(conflicts)} with other content (another run's, or an evaluation from before 2026-12-03 that "
        f"read none of them): compare {md.path(model_dir, conflicts[0])} with {md.path(source, conflicts[0])}. "
        f"Pass a new --model_dir (or --model_dir={source}), or delete those files from {model_dir}.")
  copied = [name for name in present if not file_io.exists(md.path(model_dir, name))]
  if copied:
    file_io.makedirs(model_dir)
  for name in copied:
    file_io.atomic_copy(md.path(source, name), md.path(model_dir, name))
  if copied:
    logger.info("%s: copied the records of %s's folder (%s), which say what its weights mean.", model_dir,
                checkpoint, ", ".join(copied))
  return copied
