"""The pipelines answered by a SavedModel of `export_saved_model` (text in, tokenized in its graph): classify and
fill-mask, and the fill-mask decoding (HF's slow tokenizer's) that the directory pipelines share.

`official_albert.serving.pipelines` dispatches here when it is given a SavedModel folder (or a `LoadedSavedModel`);
the names are importable from there as before.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from official_albert import model_directory as md
from official_albert.serving.export_folder import export_format
from official_albert.serving.pipeline_inputs import as_list
from official_albert.serving.pipeline_inputs import check_batch_size
from official_albert.serving.pipeline_inputs import check_top_k
from official_albert.serving.saved_model_runtime import check_masks_answered
from official_albert.serving.saved_model_runtime import saved_model_label_file
from official_albert.serving.saved_model_runtime import saved_model_tokenizer
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import SPECIAL_TOKEN_IDS


# ---------------------------------------------------------------------------------------------------- decoding
def decode_ids(tokenizer: FullTokenizer, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
  """HF's slow `AlbertTokenizer.decode`: special tokens dropped, or kept verbatim with HF's spacing around them."""
  sp = tokenizer.sp_model
  special = set(SPECIAL_TOKEN_IDS.values())
  if skip_special_tokens:  # (HF strips the result: a text ending in a mask then a space decodes without it)
    return sp.DecodeIds([int(i) for i in ids if int(i) not in special]).strip()
  out, pieces, prev_special = "", [], False
  for i in ids:
    piece = sp.IdToPiece(int(i))
    if int(i) in special:
      out += ("" if prev_special else " ") + sp.DecodePieces(pieces) + piece
      pieces, prev_special = [], True
    else:
      pieces.append(piece)
      prev_special = False
  return (out + sp.DecodePieces(pieces)).strip()


def token_str(tokenizer: FullTokenizer, token_id: int) -> str:
  sp = tokenizer.sp_model
  if sp.IsControl(token_id) or sp.IsUnknown(token_id):
    return sp.IdToPiece(token_id)
  return sp.DecodePieces([sp.IdToPiece(token_id)])


# ------------------------------------------------------------------------------------------- from a SavedModel
class LoadedSavedModel:
  """A SavedModel folder loaded once, passed to `classify` in place of its path (a server answers many calls from
  one load; the path would reload the graph each call). Attributes: folder, loaded (`tf.saved_model.load`)."""

  def __init__(self, folder):
    self.folder = os.fspath(folder)
    self.loaded = tf.saved_model.load(self.folder)


def is_saved_model(model_or_dir) -> bool:
  """A folder of `export_saved_model --format=saved_model` (saved_model.pb, not an OpenVINO / LiteRT folder)."""
  if isinstance(model_or_dir, LoadedSavedModel):
    return True
  if not isinstance(model_or_dir, (str, os.PathLike)):
    return False
  folder = os.fspath(model_or_dir)
  return os.path.isfile(os.path.join(folder, "saved_model.pb")) and export_format(folder) is None


def class_results(probs: np.ndarray, names: Sequence[str], threshold: Optional[float]) -> List[Dict[str, object]]:
  """classify's dicts from [B, K] probabilities (`threshold` set: a multi-label model)."""
  results = []
  for row in probs:
    best = int(np.argmax(row))
    result = {"label": names[best], "label_id": best, "score": float(row[best]),
              "probabilities": {names[i]: float(p) for i, p in enumerate(row)}}
    if threshold is not None:
      result["labels"] = [names[i] for i, p in enumerate(row) if p >= threshold]
    results.append(result)
  return results


def classify_saved_model(saved_model, texts: Sequence[str], text_pairs: Optional[Sequence[str]],
                          labels: Optional[Sequence[str]], batch_size: int,
                          threshold: Optional[float]) -> List[Dict[str, object]]:
  """`classify` answered by a classifier SavedModel of `export_saved_model` (its folder or a `LoadedSavedModel`; text
  in, tokenized in-graph; the label names and a multi-label model's threshold from the labels.json beside it, or for
  an export made before it carried one from its graph: `saved_model_label_file`)."""
  if text_pairs is not None and len(text_pairs) != len(texts):
    raise ValueError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}.")
  if isinstance(saved_model, LoadedSavedModel):
    folder, loaded = saved_model.folder, saved_model.loaded
  else:
    folder = os.fspath(saved_model)
    loaded = tf.saved_model.load(folder)
  signature = loaded.signatures.get("serve_text_pair" if text_pairs is not None else "serve_text")
  if signature is None or "logits" not in signature.structured_outputs:
    raise ValueError(f"{folder}: not a classifier SavedModel with text in (export it with --head=classifier from a "
                     f"model directory holding {md.SPM_FILE}).")
  saved = saved_model_label_file(folder, loaded.signatures)  # (an export made before labels.json: from its graph)
  multi_label = bool(saved and saved.multi_label)
  threshold = (threshold if threshold is not None else saved.threshold) if multi_label else None
  results = []
  for begin in range(0, len(texts), batch_size):
    inputs = {"text": tf.constant(list(texts[begin:begin + batch_size]))}
    if text_pairs is not None:
      inputs["text_b"] = tf.constant(list(text_pairs[begin:begin + batch_size]))
    outputs = signature(**inputs)
    logits = outputs["logits"]
    exits = [{"exit_iteration": int(e)} for e in outputs["exit_iteration"].numpy()] if (
        "exit_iteration" in outputs) else [{}] * int(logits.shape[0])
    num_labels = int(logits.shape[-1])
    if num_labels == 1:
      results.extend({"score": float(v), **e} for v, e in zip(logits.numpy()[:, 0], exits))
      continue
    names = list(labels) if labels is not None else (
        list(saved.labels) if saved and saved.labels else [f"LABEL_{i}" for i in range(num_labels)])
    if len(names) != num_labels:
      raise ValueError(f"{len(names)} label names for a classifier with {num_labels} outputs ({folder}).")
    probs = (tf.sigmoid(logits) if multi_label else tf.nn.softmax(logits, axis=-1)).numpy()
    results.extend({**r, **e} for r, e in zip(class_results(probs, names, threshold), exits))
  return results


def fill_mask_saved_model(saved_model_dir, text: Union[str, Sequence[str]], top_k: int = 5,
                          tokenizer: Optional[FullTokenizer] = None, batch_size: int = 16):
  """`fill_mask` answered by a pretrainer SavedModel of `export_saved_model` (tokenized in-graph; its folder, or a
  `LoadedSavedModel` of it, which answers without reloading).

  Same return format as `fill_mask`. `top_k` is limited by the export's `--top_k`; the spm model for the token
  strings comes from the SavedModel's `tokenization_info` asset (or `tokenizer`, one built from it). `batch_size`:
  texts per `serve_text` call, as `fill_mask` runs a directory (all texts in one call could exhaust memory).
  """
  check_top_k(top_k)
  check_batch_size(batch_size)
  if isinstance(saved_model_dir, LoadedSavedModel):
    saved_model_dir, loaded = saved_model_dir.folder, saved_model_dir.loaded
  else:
    loaded = tf.saved_model.load(saved_model_dir)
  if "serve_text" not in loaded.signatures or "mlm_top_k_ids" not in loaded.signatures["serve_text"].structured_outputs:
    raise ValueError(f"{saved_model_dir}: not a pretrainer SavedModel with text signatures "
                     "(export it with --head=pretrainer from a directory holding spiece.model).")
  tokenizer = tokenizer or saved_model_tokenizer(loaded.signatures)[0]
  texts = as_list(text)
  available = loaded.signatures["serve_text"].structured_outputs["mlm_top_k_ids"].shape[-1]
  if available is not None and top_k > available:
    raise ValueError(f"top_k={top_k} but {saved_model_dir} was exported with --top_k={available}.")
  if not texts:
    return []
  chunks = [{k: v.numpy() for k, v in loaded.signatures["serve_text"](
      text=tf.constant(texts[begin:begin + batch_size], tf.string)).items()}
            for begin in range(0, len(texts), batch_size)]
  # (Every call's outputs have the export's fixed widths: --seq_length, --max_predictions_per_seq, --top_k.)
  out = {k: np.concatenate([c[k] for c in chunks], axis=0) for k in chunks[0]}
  check_masks_answered(saved_model_dir, texts, tokenizer, out)  # (none dropped past the export's limits)
  results = []
  for b, t in enumerate(texts):
    n_masks = int(out["masked_lm_weights"][b].sum())
    if n_masks == 0:
      raise ValueError(f"fill_mask: no [MASK] token within the exported sequence length in text {t!r}.")
    ids = [int(x) for x in out["input_word_ids"][b][:int(out["input_mask"][b].sum())]]
    per_mask = []
    for m in range(n_masks):
      position = int(out["masked_lm_positions"][b, m])
      preds = []
      for j in range(top_k):
        token = int(out["mlm_top_k_ids"][b, m, j])
        filled = list(ids)
        filled[position] = token
        preds.append({"sequence": decode_ids(tokenizer, filled, skip_special_tokens=n_masks == 1),
                      "score": float(out["mlm_top_k_probabilities"][b, m, j]), "token": token,
                      "token_str": token_str(tokenizer, token)})
      per_mask.append(preds)
    results.append(per_mask[0] if n_masks == 1 else per_mask)
  return results[0] if isinstance(text, (str, bytes)) else results
