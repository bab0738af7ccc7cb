"""Text-in predictors for the fine-tuned heads: question answering, multiple choice, token classification.

  from official_albert import pipelines
  pipelines.question_answering("/tmp/albert_squad", "Who wrote it?", "It was written by Ann in 1990.")
  # {'answer': 'Ann', 'score': 0.93, 'start': 18, 'end': 21}
  pipelines.multiple_choice("/tmp/albert_race", "The cat sat on the mat.", "Where did the cat sit?",
                            ["on the mat", "in a tree", "on a car", "in a box"])
  # {'label': 0, 'choice': 'on the mat', 'scores': [0.91, 0.03, 0.04, 0.02]}
  pipelines.token_classification("/tmp/albert_ner", "Ann lives in Paris")
  # [{'word': 'Ann', 'start': 0, 'end': 3, 'label': 'B-PER', 'score': 0.98}, ...]

Each accepts, like the pipelines of `serving.pipelines`, a model directory (native, HF or original release, loaded
with `checkpoints.loading.load_model`), a built model together with `tokenizer` (a `FullTokenizer`), or an export
folder of the matching head (`export_saved_model --format=openvino`, a SavedModel exported with its spiece.model —
run on ids by `serving.saved_model_runtime` —, and for multiple choice LiteRT); TF models and export folders give the
same structure. The text is prepared by the same code as the fine-tuning records, so a prediction sees exactly what
training and evaluation saw:

- question answering: the SQuAD windows of `data.squad_features` (doc_stride windows, max-context owners, p_mask)
  and the reference post-processing of `data.squad_postprocess` (top-n starts × ends, the start token's max-context
  window, start ≤ end, max_answer_length, n-best softmax); answers carry character offsets into the original context.
- multiple choice: RACE's packing (`tokenization.choices`: the option fills a "_" blank or follows the question).
- token classification: each whitespace word tokenized on its own, its label read at its first piece; a text
  longer than seq_length is run in sub-sentences split at word boundaries (`tokenization.alignment.align_words` /
  `sub_sentences`, as `tasks.text` builds its records), so every word is labelled.

Long because: the three heads' predictors share how a model, a directory or an export folder is resolved and how
the defaults are read from the run that wrote it; split per head, each would repeat that resolution.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from official_albert import model_directory as md
from official_albert.checkpoints import native
from official_albert.data import squad_features
from official_albert.data import squad_postprocess
from official_albert.serving.graph_call import graph_call
from official_albert.serving.pipeline_inputs import check_batch_size
from official_albert.serving.pipeline_inputs import default_seq_length
from official_albert.serving.pipeline_inputs import fit_seq_length
from official_albert.serving.pipeline_inputs import pads_to_cap
from official_albert.serving.pipeline_inputs import recorded_qa_length
from official_albert.serving.pipelines import as_list
from official_albert.serving.pipelines import check_vocab
from official_albert.serving.pipelines import is_export_folder
from official_albert.serving.pipelines import is_saved_model
from official_albert.serving.pipelines import resolve_model
from official_albert.serving.qa_settings import resolved_qa_settings
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids
from official_albert.tokenization.alignment import align_words
from official_albert.tokenization.alignment import sub_sentences
from official_albert.tokenization.alignment import unk_id
from official_albert.tokenization.alignment import whitespace_words
from official_albert.tokenization.choices import fit_qa_length
from official_albert.tokenization.choices import pack_choices

logger = logging.getLogger(__name__)

_QA_HEADS = ("span", "squad_v2")


def _run(model, arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """One forward pass; numpy in (an OpenVINO folder) or tensors in (a Keras model), numpy out."""
  feed = arrays if is_export_folder(model) else {k: tf.constant(v) for k, v in arrays.items()}
  return {k: np.asarray(v) for k, v in graph_call(model)(feed).items()}


def _softmax(logits: np.ndarray) -> np.ndarray:
  """Softmax over the last axis, in float64 (the same numbers from a float32 TF model and a bf16 OpenVINO IR)."""
  logits = np.asarray(logits, np.float64)
  probs = np.exp(logits - logits.max(-1, keepdims=True))
  return probs / probs.sum(-1, keepdims=True)


def _check_model(model, tokenizer: FullTokenizer, seq_length: int, purpose: str) -> None:
  """Vocabulary size and sequence length against the model's config (a stub model without one is not checked)."""
  config = getattr(model, "config", None)
  if config is None:
    return
  check_vocab(model, tokenizer)
  if seq_length > config.max_position_embeddings:
    raise ValueError(f"{purpose}: max_seq_length={seq_length} exceeds the model's max_position_embeddings "
                     f"({config.max_position_embeddings}); pass max_seq_length<={config.max_position_embeddings}.")


# --------------------------------------------------------------------------------------------- question answering
@dataclasses.dataclass
class _Question:
  """A question + context in the attributes `squad_features.convert_examples_to_features` reads (no answer)."""
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: str = ""
  start_char: int = -1
  is_impossible: bool = False


def qa_head_of_dir(model_dir: str) -> str:
  """"squad_v2" when the directory's checkpoint holds the original v2 head, else "span" (HF has no v2 head)."""
  fmt = md.detect_format(model_dir)
  if fmt == "native":
    return "squad_v2" if native.has_submodule(model_dir, "squad_head") else "span"
  if fmt == "tf1":
    names = [n for n, _ in tf.train.list_variables(md.resolve_checkpoint(model_dir))]
    return "squad_v2" if any(n.startswith(("start_logits/", "answer_class/")) for n in names) else "span"
  return "span"


def _qa_pairs(question, context):
  """(questions, contexts, single) with one side broadcast when it is a single string."""
  single = isinstance(question, str) and isinstance(context, str)
  questions, contexts = as_list(question), as_list(context)
  if len(questions) == 1 and len(contexts) > 1:
    questions = questions * len(contexts)
  elif len(contexts) == 1 and len(questions) > 1:
    contexts = contexts * len(questions)
  if len(questions) != len(contexts):
    raise ValueError(f"question_answering: {len(questions)} questions but {len(contexts)} contexts.")
  return questions, contexts, single


def _answer(entry: Dict[str, object]) -> Dict[str, object]:
  """An n-best entry as the pipeline's answer; no valid span (reference: "empty" / "") → "" at 0 with score 0."""
  if "start" not in entry:
    return {"answer": "", "score": 0.0, "start": 0, "end": 0}
  return {"answer": entry["text"], "score": float(entry["probability"]), "start": int(entry["start"]),
          "end": int(entry["end"])}


def question_answering(model_or_dir, question: Union[str, Sequence[str]], context: Union[str, Sequence[str]],
                       top_k: int = 1, max_seq_length: Optional[int] = None, doc_stride: Optional[int] = None,
                       max_query_length: Optional[int] = None,
                       max_answer_length: Optional[int] = None, n_best_size: Optional[int] = None,
                       version_2: Optional[bool] = None, null_score_threshold: Optional[float] = None,
                       tokenizer: Optional[FullTokenizer] = None,
                       head: Optional[str] = None, do_lower_case: Optional[bool] = None, mode: str = "hf",
                       batch_size: int = 8):
  """Extractive question answering with a SQuAD head (like HF's question-answering pipeline).

  Args:
    model_or_dir: a directory of a fine-tuned `span` (v1) or `squad_v2` model (the head is read from the
      checkpoint; HF directories are span models), a model object (then pass `tokenizer`) or an OpenVINO export
      folder of either head.
    question, context: strings, or lists of equal length (a single string is paired with every entry of the other).
    top_k: answers per question.
    max_seq_length, doc_stride, max_query_length: the SQuAD windows (reference 384 / 128 / 64). Default: the run's
      (a trainer directory's params.yaml: what its --mode=predict uses; an export's record of them,
      `qa_settings.served_qa_settings`), else 384 at most the model's max_position_embeddings with 128 / 64 where
      they fit (`squad_features.fit_windows`: a model of 64 positions gets 21 / 10, not a refusal). A
      max_seq_length above the model's positions is cut there, warned.
    max_answer_length, n_best_size: post-processing (reference 30 / 20; default: the run's, as the windows); each at
      least 1.
    version_2: include the null answer ("" at 0, 0). None: only for the squad_v2 head. The squad_v2 head's null
      score is the minimum `cls_logits` over the windows and its score sigmoid(null score) (reference §5.2). A span
      head with version_2=True scores the null answer BERT-style: the minimum [CLS] start + end logit over the
      windows minus the best span's, and its score is its share of a softmax over it and the n-best scores.
    null_score_threshold: the null answer comes first when its null score exceeds this (the reference's fixed-
      threshold protocol; default: the run's, else 0.0); otherwise it ranks after the n-best spans.
    head: "span" or "squad_v2" to skip reading the head from a directory's checkpoint.

  Returns:
    Per question `{"answer", "score", "start", "end"}` with `context[start:end] == answer` (character offsets into
    the original context; `score` = the reference's n-best probability); a list of the `top_k` best for top_k > 1.
    One question gives that result, a list of questions a list of them. No valid span gives "" at 0 with score 0
    (the reference writes "empty" for v1).
  """
  _check_qa_options(top_k, n_best_size, max_answer_length, head, batch_size)
  if not isinstance(model_or_dir, (str, os.PathLike)) or is_export_folder(model_or_dir) or is_saved_model(model_or_dir):
    model_type = (head,) if head else _QA_HEADS
  else:
    model_type = head or qa_head_of_dir(model_or_dir)
  model, tokenizer, model_dir = resolve_model(model_or_dir, model_type, tokenizer, do_lower_case, mode,
                                              "question_answering")
  max_seq_length = fit_seq_length(max_seq_length, model, model_dir, squad_features.REFERENCE_SEQ_LENGTH)
  settings = resolved_qa_settings(model, model_dir, max_seq_length, doc_stride=doc_stride,
                                  max_query_length=max_query_length, max_answer_length=max_answer_length,
                                  n_best_size=n_best_size, null_score_threshold=null_score_threshold)
  _check_model(model, tokenizer, max_seq_length, "question_answering")
  questions, contexts, single = _qa_pairs(question, context)
  examples = [_Question(str(i), q, c) for i, (q, c) in enumerate(zip(questions, contexts))]
  features, _ = squad_features.convert_examples_to_features(examples, tokenizer, max_seq_length,
                                                            settings["doc_stride"], settings["max_query_length"])
  results: Dict[int, Dict[str, np.ndarray]] = {}
  for start in range(0, len(features), batch_size):
    batch = features[start:start + batch_size]
    arrays = squad_features.features_to_arrays(batch, is_training=False)
    out = _run(model, {k: v for k, v in arrays.items() if k != "unique_ids"})
    for i, f in enumerate(batch):
      results[f.unique_id] = {k: v[i] for k, v in out.items()}
  first = next(iter(results.values()), None)
  if first is not None:
    is_v2_head = "cls_logits" in first
  else:  # every example failed to align (counted and logged): the head from the model itself
    is_v2_head = getattr(model, "head", None) == "squad_v2" or hasattr(model, "start_n_top")
  with_null = is_v2_head if version_2 is None else bool(version_2)
  n_best, max_answer_length = max(settings["n_best_size"], top_k), settings["max_answer_length"]
  if is_v2_head:
    start_n_top = len(first["start_top_index"]) if first is not None else 1
    end_n_top = len(first["end_top_index"]) // start_n_top if first is not None else 1
    _, nbest, null_odds = squad_postprocess.postprocess_v2(examples, features, results, n_best, max_answer_length,
                                                           start_n_top, end_n_top, char_offsets=True)
  else:
    if first is not None and not {"start_logits", "end_logits"} <= set(first):
      raise ValueError(f"question_answering: the model returned {sorted(first)}, not a SQuAD span head's "
                       "start_logits / end_logits (or the squad_v2 head's outputs).")
    _, nbest = squad_postprocess.postprocess_v1(examples, features, results, n_best, max_answer_length,
                                                char_offsets=True)
    null_odds = _span_null_scores(examples, features, results, nbest) if with_null else None
  answers = []
  for example in examples:
    ranked = [a for a in map(_answer, nbest[example.qas_id]) if a["answer"] or not with_null]  # (one "": the null)
    if with_null:
      null = _null_answer(null_odds[example.qas_id], nbest[example.qas_id], is_v2_head)
      ranked = [null] + ranked if null_odds[example.qas_id] > settings["null_score_threshold"] else ranked + [null]
    answers.append(ranked[0] if top_k == 1 else ranked[:top_k])
  return answers[0] if single else answers


def _check_qa_options(top_k: int, n_best_size: Optional[int], max_answer_length: Optional[int], head: Optional[str],
                      batch_size: int) -> None:
  """Refused before a model loads: n_best_size / max_answer_length < 1 let no span through (every answer "")."""
  if top_k < 1:
    raise ValueError(f"top_k must be >= 1, got {top_k}.")
  for name, value, reference in (("n_best_size", n_best_size, 20), ("max_answer_length", max_answer_length, 30)):
    if value is not None and value < 1:
      raise ValueError(f"question_answering: {name}={value}; give a whole number >= 1 (reference: {reference}).")
  check_batch_size(batch_size)
  if head is not None and head not in _QA_HEADS:
    raise ValueError(f"head={head!r} is not one of {_QA_HEADS}.")


def _span_null_scores(examples, features, results, nbest) -> Dict[str, float]:
  """BERT-style null score of a span head: min over windows of the [CLS] start + end logit, minus the best span's
  start + end logit (an example without a valid span keeps the min [CLS] score; one without windows gets 1e6)."""
  null = {e.qas_id: squad_postprocess.NULL_FALLBACK_SCORE for e in examples}
  for f in features:
    r = results[f.unique_id]
    qid = examples[f.example_index].qas_id
    null[qid] = min(null[qid], float(r["start_logits"][0] + r["end_logits"][0]))
  for qid, entries in nbest.items():
    if "start" in entries[0] and null[qid] != squad_postprocess.NULL_FALLBACK_SCORE:
      null[qid] -= entries[0]["start_logit"] + entries[0]["end_logit"]
  return null


def _null_answer(null_score: float, entries, is_v2_head: bool) -> Dict[str, object]:
  if is_v2_head:
    score = 1.0 / (1.0 + math.exp(-max(min(null_score, 700.0), -700.0)))
  else:
    best = entries[0]["start_logit"] + entries[0]["end_logit"] if "start" in entries[0] else 0.0
    spans = [e["start_logit"] + e["end_logit"] for e in entries if "start" in e]
    score = squad_postprocess.softmax([null_score + best] + spans)[0]
  return {"answer": "", "score": float(score), "start": 0, "end": 0}


# ------------------------------------------------------------------------------------------------ multiple choice
def multiple_choice(model_or_dir, context: Union[str, Sequence[str]], question: Union[str, Sequence[str]],
                    choices: Sequence, max_seq_length: Optional[int] = None, max_qa_length: Optional[int] = None,
                    tokenizer: Optional[FullTokenizer] = None, do_lower_case: Optional[bool] = None, mode: str = "hf",
                    batch_size: int = 8):
  """Picks the choice that answers `question` about `context` (RACE-style multiple choice).

  Args:
    model_or_dir: a fine-tuned multiple_choice directory (built with len(choices) choices), a model object (then pass
      `tokenizer`) or an OpenVINO export folder of a multiple_choice model (its choice count is fixed at export).
    context, question: the passage and the question (a "_" blank is filled by each choice, else the choice follows
      the question, as RACE); strings, or lists of equal length.
    choices: the option strings, a list (a list of lists for a list of questions; a string in place of a list is
      refused, naming it, rather than read as one choice per character).
    max_seq_length, max_qa_length: RACE's packing (reference 512 / 128; the article is cut from the end). Default:
      as `classify` (a trainer directory's --mode=predict length, else an export folder's, else the model's
      max_position_embeddings: a model extended to 1,024 positions reads 1,024 pieces of the article) and the
      directory's recorded max_qa_length, else 128 where it fits (`choices.fit_qa_length`: 32 at 128 positions). A
      max_seq_length above the model's positions is cut there, warned.

  Returns:
    Per question `{"label": index of the best choice, "choice": its text, "scores": softmax over the choices}`; a
    list of them for a list of questions.
  """
  check_batch_size(batch_size)
  single = isinstance(question, str)
  if single:
    contexts, questions, all_choices = [context], [question], [list(_choice_list(choices, "choices"))]
  else:
    contexts, questions = as_list(context), list(question)
    all_choices = [list(_choice_list(c, f"choices[{i}]")) for i, c in enumerate(_choice_list(choices, "choices"))]
    if len(contexts) == 1:
      contexts = contexts * len(questions)
  if not len(contexts) == len(questions) == len(all_choices):
    raise ValueError(f"multiple_choice: {len(contexts)} contexts, {len(questions)} questions and "
                     f"{len(all_choices)} choice lists; pass one of each per question.")
  counts = sorted({len(c) for c in all_choices})
  if len(counts) != 1 or counts[0] < 2 or any(not isinstance(x, str) for c in all_choices for x in c):
    raise ValueError(f"multiple_choice: every question needs the same number (>= 2) of choice strings; got "
                     f"{[len(c) for c in all_choices]}.")
  model, tokenizer, model_dir = resolve_model(model_or_dir, "multiple_choice", tokenizer, do_lower_case, mode,
                                              "multiple_choice", {"num_choices": counts[0]})
  max_seq_length = fit_seq_length(max_seq_length, model, model_dir)
  max_qa_length = fit_qa_length(max_seq_length, max_qa_length if max_qa_length is not None else
                                recorded_qa_length(model, model_dir))
  _check_model(model, tokenizer, max_seq_length, "multiple_choice")
  expected = getattr(model, "num_choices", None)
  if expected is not None and int(expected) != counts[0]:
    raise ValueError(f"multiple_choice: {counts[0]} choices per question, but the model takes {expected} (fixed "
                     "when it was built or exported); pass that many choices.")
  results = []
  for start in range(0, len(questions), batch_size):
    rows = [pack_choices(tokenizer, c, q, opts, max_seq_length, max_qa_length) for c, q, opts in
            zip(contexts[start:start + batch_size], questions[start:start + batch_size],
                all_choices[start:start + batch_size])]
    arrays = {k: np.asarray([[r[k] for r in row] for row in rows], np.int32) for k in rows[0][0]}
    # Cut the padding ([CLS]'s logit does not depend on it), except under block_sparse attention, whose pattern
    # follows the padded length (the answer would depend on the batch-mates): those run at max_seq_length.
    length = max_seq_length if pads_to_cap(model) else int(arrays["input_mask"].sum(-1).max())
    probs = _softmax(_run(model, {k: v[..., :length] for k, v in arrays.items()})["logits"])
    for row, opts in zip(probs, all_choices[start:start + batch_size]):
      best = int(np.argmax(row))
      results.append({"label": best, "choice": opts[best], "scores": [float(p) for p in row]})
  return results[0] if single else results


def _choice_list(choices, name: str):
  """`choices`; a string (read as one choice per character: "ab" → "a", "b") is a ValueError naming `name`."""
  if isinstance(choices, (str, bytes)):
    raise ValueError(f"multiple_choice: {name} is the string {choices[:40]!r}, not a list; pass the choices as a list "
                     "of strings (a list of such lists for a list of questions).")
  return choices


# -------------------------------------------------------------------------------------------- token classification
def token_classification(model_or_dir, texts: Union[str, Sequence[str]], seq_length: Optional[int] = None,
                         labels: Optional[Sequence[str]] = None, tokenizer: Optional[FullTokenizer] = None,
                         do_lower_case: Optional[bool] = None, mode: str = "hf", batch_size: int = 16):
  """A label per whitespace word (NER, POS, ...) with a fine-tuned token_classifier.

  Args:
    model_or_dir: a token_classifier directory (labels from its labels.json, else HF `id2label` / labels.txt, else
      LABEL_i), a model object (then pass `tokenizer`) or an OpenVINO export folder of a token_classifier.
    texts: one text or a list; words are split on whitespace.
    seq_length: longest packed sequence; a text of more pieces is run in several sequences split at word
      boundaries (as the training records; counted and logged). Default: as `classify` (a trainer directory's
      --mode=predict length, else the model's positions).
    labels: label names (default: as above).

  Returns:
    Per text a list with one `{"word", "start", "end", "label", "score"}` per word (`text[start:end] == word`;
    `score` = the label's softmax probability at the word's first piece). Every word is labelled: one that
    tokenizes to no piece is read as `<unk>`, as in the records. One text gives its list, a list of texts a list of
    lists.
  """
  check_batch_size(batch_size)
  model, tokenizer, model_dir = resolve_model(model_or_dir, "token_classifier", tokenizer, do_lower_case, mode,
                                              "token_classification")
  seq_length = seq_length or default_seq_length(model, model_dir)
  _check_model(model, tokenizer, seq_length, "token_classification")
  names = token_labels(model, model_dir, labels)
  texts_list = as_list(texts)
  words = [whitespace_words(t) for t in texts_list]
  flat = [w for text_words in words for w, _, _ in text_words]
  ids = iter(tokenizer.encode_ids_batch(flat) if flat else [])
  pieces = [[next(ids) for _ in text_words] for text_words in words]
  unk = unk_id(tokenizer)
  # One row per sub-sentence: (text, its first word, piece ids, first piece of each of its words).
  rows = [(t, start) + align_words(pieces[t][start:end], seq_length, unk)
          for t in range(len(texts_list)) for start, end in sub_sentences(pieces[t], seq_length, unk)]
  results = [[{"word": w, "start": s, "end": e, "label": None, "score": None} for w, s, e in text_words]
             for text_words in words]
  for begin in range(0, len(rows), batch_size):
    batch = rows[begin:begin + batch_size]
    # Padded to the batch's longest row; block_sparse models to seq_length (`pads_to_cap`: their pattern follows
    # the padded length, so a text's labels would depend on its batch-mates).
    length = seq_length if pads_to_cap(model) else max(len(row[2]) for row in batch) + 2
    packed = [pack_ids(row[2], None, length) for row in batch]
    probs = _softmax(_run(model, {k: np.asarray([r[k] for r in packed], np.int32) for k in packed[0]})["logits"])
    if names is None:
      names = [f"LABEL_{i}" for i in range(probs.shape[-1])]
    if len(names) != probs.shape[-1]:
      raise ValueError(f"token_classification: {len(names)} label names for a model with {probs.shape[-1]} "
                       "outputs.")
    for b, (t, start, _, first) in enumerate(batch):
      for i, position in enumerate(first):
        if position is not None:
          best = int(np.argmax(probs[b, position]))
          results[t][start + i].update(label=names[best], score=float(probs[b, position, best]))
  split = len(rows) - len(texts_list)
  if split:
    logger.info("token_classification: texts longer than seq_length=%d pieces were run in %d more sequences, split "
                "at word boundaries.", seq_length, split)
  return results[0] if isinstance(texts, str) else results


def token_labels(model, model_dir: Optional[str], labels: Optional[Sequence[str]]) -> Optional[List[str]]:
  """Names: `labels`, an OpenVINO folder's labels.json, a directory's labels.json / id2label / labels.txt."""
  if labels is not None:
    return list(labels)
  if getattr(model, "labels", None) is not None:
    return list(model.labels)
  num_labels = getattr(model, "num_labels", None)
  if model_dir and num_labels:
    return md.label_names(model_dir, int(num_labels))
  return None
