"""int8 for the OpenVINO export: NNCF post-training quantization on calibration text, and an accuracy gate.

`quantize_with_gate` (used by `export_openvino(precision="int8")`):

1. reads `--calibration_file` (one example per line: `text`, `text<TAB>text_b`; multiple choice `context` or
   `context<TAB>choice_1<TAB>...<TAB>choice_C`; SQuAD `question<TAB>context`), tokenizes it with `FullTokenizer` and
   packs it as the pipelines do (batches of 8, padded to their longest row, cut at seq_length). Pretrainer rows get
   `[MASK]` at every 7th token (or where the text writes `[MASK]`) so the MLM head sees what it will serve.
2. holds out every fifth line, or gates on `--heldout_file` (then every line calibrates; classifier and multiple
   choice lines start with a label column: `label<TAB>text...`; other heads' lines are unlabelled, as calibration
   lines). Held-out text is what the gate can judge: a calibration file that is not the task's text is caught only
   against a held-out file that is. It then quantizes with NNCF on the calibration lines
   (`ModelType.TRANSFORMER`, mixed preset), and
3. scores the f32 IR and the int8 IR (compiled as it will be served: its float layers in bf16 where the CPU has it) on
   the held-out rows. The metric per head:

   classifier      accuracy on the labels of `--heldout_file` when given, else argmax agreement with f32 (f32 = 1)
   multi-label     (labels.json `multi_label`) the labels at its threshold (sigmoid >= threshold): micro-F1 with the
                   label sets of `--heldout_file` (`a|b`, labels.json's `label_separator`; an empty cell = none),
                   else label-set agreement with f32 (the rows whose predicted set is f32's exactly)
   regression      Pearson r with the labels of `--heldout_file`, else Pearson r with the f32 scores (f32 = 1)
   multiple choice accuracy with `--heldout_file` labels, else argmax agreement with f32; held-out rows need their
                   choices (`context`-only rows are refused: every choice is then the same sequence, so any model
                   picks choice 0 and the gate would pass it)
   token classifier argmax agreement with f32 over the real tokens
   span, squad_v2  agreement of the best (start, end) with f32
   encoder         mean cosine of sequence_output rows (real tokens), of pooled_output and (an embedder's export)
                   of sentence_embedding to f32
   pretrainer      MLM top-1 agreement with f32 at the [MASK] positions, and the sequence_output cosine

   and raises `AccuracyGateError` with both numbers when any metric drops by more than `max_accuracy_drop`. A
   held-out set the metric cannot be measured on (no [MASK] position, a Pearson r over fewer than 2 rows or constant
   labels or f32 scores) is refused first as such (`check_heldout`), not as a "nan in int8" drop.

Long because: reading, packing, quantizing and gating share the held-out rows' conventions (every 5th line, the
masking offsets, the label forms), and the gate's checks of them are read against the packing they mirror.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.serving import openvino_ir as ir
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids
from official_albert.tokenization import SPECIAL_TOKEN_IDS

logger = logging.getLogger(__name__)

MIN_CALIBRATION_LINES = 10
HELDOUT_EVERY = 5
# The fewest held-out examples the gate decides on (a gate on one example passed with f32 and int8 both at 0).
MIN_HELDOUT_EXAMPLES = 8
BATCH_SIZE = 8
_MASK_EVERY = 7
_MASK_ID = SPECIAL_TOKEN_IDS["[MASK]"]
_CLS_ID = SPECIAL_TOKEN_IDS["[CLS]"]
_SEP_ID = SPECIAL_TOKEN_IDS["[SEP]"]


class AccuracyGateError(ValueError):
  """The int8 model scored worse than allowed on the held-out examples (the message has both numbers)."""


# ------------------------------------------------------------------------------------------------ reading
def read_rows(path: str, head: str, num_choices: Optional[int], labelled: bool = False):
  """[(fields, label or None)] of a calibration / held-out file; errors name file, line and the fix. A byte-order mark
  is dropped and labels are stripped (else '\ufeff3' or '3 ' matches no name of labels.json)."""
  if not file_io.exists(path):
    raise FileNotFoundError(f"{path}: calibration file not found.")
  rows, skipped = [], 0
  with file_io.open_file(path, "rb") as f:
    for number, raw in enumerate(f, 1):
      try:
        line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
      except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{number}: not UTF-8 text ({e.reason} at byte {e.start}); the calibration file is "
                         "one text per line, UTF-8 (a text<TAB>text_b pair, or for held-out files label<TAB>text). "
                         "Give the texts themselves, not a binary file.") from None
      if not line.strip():
        skipped += 1
        continue
      fields = line.split("\t")
      label = None
      if labelled:
        if len(fields) < 2:
          raise ValueError(f"{path}:{number}: expected `label<TAB>text[<TAB>text_b]`, got one field.")
        label, fields = fields[0].strip(), fields[1:]
      widths = (1, 1 + num_choices) if head == "multiple_choice" else (1, 2)
      if len(fields) not in widths:
        what = (f"`context` or `context<TAB>` + {num_choices} tab-separated choices" if head == "multiple_choice"
                else "`text` or `text<TAB>text_b`")
        raise ValueError(f"{path}:{number}: {len(fields)} tab-separated text fields; a {head} line is {what}.")
      rows.append((fields, label))
  if skipped:
    logger.info("%s: skipped %d empty line(s).", path, skipped)
  return rows


def gate_labels(loaded) -> Union[None, List[str], md.LabelFile]:
  """What the gate reads held-out labels with (`quantize_with_gate`'s `labels`) for an export's `LoadedExport`: a
  multi-label classifier's labels.json (its names, threshold and label separator; `loaded.labels` is None for it),
  else the argmax's names."""
  return loaded.label_file if loaded.multi_label else loaded.labels


def _multi_label(labels) -> Tuple[Optional[List[str]], Optional[float], str]:
  """(names, threshold or None for a single-label model, label separator) of `labels` (names or a `LabelFile`)."""
  if isinstance(labels, md.LabelFile):
    separator = labels.columns.get("label_separator") or "|"
    return (list(labels.labels) or None), (float(labels.threshold) if labels.multi_label else None), separator
  return (list(labels) if labels is not None else None), None, "|"


def _names_are_numbers(names: Sequence[str]) -> bool:
  """True when every label name is an integer string (labels.json ['1', '2', '3'] of a 1-3 star classifier): then a
  held-out label is read as a name only, since as an id '01' or '2' would silently mean another class."""
  return bool(names) and all(name.strip().lstrip("+-").isdecimal() for name in names)


def _not_a_name(path: str, row: int, label: str, names: Sequence[str]) -> ValueError:
  return ValueError(f"{path}: held-out row {row}: label {label!r} is not one of the model's label names "
                    f"{list(names)}. These names are numbers, so a held-out label must be one of them as written "
                    "(it is not read as an output id: '01' or '0' would be ambiguous). Write the label as labels.json "
                    "spells it.")


def label_sets(path: str, rows, labels: Optional[Sequence[str]], num_labels: int, separator: str = "|") -> np.ndarray:
  """A multi-label classifier's held-out label sets (`a|b`: names or ids joined by `separator`, as the text tasks
  read them; an empty cell = no label) as a [rows, num_labels] 0/1 array."""
  values = np.zeros((len(rows), num_labels), np.int64)
  names = list(labels or [])
  names_only = _names_are_numbers(names)
  for i, (_, cell) in enumerate(rows):
    for label in (part.strip() for part in cell.split(separator) if part.strip()):
      if names_only and label not in names:
        raise _not_a_name(path, i + 1, label, names)
      index = names.index(label) if label in names else (int(label) if label.lstrip("-").isdigit() else None)
      if index is None or not 0 <= index < num_labels:
        known = names or list(range(num_labels))
        raise ValueError(f"{path}: held-out row {i + 1}: label {label!r} is not one of {known} (a multi-label row's "
                         f"labels are joined by {separator!r}).")
      values[i, index] = 1
  return values


def check_choice_rows(path: str, head: str, rows) -> None:
  """Refuses `context`-only held-out rows of a multiple-choice gate: every choice of such a row is the same packed
  sequence, so f32 and int8 both pick choice 0 and the gate would pass any model."""
  bare = sum(len(fields) == 1 for fields, _ in rows)
  if head == "multiple_choice" and bare:
    raise ValueError(f"{path}: {bare} of the {len(rows)} held-out lines hold the context only; the multiple-choice "
                     "int8 gate needs the choices (with the same text for every choice any model picks choice 0, so "
                     f"the gate would pass any model). Give those lines (every {HELDOUT_EVERY}th of "
                     "--calibration_file without --heldout_file) their choices (`context<TAB>choice_1<TAB>...`), or "
                     "pass a --heldout_file of `label<TAB>context<TAB>choice_1<TAB>...` lines (context-only lines "
                     "still calibrate).")


def label_values(path: str, head: str, rows, labels: Optional[Sequence[str]], num_choices: Optional[int],
                  regression: bool, num_labels: Optional[int] = None) -> np.ndarray:
  """The held-out labels as numbers (label names → ids; regression: floats). An id is accepted only where the names
  are not themselves numbers (see `_names_are_numbers`), and only below the number of choices, of names, or else of
  the head's outputs (`num_labels`: ids 1-3 of a 3-way head without names were scored as if 3 were a class)."""
  values = []
  names_only = not regression and _names_are_numbers(list(labels or []))
  for i, (_, label) in enumerate(rows):
    if names_only and label not in labels:
      raise _not_a_name(path, i + 1, label, labels)
    try:
      if regression:
        values.append(float(label))
      elif labels is not None and label in labels:
        values.append(labels.index(label))
      else:
        values.append(int(label))
    except ValueError:
      known = f" or one of {list(labels)}" if labels else ""
      raise ValueError(f"{path}: held-out row {i + 1}: label {label!r} is not a number{known}.") from None
  values = np.asarray(values)
  if not regression:
    limit = num_choices if head == "multiple_choice" else (len(labels) if labels else num_labels)
    if limit is not None and ((values < 0) | (values >= limit)).any():
      raise ValueError(f"{path}: label ids must be in [0, {limit}), got {sorted(set(values.tolist()))}.")
  return values


# ------------------------------------------------------------------------------------------------ packing
def _mask_tokens(ids: List[int], max_predictions: int, offset: int) -> Tuple[List[int], List[int]]:
  """Positions (in the packed row, after [CLS]) to predict and the ids with [MASK] written there."""
  positions = [i + 1 for i, t in enumerate(ids) if t == _MASK_ID]
  if not positions:
    positions = [i + 1 for i in range(offset % _MASK_EVERY, len(ids), _MASK_EVERY)]
  positions = positions[:max_predictions]
  ids = list(ids)
  for p in positions:
    ids[p - 1] = _MASK_ID
  return ids, positions


def pack_batches(tokenizer: FullTokenizer, rows, head: str, seq_length: int, num_choices: Optional[int] = None,
                 max_predictions_per_seq: int = 20, batch_size: int = BATCH_SIZE) -> List[Dict[str, np.ndarray]]:
  """Model inputs (the IR's names, int32) for text rows, `batch_size` rows per batch padded to their longest."""
  batches = []
  for start in range(0, len(rows), batch_size):
    chunk = [fields for fields, _ in rows[start:start + batch_size]]
    segments, positions = [], []
    for k, fields in enumerate(chunk):
      a = tokenizer.encode_ids(fields[0])
      if head == "multiple_choice":
        choices = fields[1:] or [None] * num_choices
        segments.append([(a, None if c is None else tokenizer.encode_ids(c)) for c in choices])
        continue
      b = tokenizer.encode_ids(fields[1]) if len(fields) > 1 else None
      if head == "pretrainer":
        a, pos = _mask_tokens(a[:seq_length - 2 - (0 if b is None else 1)], max_predictions_per_seq, start + k)
        positions.append(pos)
      segments.append([(a, b)])
    longest = max(len(a) + 2 + (0 if b is None else len(b) + 1) for row in segments for a, b in row)
    length = min(longest, seq_length)
    packed = [[pack_ids(a, b, length) for a, b in row] for row in segments]
    batch = {}
    for name in ir.ID_NAMES:
      values = np.asarray([[p[name] for p in row] for row in packed], np.int32)
      batch[name] = values if head == "multiple_choice" else values[:, 0]
    if head == "pretrainer":
      width = max(1, max(len(p) for p in positions))
      batch["masked_lm_positions"] = np.asarray([p + [0] * (width - len(p)) for p in positions], np.int32)
    if head == "squad_v2":
      batch["p_mask"] = squad_p_mask(batch)
    batches.append(batch)
  return batches


def squad_p_mask(batch: Dict[str, np.ndarray]) -> np.ndarray:
  """Reference §5.2 p_mask (as `export.squad_p_mask`): 0 for [CLS] and context tokens, 1 elsewhere."""
  ids, mask, types = batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"]
  context = (types == 1) & (ids != _SEP_ID) & (mask == 1)
  context[:, 0] = True
  return (1 - context).astype(np.int32)


# ----------------------------------------------------------------------------------------------- quantize
def quantize_int8(ov_model, calibration_inputs: Sequence[Dict[str, np.ndarray]], subset_size: Optional[int] = None,
                  preset: str = "mixed", fast_bias_correction: bool = True, ignored_scope=None):
  """NNCF post-training quantization of an f32 IR (`to_openvino_model`) to int8.

  Args:
    ov_model: the float IR (left unchanged).
    calibration_inputs: batches {input name: int array} (`pack_batches`, or the benchmark's own).
    subset_size: batches used for the statistics (default: all).
    preset: "mixed" (symmetric weights, asymmetric activations; the transformer default) or "performance".
    fast_bias_correction, ignored_scope: as `nncf.quantize`.
  """
  nncf = ir.require_nncf()
  if not calibration_inputs:
    raise ValueError("quantize_int8: no calibration inputs.")
  presets = {"mixed": nncf.QuantizationPreset.MIXED, "performance": nncf.QuantizationPreset.PERFORMANCE}
  if preset not in presets:
    raise ValueError(f"preset={preset!r} is not one of {sorted(presets)}.")
  data = [{k: np.ascontiguousarray(v, np.int32) for k, v in batch.items()} for batch in calibration_inputs]
  kwargs = {} if ignored_scope is None else {"ignored_scope": ignored_scope}
  return nncf.quantize(ov_model.clone(), nncf.Dataset(data), preset=presets[preset],
                       model_type=nncf.ModelType.TRANSFORMER, subset_size=subset_size or len(data),
                       fast_bias_correction=fast_bias_correction, **kwargs)


# --------------------------------------------------------------------------------------------------- gate
def _run(compiled, batches) -> List[Dict[str, np.ndarray]]:
  request = compiled.create_infer_request()
  return [ir.run_compiled(compiled, batch, request) for batch in batches]


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  a, b = a.astype(np.float64), b.astype(np.float64)
  den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
  return (a * b).sum(-1) / np.maximum(den, 1e-30)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
  if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
    return float("nan")
  return float(np.corrcoef(a, b)[0, 1])


def _micro_f1(predicted: np.ndarray, gold: np.ndarray) -> float:
  true_positives = float((predicted & gold).sum())
  wrong = float((predicted != gold).sum())
  return 1.0 if true_positives + wrong == 0 else 2 * true_positives / (2 * true_positives + wrong)


def gate_metrics(head: str, batches, f32_out, int8_out, labels: Optional[np.ndarray] = None,
                 threshold: Optional[float] = None, source: str = "the held-out lines") -> Dict[str, tuple]:
  """{metric name: (f32 score, int8 score)} on the held-out batches (see the module docstring); `threshold`: a
  multi-label classifier's (then `labels` are [rows, labels] 0/1 sets). Raises ValueError naming `source` where the
  held-out set cannot measure the metric (`check_heldout`)."""
  check_heldout(head, batches, labels if threshold is None else None, f32_out, source=source, regression=(
      head == "classifier" and threshold is None and bool(f32_out) and f32_out[0]["logits"].shape[-1] == 1))
  def cat(outs, key, pick=lambda x, b: x):
    return np.concatenate([pick(o[key], b) for o, b in zip(outs, batches)])

  def tokens(x, b):  # [B, S, ...] → the real tokens' rows
    return x[b["input_mask"].astype(bool)]

  if head in ("encoder", "pretrainer"):
    seq = float(_cosine_rows(cat(f32_out, "sequence_output", tokens), cat(int8_out, "sequence_output", tokens)).mean())
    metrics = {"sequence_output cosine": (1.0, seq)}
    if head == "encoder":
      pooled = _cosine_rows(cat(f32_out, "pooled_output"), cat(int8_out, "pooled_output")).mean()
      metrics["pooled_output cosine"] = (1.0, float(pooled))
      if "sentence_embedding" in f32_out[0]:
        embedding = _cosine_rows(cat(f32_out, "sentence_embedding"), cat(int8_out, "sentence_embedding")).mean()
        metrics["sentence_embedding cosine"] = (1.0, float(embedding))
      return metrics
    def masked(x, b):
      return x[b["masked_lm_positions"] > 0].argmax(-1)
    agree = (cat(f32_out, "mlm_logits", masked) == cat(int8_out, "mlm_logits", masked)).mean()
    metrics["MLM top-1 agreement"] = (1.0, float(agree))
    return metrics
  if head in ("classifier", "multiple_choice"):
    f32_logits, int8_logits = cat(f32_out, "logits"), cat(int8_out, "logits")
    if threshold is not None and head == "classifier":  # the labels at the threshold, as classify predicts them
      f32_sets, int8_sets = [1 / (1 + np.exp(-x.astype(np.float64))) >= threshold for x in (f32_logits, int8_logits)]
      if labels is not None:
        gold = np.asarray(labels).astype(bool)
        return {"micro-F1 at the threshold": (_micro_f1(f32_sets, gold), _micro_f1(int8_sets, gold))}
      return {"label-set agreement with f32": (1.0, float((f32_sets == int8_sets).all(-1).mean()))}
    if f32_logits.shape[-1] == 1 and head == "classifier":
      if labels is not None:
        return {"Pearson r with the labels": (_pearson(f32_logits[:, 0], labels), _pearson(int8_logits[:, 0], labels))}
      return {"Pearson r with f32": (1.0, _pearson(int8_logits[:, 0], f32_logits[:, 0]))}
    if labels is not None:
      return {"accuracy": (float((f32_logits.argmax(-1) == labels).mean()),
                           float((int8_logits.argmax(-1) == labels).mean()))}
    return {"argmax agreement with f32": (1.0, float((f32_logits.argmax(-1) == int8_logits.argmax(-1)).mean()))}
  if head == "token_classifier":
    agree = (cat(f32_out, "logits", tokens).argmax(-1) == cat(int8_out, "logits", tokens).argmax(-1)).mean()
    return {"token argmax agreement with f32": (1.0, float(agree))}
  if head == "span":
    def best(outs):
      out = []
      for o, b in zip(outs, batches):
        off = np.where(b["input_mask"] == 1, 0.0, -np.inf)
        out.append(np.stack([(o["start_logits"] + off).argmax(-1), (o["end_logits"] + off).argmax(-1)], -1))
      return np.concatenate(out)
    return {"best span agreement with f32": (1.0, float((best(f32_out) == best(int8_out)).all(-1).mean()))}
  if head == "squad_v2":
    def best(outs):
      return np.concatenate([np.stack([o["start_top_index"][:, 0], o["end_top_index"].reshape(
          len(o["end_top_index"]), -1)[:, 0]], -1) for o in outs])
    return {"best span agreement with f32": (1.0, float((best(f32_out) == best(int8_out)).all(-1).mean()))}
  raise ValueError(f"No int8 gate for head={head!r}.")


def check_heldout(head: str, batches, labels: Optional[np.ndarray] = None, f32_out=None, regression: bool = False,
                  source: str = "the held-out lines") -> None:
  """Refuses a held-out set the gate's metric is undefined on, naming `source` and the fix; else that metric is NaN
  and the refusal blamed int8 ("1.0000 in f32 and nan in int8: calibrate on more text"). Before the models run (on
  the packed `batches` and `labels`), and again with `f32_out` (a regression head's f32 scores; `gate_metrics`).
  Also refuses fewer than `MIN_HELDOUT_EXAMPLES` held-out examples (a gate on one example passed at 0 and 0)."""
  if not batches:
    raise ValueError(f"{source}: no held-out rows for the int8 gate; pass a --heldout_file of the task's text.")
  if head == "pretrainer" and not any((b["masked_lm_positions"] > 0).any() for b in batches):
    raise ValueError(f"{source}: none of the held-out lines has a [MASK] position, so the MLM top-1 agreement is "
                     f"undefined (held-out line k, from 0, masks every {_MASK_EVERY}th token from its "
                     f"(k mod {_MASK_EVERY})-th: lines of a few tokens, or that tokenize to nothing, get none). Fix: "
                     "held-out lines of a sentence or more (--heldout_file, or longer --calibration_file lines), or "
                     "write [MASK] where the model should predict.")
  if regression:
    _check_regression_heldout(labels, f32_out, source)
  examples = sum(len(b["input_word_ids"]) for b in batches)
  # (after the faults that say more: a set of one row, of one score; once, before the models run)
  if f32_out is None and examples < MIN_HELDOUT_EXAMPLES:
    raise ValueError(f"{source}: {examples} held-out example(s); the int8 gate decides on at least "
                     f"{MIN_HELDOUT_EXAMPLES} (a few hundred recommended): pass a longer --heldout_file, or "
                     f"{MIN_HELDOUT_EXAMPLES * HELDOUT_EVERY}+ --calibration_file lines.")


def _check_regression_heldout(labels, f32_out, source: str) -> None:
  """`check_heldout`'s regression half: Pearson r needs two or more finite, varying labels and f32 scores."""
  scores = None if f32_out is None else np.concatenate([o["logits"][:, 0] for o in f32_out])
  for name, values in (("labels", labels), ("f32 scores", scores)):
    if values is None:
      continue
    values = np.asarray(values, np.float64)
    if len(values) < 2:
      why = f"cover {len(values)} row(s)"
    elif not np.isfinite(values).all():
      why = f"hold a non-finite value (row {int(np.flatnonzero(~np.isfinite(values))[0]) + 1})"
    elif np.ptp(values) == 0:
      why = f"are all {values[0]:g}"
    else:
      continue
    cause = ("" if name == "labels" else " (the same text on every line, or an f32 regression head that predicts "
             "one score: check its eval pearson)")
    raise ValueError(f"{source}: the held-out {name} {why}{cause}, so the gate's Pearson r is undefined. Fix: pass a "
                     "--heldout_file of at least a few dozen `score<TAB>text` lines whose scores and texts vary.")


def check_gate(metrics: Dict[str, tuple], max_accuracy_drop: float, num_examples: int, labelled: bool) -> Dict:
  """The gate's record for serving_config.json; raises `AccuracyGateError` naming both numbers on a refusal."""
  record = {"max_accuracy_drop": max_accuracy_drop, "heldout_examples": num_examples, "labelled": labelled,
            "metrics": {name: {"f32": f32, "int8": int8, "drop": f32 - int8} for name, (f32, int8) in metrics.items()}}
  for name, (f32, int8) in metrics.items():
    if not np.isfinite(int8) or not np.isfinite(f32) or f32 - int8 > max_accuracy_drop:
      raise AccuracyGateError(
          f"int8 export refused: {name} on {num_examples} held-out examples is {f32:.4f} in f32 and {int8:.4f} in "
          f"int8 (drop {f32 - int8:.4f} > --max_accuracy_drop={max_accuracy_drop}). Fix: calibrate on more and more "
          "representative text of the task (--calibration_file, a few hundred lines), or export --precision=bf16 "
          "(or raise --max_accuracy_drop if the drop is acceptable).")
  return record


def gate_rows(calibration_file: str, heldout_file: Optional[str], head: str, num_choices: Optional[int],
              labels: Union[None, Sequence[str], md.LabelFile], num_outputs: Callable[[], int]):
  """The int8 gate's rows, for either runtime: (calibration rows, held-out rows, held-out labels or None,
  regression, the held-out set's name for messages).

  The held-out rows are `heldout_file`'s (labelled for a classifier or multiple choice: `label_sets` for a
  multi-label `labels`, else `label_values`, ids bounded by `num_outputs()`), else every `HELDOUT_EVERY`th line of
  `calibration_file`. Refuses fewer than `MIN_CALIBRATION_LINES` calibration lines, naming the file (too few
  held-out rows: `check_heldout`).
  """
  names, threshold, separator = _multi_label(labels)
  rows = read_rows(calibration_file, head, num_choices)
  if len(rows) < MIN_CALIBRATION_LINES:
    raise ValueError(f"{calibration_file}: {len(rows)} non-empty lines; int8 calibration needs at least "
                     f"{MIN_CALIBRATION_LINES} (a few hundred recommended) lines of the task's kind of text.")
  heldout_labels, regression = None, False
  if heldout_file:
    labelled = head in ("classifier", "multiple_choice")
    calibration, heldout = rows, read_rows(heldout_file, head, num_choices, labelled=labelled)
    if labelled:
      outputs = num_outputs()
      regression = head == "classifier" and outputs == 1
      heldout_labels = (label_sets(heldout_file, heldout, names, outputs, separator) if threshold is not None else
                        label_values(heldout_file, head, heldout, names, num_choices, regression, outputs))
  else:
    calibration = [r for i, r in enumerate(rows) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    heldout = [r for i, r in enumerate(rows) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
  source = (f"--heldout_file {heldout_file}" if heldout_file else
            f"--calibration_file {calibration_file} (its every {HELDOUT_EVERY}th line, held out)")
  check_choice_rows(heldout_file or calibration_file, head, heldout)
  return calibration, heldout, heldout_labels, regression, source


def quantize_with_gate(ov_model, head: str, tokenizer: FullTokenizer, calibration_file: str, seq_length: int,
                       max_accuracy_drop: float = 0.01, num_choices: Optional[int] = None,
                       heldout_file: Optional[str] = None, labels: Union[None, Sequence[str], md.LabelFile] = None,
                       max_predictions_per_seq: int = 20):
  """Calibrates, quantizes and gates (module docstring); returns (int8 `openvino.Model`, the gate's record).

  `labels`: the argmax's names, or a multi-label classifier's labels.json (`gate_labels`).
  """
  calibration, heldout, heldout_labels, regression, source = gate_rows(
      calibration_file, heldout_file, head, num_choices, labels,
      lambda: ov_model.output("logits").get_partial_shape()[-1].get_length())
  threshold = _multi_label(labels)[1]
  pack = dict(head=head, seq_length=seq_length, num_choices=num_choices,
              max_predictions_per_seq=max_predictions_per_seq)
  calibration_batches = pack_batches(tokenizer, calibration, **pack)
  heldout_batches = pack_batches(tokenizer, heldout, **pack)
  check_heldout(head, heldout_batches, heldout_labels if threshold is None else None, source=source,
                regression=regression)  # (before quantizing: the set's own faults, found in a second)
  f32_out = _run(ir.compile_openvino(ov_model, precision="f32"), heldout_batches)
  int8_model = quantize_int8(ov_model, calibration_batches)
  int8_out = _run(ir.compile_openvino(int8_model, precision="int8"), heldout_batches)
  metrics = gate_metrics(head, heldout_batches, f32_out, int8_out, heldout_labels, threshold, source=source)
  record = check_gate(metrics, max_accuracy_drop, len(heldout), heldout_labels is not None)
  logger.info("int8 gate passed on %d held-out examples: %s", len(heldout), record["metrics"])
  return int8_model, record
