"""On-the-fly ALBERT pretraining examples: n-gram MLM + SOP drawn inside `tf.data` from a tokenized corpus.

The static path (`data_prep.create_pretraining_data`) writes `dupe_factor` masked copies of the corpus; this one
reads the corpus once tokenized (`data_prep.tokenize_corpus`: one record per document with its piece ids, word-start
flags and sentence lengths) and draws segments, SOP pairs and masks in the graph, fresh every epoch. The examples
have exactly the static reader's features (names, dtypes, shapes: `input_pipeline.pretraining_dataset`), so the
task and the model do not know which path fed them. Selected by `task.train_data.dynamic_masking=true`.

Algorithm (the same distributions as `data_prep.pretraining_instances`, reference §3.2-3.3, computed with TF ops):
1. Per document: target length = max_seq_length - 3, or with probability `short_seq_prob` uniform in
   [2, max_seq_length - 3]; sentences are packed greedily into chunks of at least that many tokens (the last chunk
   takes the rest); A = the first k sentences (k uniform in [1, n-1]), B = the rest; a one-sentence chunk is split
   at a uniformly chosen inner word start (any inner position if it has none; skipped below 2 tokens): in-document
   SOP negatives, the static tool's default. A and B are swapped with p = 0.5 (label 1) and truncated longest-first
   with Binomial(k, 1/2) tokens from the front.
2. Per example (vectorised over blocks of examples): whole-word groups (a piece whose word-start flag is 0 joins the
   previous group; [CLS]/[SEP] are skipped; the first candidate always opens a group), budget
   min(max_predictions_per_seq, max(1, round(0.15 · length))), the reference walk over a uniform permutation of the
   groups with n ~ p(n) ∝ 1/n (shortened to fit the budget; overlapping picks skipped), 80% [MASK] / 10% kept /
   10% a uniform random id.

Randomness: only stateless ops (`tf.random.stateless_*`) keyed by (seed, epoch, document index; with shards of
several tokenized corpora, whose document indices all start at 0, also the corpus: `corpus_ids`), so an example is a
pure function of the corpus, the seed and the epoch: the stream is deterministic, independent of parallelism and
of how examples are blocked, and every epoch gets new segments and masks. Order: per epoch the file order is a
stateless permutation; documents pass a seeded shuffle buffer, examples another one (training); evaluation reads
epoch 0 once in file order.

Sharding: with an `InputContext`, each input pipeline reads disjoint documents (whole files when there are at
least as many files as pipelines, else documents by `doc_index mod num_pipelines`). Resume: the dataset uses only
checkpointable tf.data ops, so the trainer's iterator checkpoint (`runtime.input_resume=iterator`) restores the
exact position; `runtime.input_resume=skip` works too (the stream is a deterministic function of the seed).

Layering: this module lives in `tasks/` (it needs nothing from `data_prep`, which tasks may not import; it reads
the tokenized shards' `.manifest.json` sidecars for the vocabulary facts) rather than `official_albert/data/`
because it implements the pretraining task's data recipe, not a generic reader.

Long because: one data recipe run in the graph, in its order (document → segments and SOP pair → n-gram masks →
dataset → the statistics that check it against the static path); each step is the graph twin of a function of
data_prep/pretraining_instances.py, and split apart the pair could no longer be read side by side.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.data import input_pipeline
from official_albert.data.input_pipeline import no_autograph as plain
from official_albert.tokenization import CLS
from official_albert.tokenization import MASK
from official_albert.tokenization import SEP
from official_albert.tokenization import SPECIAL_TOKEN_IDS
from tasks.masking_options import MaskingOptions
from tasks.masking_options import ngram_cdf
from tasks.token_manifests import MANIFEST_SUFFIX
from tasks.token_manifests import read_vocab_facts

logger = logging.getLogger(__name__)
# `data_prep.tokenize_corpus.STATS_NAME`: written last, by a finished run only (tasks do not import data_prep).
TOKENS_STATS_NAME = "tokens.stats.json"

_SEED_TAG = 0x414C4254  # "ALBT": separates these streams from other users of the same seed
_TAG_TARGET, _TAG_CHUNK, _TAG_TRUNC, _TAG_MASK, _TAG_RANDOM_ID, _TAG_FILES = range(6)
DOCUMENT_FEATURES = {
    "doc_index": tf.io.FixedLenFeature([1], tf.int64),
    "token_ids": tf.io.RaggedFeature(tf.int64),
    "word_start": tf.io.RaggedFeature(tf.int64),
    "sentence_lengths": tf.io.RaggedFeature(tf.int64),
}


@dataclasses.dataclass(frozen=True)
class DynamicOptions(MaskingOptions):
  """The reference's masking / packing settings (`MaskingOptions`, the n-gram options and the long-line policy, named
  as the pretraining task's config names them) plus the vocabulary facts of the tokenized corpus."""
  max_ngram: int = 3
  favor_shorter_ngram: bool = True
  long_line_policy: str = "split"
  vocab_size: int = 30000
  cls_id: int = SPECIAL_TOKEN_IDS[CLS]
  sep_id: int = SPECIAL_TOKEN_IDS[SEP]
  mask_id: int = SPECIAL_TOKEN_IDS[MASK]

  def validate(self) -> None:
    self.check_options(self.max_ngram, "max_ngram")
    if self.max_predictions_per_seq > self.max_seq_length:
      raise ValueError(f"max_predictions_per_seq must be in [1, seq_length], got {self.max_predictions_per_seq}.")
    if self.long_line_policy not in ("split", "truncate", "keep"):
      raise ValueError(f"long_line_policy must be split, truncate or keep, got {self.long_line_policy!r}.")


def _fold(key: tf.Tensor, data) -> tf.Tensor:
  return tf.random.experimental.stateless_fold_in(key, tf.cast(data, tf.int64))


def document_key(seed: int, epoch: tf.Tensor, doc_index: tf.Tensor, corpus_id: Optional[tf.Tensor] = None
                 ) -> tf.Tensor:
  """The [2] stateless seed of one (seed, epoch, document[, corpus]): doc_index counts from 0 in every tokenized
  corpus, so several read together fold in their `corpus_ids`; one corpus keeps the key (and stream) it always had."""
  key = _fold(_fold(tf.constant([seed, _SEED_TAG], tf.int64), epoch), doc_index)
  return key if corpus_id is None else _fold(key, corpus_id)


def corpus_ids(files: Sequence[str]) -> Optional[List[int]]:
  """Per file, the id of its tokenized corpus (folder: one `tokenize_corpus` run); None for one folder.

  The id digests the manifests' `fingerprint`s of the shards read from the folder (text, tokenizer settings, model:
  the same across re-runs and moves); a copy of another folder's corpus also folds in its rank, so it draws anew.
  """
  folder_of = {f: os.path.dirname(input_pipeline.path_key(f)) for f in files}  # one folder spelled two ways is one
  by_folder: Dict[str, List[str]] = {}
  for f in files:
    by_folder.setdefault(folder_of[f], []).append(f)
  if len(by_folder) < 2:
    return None
  ids: Dict[str, int] = {}
  seen: Dict[bytes, int] = {}
  for folder in sorted(by_folder):
    digest = hashlib.sha256()
    for path in sorted(by_folder[folder]):
      manifest = file_io.read_json(path + MANIFEST_SUFFIX)
      digest.update(f"{manifest.get('fingerprint', manifest.get('sha256', ''))}\n".encode())
    value = digest.digest()
    copies = seen.get(value, 0)
    seen[value] = copies + 1
    if copies:
      value = hashlib.sha256(value + f"#{copies}".encode()).digest()
    ids[folder] = int.from_bytes(value[:8], "big") >> 1  # a non-negative int64
  return [ids[folder_of[f]] for f in files]


def parse_document(record: tf.Tensor, corpus_id: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
  """One document record (and, with several corpora, its corpus' id under `corpus_id`)."""
  parsed = tf.io.parse_single_example(record, DOCUMENT_FEATURES)
  doc = {"doc_index": parsed["doc_index"][0], "token_ids": tf.cast(parsed["token_ids"], tf.int32),
         "word_start": tf.cast(parsed["word_start"], tf.bool),
         "sentence_lengths": tf.cast(parsed["sentence_lengths"], tf.int32)}
  if corpus_id is not None:
    doc["corpus_id"] = corpus_id
  return doc


def _chunk_bounds(starts_excl: tf.Tensor, ends_incl: tf.Tensor, target: tf.Tensor):
  """Greedy packing: chunk i is sentences [s_i, e_i], e_i the first with ≥ target tokens since s_i (or the last)."""
  num = tf.size(ends_incl)

  def body(s, k, ta_s, ta_e):
    e = tf.minimum(tf.searchsorted(ends_incl, tf.reshape(starts_excl[s] + target, [1]), side="left")[0], num - 1)
    return e + 1, k + 1, ta_s.write(k, s), ta_e.write(k, e)

  # Two arrays, not one passed twice: eager TensorArrays are mutable, and the end writes overwrote the starts.
  ta_s, ta_e = (tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[]) for _ in range(2))
  _, _, ta_s, ta_e = tf.while_loop(lambda s, k, a, b: s < num, body, (tf.constant(0), tf.constant(0), ta_s, ta_e))
  return ta_s.stack(), ta_e.stack()


def _long_line_policy(ids: tf.Tensor, ws: tf.Tensor, slen: tf.Tensor, max_tokens: int, policy: str):
  """create_pretraining_data's --long_line_policy at this sequence length (the shards keep lines whole)."""
  if policy == "split":  # consecutive sentences of at most max_tokens: only the lengths change
    pieces = (slen + max_tokens - 1) // max_tokens
    sentence = tf.repeat(tf.range(tf.size(slen)), pieces)
    k = tf.range(tf.reduce_sum(pieces)) - tf.gather(tf.cumsum(pieces, exclusive=True), sentence)
    return ids, ws, tf.minimum(max_tokens, tf.gather(slen, sentence) - k * max_tokens)
  if policy == "truncate":
    sentence = tf.repeat(tf.range(tf.size(slen)), slen)
    keep = tf.range(tf.size(ids)) - tf.gather(tf.cumsum(slen, exclusive=True), sentence) < max_tokens
    return tf.boolean_mask(ids, keep), tf.boolean_mask(ws, keep), tf.minimum(slen, max_tokens)
  return ids, ws, slen


# Long because: the graph twin of data_prep/pretraining_instances.create_instances_from_document (chunks, segments A and
# B, the SOP swap, truncation), in the same order so that the two paths read side by side.
def document_instances(doc: Dict[str, tf.Tensor], epoch: tf.Tensor, seed: int, opts: DynamicOptions
                       ) -> Dict[str, tf.Tensor]:
  """One pass over one document → its K unmasked instances ([K, S] rows) and the draws their masking will use."""
  seq = opts.max_seq_length
  max_tokens = seq - 3
  ids, ws, slen = _long_line_policy(doc["token_ids"], doc["word_start"], doc["sentence_lengths"], max_tokens,
                                    opts.long_line_policy)
  key = document_key(seed, epoch, doc["doc_index"], doc.get("corpus_id"))
  ends = tf.cumsum(slen)
  starts = ends - slen
  u = tf.random.stateless_uniform([2], _fold(key, _TAG_TARGET), dtype=tf.float64)
  short = 2 + tf.cast(tf.floor(u[1] * (max_tokens - 1)), tf.int32)
  target = tf.where(u[0] < opts.short_seq_prob, short, max_tokens)
  s, e = _chunk_bounds(starts, ends, target)
  num_chunks = tf.size(s)
  num_sent = e - s + 1
  cs, ce = tf.gather(starts, s), tf.gather(ends, e)
  clen = ce - cs
  r = tf.random.stateless_uniform([num_chunks, 3], _fold(key, _TAG_CHUNK), dtype=tf.float64)
  # Several sentences: A = the first a_end of them, a_end uniform in [1, n - 1].
  a_end = 1 + tf.cast(tf.floor(r[:, 0] * tf.cast(num_sent - 1, tf.float64)), tf.int32)
  split_multi = tf.gather(starts, tf.minimum(s + a_end, tf.size(slen) - 1))
  # One sentence: split at a uniform inner word start (positions cs+1 .. ce-1), any inner position if none.
  wcum = tf.cumsum(tf.cast(ws, tf.int32))
  w_at_start = tf.gather(wcum, cs)
  inner_starts = tf.gather(wcum, tf.maximum(ce - 1, 0)) - w_at_start
  pick = tf.cast(tf.floor(r[:, 1] * tf.cast(inner_starts, tf.float64)), tf.int32)
  split_word = tf.searchsorted(wcum, w_at_start + pick + 1, side="left")
  split_any = cs + 1 + tf.cast(tf.floor(r[:, 1] * tf.cast(tf.maximum(clen - 1, 0), tf.float64)), tf.int32)
  split = tf.where(num_sent >= 2, split_multi, tf.where(inner_starts > 0, split_word, split_any))
  swap = r[:, 2] < 0.5
  a0, a1 = tf.where(swap, split, cs), tf.where(swap, ce, split)
  b0, b1 = tf.where(swap, cs, split), tf.where(swap, split, ce)
  # Longest-first truncation (B on a tie), each side's removed tokens Binomial(k, 1/2) from its front.
  la, lb = a1 - a0, b1 - b0
  over = la + lb > max_tokens
  new_a = tf.where(over, tf.minimum(la, tf.maximum(max_tokens - lb, (max_tokens + 1) // 2)), la)
  new_b = tf.where(over, max_tokens - new_a, lb)
  cuts = tf.stack([la - new_a, lb - new_b], axis=1)
  fronts = tf.random.stateless_binomial([num_chunks, 2], _fold(key, _TAG_TRUNC), counts=tf.cast(cuts, tf.float64),
                                        probs=tf.constant(0.5, tf.float64), output_dtype=tf.int32)
  a0, b0 = a0 + fronts[:, 0], b0 + fronts[:, 1]
  keep = (num_sent >= 2) | (clen >= 2)
  a0, b0, new_a, new_b = (tf.boolean_mask(t, keep) for t in (a0, b0, new_a, new_b))
  label = tf.boolean_mask(tf.cast(swap, tf.int32), keep)
  k = tf.size(a0)

  p = tf.range(seq)[None, :]
  la2, lb2 = new_a[:, None], new_b[:, None]
  in_a = (p >= 1) & (p <= la2)
  in_b = (p >= la2 + 2) & (p < la2 + lb2 + 2)
  body = in_a | in_b
  src = tf.where(in_a, a0[:, None] + p - 1, tf.where(in_b, b0[:, None] + p - la2 - 2, 0))
  is_sep = (p == la2 + 1) | (p == la2 + lb2 + 2)
  tokens = tf.where(p == 0, opts.cls_id, tf.where(is_sep, opts.sep_id, tf.where(body, tf.gather(ids, src), 0)))
  boundary = (p == 0) | is_sep | (body & tf.gather(ws, src))
  real = p < la2 + lb2 + 3
  return {
      "tokens": tokens, "token_boundary": boundary, "input_mask": real, "segment_ids": (p >= la2 + 2) & real,
      "length": new_a + new_b + 3, "next_sentence_labels": label,
      "doc_index": tf.fill([k], doc["doc_index"]), "epoch": tf.fill([k], tf.cast(epoch, tf.int64)),
      # Masking draws, made here so that they are keyed by the document: permutation keys, n-gram lengths and the
      # 80/10/10 choice per slot, and the random replacement ids.
      "uniforms": tf.random.stateless_uniform([k, 3, seq], _fold(key, _TAG_MASK)),
      "random_ids": tf.random.stateless_uniform([k, seq], _fold(key, _TAG_RANDOM_ID), minval=0,
                                                maxval=opts.vocab_size, dtype=tf.int32),
  }


# Long because: the graph twin of data_prep/pretraining_instances.create_masked_lm_predictions (the n-gram draw, the
# 80/10/10 replacement), in the same order so that the two paths read side by side.
def mask_block(rows: Dict[str, tf.Tensor], opts: DynamicOptions) -> Dict[str, tf.Tensor]:
  """The reference n-gram walk, vectorised over a block of rows [B, S] (see the module docstring, step 2)."""
  seq, preds, ngram = opts.max_seq_length, opts.max_predictions_per_seq, opts.max_ngram
  tokens, boundary, real = rows["tokens"], rows["token_boundary"], rows["input_mask"]
  uniforms = rows["uniforms"]
  p = tf.range(seq)[None, :]
  cand = real & (tokens != opts.cls_id) & (tokens != opts.sep_id)
  cand_i = tf.cast(cand, tf.int32)
  first = tf.argmax(cand_i, axis=1, output_type=tf.int32)
  opens = cand & (boundary | (p == first[:, None]))
  opens_i = tf.cast(opens, tf.int32)
  group = tf.cumsum(opens_i, axis=1) - 1
  num_groups = tf.reduce_sum(opens_i, axis=1)
  batch = tf.shape(tokens)[0]
  # bounds[b, g] = candidates in groups < g (= all candidates for g >= G); column `seq` of `sizes` takes the rest.
  cols = tf.where(cand, tf.maximum(group, 0), seq)
  segment = tf.range(batch)[:, None] * (seq + 1) + cols
  sizes = tf.reshape(tf.math.unsorted_segment_sum(cand_i, segment, batch * (seq + 1)), [batch, seq + 1])
  bounds = tf.concat([tf.zeros([batch, 1], tf.int32), tf.cumsum(sizes[:, :seq], axis=1)], axis=1)
  length = tf.cast(rows["length"], tf.float64)
  budget = tf.cast(tf.round(length * opts.masked_lm_prob), tf.int32)  # round half to even, as Python's round
  # At least one prediction per sequence, except at masked_lm_prob 0: none, as the static tool (one rule for both).
  budget = tf.minimum(preds, tf.maximum(0 if opts.masked_lm_prob == 0 else 1, budget))
  budget = tf.where(tf.reduce_sum(cand_i, axis=1) > 0, budget, 0)
  order = tf.argsort(tf.where(p < num_groups[:, None], uniforms[:, 0, :], 2.0), axis=1, stable=True)
  cdf = tf.constant(ngram_cdf(opts.max_ngram, opts.favor_shorter_ngram), tf.float32)
  drawn = tf.minimum(tf.reduce_sum(tf.cast(uniforms[:, 1, :, None] >= cdf, tf.int32), axis=-1) + 1, ngram)
  ks = tf.range(1, ngram + 1)[None, :]
  rows_index = tf.range(batch)[:, None]

  def active_rows(j, count):
    return (count < budget) & (j < num_groups)

  def body(j, covered, count):
    active = active_rows(j, count)
    g, n = order[:, j], drawn[:, j]
    start = tf.gather(bounds, g[:, None], batch_dims=1)[:, 0]
    ends = tf.minimum(g[:, None] + ks, num_groups[:, None])
    sizes_k = tf.gather(bounds, ends, batch_dims=1) - start[:, None]
    fits_k = (ks <= n[:, None]) & (count[:, None] + sizes_k <= budget[:, None])
    n_eff = tf.reduce_max(tf.where(fits_k, ks, 1), axis=1)  # shortened to the budget, as the reference walk
    end = tf.minimum(g + n_eff, num_groups)
    size = tf.gather(bounds, end[:, None], batch_dims=1)[:, 0] - start
    span = g[:, None] + ks - 1
    in_span = span < end[:, None]
    cells = tf.minimum(span, seq - 1)
    overlap = tf.reduce_any((tf.gather(covered, cells, batch_dims=1) > 0) & in_span, axis=1)
    accept = active & (count + size <= budget) & ~overlap
    # Only the <= max_ngram groups of this step are written (a scatter, not a pass over every group).
    index = tf.stack([tf.broadcast_to(rows_index, tf.shape(cells)), cells], axis=-1)
    covered = tf.tensor_scatter_nd_max(covered, index, tf.cast(accept[:, None] & in_span, tf.int32))
    return j + 1, covered, count + tf.where(accept, size, 0)

  _, covered, _ = tf.while_loop(
      lambda j, covered, count: (j < seq) & tf.reduce_any(active_rows(j, count)), body,
      (tf.constant(0), tf.zeros([batch, seq], tf.int32), tf.zeros([batch], tf.int32)))
  masked = cand & (tf.gather(covered, tf.maximum(group, 0), batch_dims=1) > 0)
  choice = uniforms[:, 2, :]
  replacement = tf.where(choice < 0.8, opts.mask_id, tf.where(choice < 0.9, tokens, rows["random_ids"]))
  input_ids = tf.where(masked, replacement, tokens)
  _, slots = tf.math.top_k(-tf.where(masked, p, seq + p), k=preds)  # masked positions ascending, then the rest
  valid = tf.gather(masked, slots, batch_dims=1)
  out = {
      "input_word_ids": input_ids,
      "input_mask": tf.cast(real, tf.int32),
      "input_type_ids": tf.cast(rows["segment_ids"], tf.int32),
      "masked_lm_positions": tf.where(valid, slots, 0),
      "masked_lm_ids": tf.where(valid, tf.gather(tokens, slots, batch_dims=1), 0),
      "masked_lm_weights": tf.cast(valid, tf.float32),
      "next_sentence_labels": rows["next_sentence_labels"][:, None],
      "token_boundary": tf.cast(boundary, tf.int32),
      "doc_index": rows["doc_index"], "epoch": rows["epoch"],
  }
  return out


MODEL_FEATURES = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions", "masked_lm_ids",
                  "masked_lm_weights", "next_sentence_labels")


# Long because: the tf.data pipeline in the order it runs (files, documents, instances, masks, batches, features); each
# stage is one call, and the function is their sequence.
def dynamic_pretraining_dataset(input_patterns: Union[str, Sequence[str]], seq_length: int,
                                max_predictions_per_seq: int, batch_size: int, is_training: bool,
                                input_context: Optional[tf.distribute.InputContext] = None,
                                seed: Optional[int] = None, shuffle_buffer_size: int = 1000,
                                masked_lm_prob: float = MaskingOptions.masked_lm_prob,
                                short_seq_prob: float = MaskingOptions.short_seq_prob, max_ngram: int = 3,
                                drop_remainder: bool = True, pad_to_multiple_of: int = 0,
                                document_shuffle_buffer_size: int = 1000, block_size: int = 64,
                                include_token_boundary: bool = False, include_document_index: bool = False,
                                cycle_length: int = 8) -> tf.data.Dataset:
  """Batched pretraining features (the static reader's names, dtypes and shapes) drawn from tokenized shards.

  Args:
    input_patterns: shards of `data_prep.tokenize_corpus` (`<dir>/tokens-*`; `.json` sidecars are skipped).
    seq_length, max_predictions_per_seq: the example layout (as the static records' flags).
    batch_size: per-pipeline batch size.
    is_training: endless epochs (new draws each), shuffled; else epoch 0 once, in file order.
    input_context: multi-pipeline sharding (disjoint documents per pipeline).
    seed: the key of every draw and shuffle (None = 0).
    shuffle_buffer_size: example shuffle buffer (training).
    masked_lm_prob, short_seq_prob, max_ngram: the reference instance options.
    drop_remainder: full batches only.
    pad_to_multiple_of: dynamic padding of each batch (`input_pipeline.trim_to_longest`).
    document_shuffle_buffer_size: document shuffle buffer (training).
    block_size: examples masked together (vectorisation only: the examples do not depend on it).
    include_token_boundary: also return `token_boundary` [B, S] (the static records' feature).
    include_document_index: also return `doc_index` and `epoch` [B] (inspection and tests).
    cycle_length: shards read concurrently (training).
  """
  files = input_pipeline.list_files(input_patterns)
  for folder in sorted({os.path.dirname(f) for f in files}):
    if not file_io.exists(os.path.join(folder, TOKENS_STATS_NAME)):
      logger.warning("%s has no %s: tokenize_corpus did not finish there (or was interrupted by a re-run), so its "
                     "shards may hold two corpora mixed; run tokenize_corpus again to the end.", folder,
                     TOKENS_STATS_NAME)
  facts = read_vocab_facts(files)
  num_documents, tokens = facts.pop("documents"), facts.pop("tokens")
  if tokens <= num_documents:  # no document of 2 tokens: no segment pair, and the endless epochs would never yield
    raise ValueError(f"{input_patterns}: {num_documents} documents of {tokens} tokens, none of 2 tokens or more, so no "
                     "example can be made (training would wait forever for a batch): tokenize longer documents.")
  opts = DynamicOptions(max_seq_length=seq_length, max_predictions_per_seq=max_predictions_per_seq,
                        masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob, max_ngram=max_ngram, **facts)
  opts.validate()
  seed = 0 if seed is None else int(seed)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  by_file = num_pipelines > 1 and len(files) >= num_pipelines
  corpora = corpus_ids(files)  # before the split by file, so that every pipeline gives a folder the same id
  if by_file:
    files = files[pipeline_id::num_pipelines]
    corpora = None if corpora is None else corpora[pipeline_id::num_pipelines]
  file_names = tf.constant(files, tf.string)
  num_files = len(files)

  # Every function mapped runs as written (`if`s on settings, explicit tf.while_loop): docs/design.md, "AutoGraph".
  def read(name, corpus=None):
    records = tf.data.TFRecordDataset(name, buffer_size=1 << 20)
    return records if corpus is None else records.map(plain(lambda r: (r, corpus)))

  def epoch_documents(epoch):
    # One corpus: the graph it always had (iterator checkpoints of earlier runs restore); several: (record, corpus).
    names = file_names if corpora is None else (file_names, tf.constant(corpora, tf.int64))
    if is_training:
      key = _fold(tf.constant([seed, _SEED_TAG + _TAG_FILES], tf.int64), epoch)
      order = tf.argsort(tf.random.stateless_uniform([num_files], key), stable=True)
      names = tf.nest.map_structure(lambda t: tf.gather(t, order), names)
    names = tf.data.Dataset.from_tensor_slices(names)
    if is_training:
      docs = names.interleave(plain(read), cycle_length=max(1, min(cycle_length, num_files)), block_length=1,
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    elif corpora is None:
      docs = tf.data.TFRecordDataset(names, buffer_size=1 << 20)
    else:
      docs = names.flat_map(plain(read))
    docs = docs.map(plain(parse_document))
    if num_pipelines > 1 and not by_file:
      docs = docs.filter(plain(lambda d: d["doc_index"] % num_pipelines == pipeline_id))
    return docs.map(plain(lambda d: (d, epoch)))

  epochs = tf.data.Dataset.range(1 << 62) if is_training else tf.data.Dataset.range(1)
  docs = epochs.flat_map(plain(epoch_documents))
  if is_training:
    # At most one epoch of documents in the buffer, so that epochs mix only at their seams.
    buffer = max(1, min(document_shuffle_buffer_size, num_documents // max(1, num_pipelines)))
    docs = docs.shuffle(buffer, seed=seed, reshuffle_each_iteration=False)
  rows = docs.map(plain(lambda d, e: document_instances(d, e, seed, opts)), num_parallel_calls=tf.data.AUTOTUNE,
                  deterministic=True).unbatch()
  rows = rows.batch(block_size).map(plain(lambda r: mask_block(r, opts)), num_parallel_calls=tf.data.AUTOTUNE,
                                    deterministic=True).unbatch()
  keep = list(MODEL_FEATURES) + (["token_boundary"] if include_token_boundary else []) + (
      ["doc_index", "epoch"] if include_document_index else [])
  rows = rows.map(plain(lambda r: {k: r[k] for k in keep}))
  if is_training:
    rows = rows.shuffle(shuffle_buffer_size, seed=seed + 1, reshuffle_each_iteration=False)
  dataset = rows.batch(batch_size, drop_remainder=drop_remainder)
  if pad_to_multiple_of:
    dataset = dataset.map(plain(lambda f: input_pipeline.trim_to_longest(f, pad_to_multiple_of)))
  return dataset.prefetch(tf.data.AUTOTUNE).with_options(input_pipeline.dataset_options(deterministic=True))


def feature_statistics(batches, mask_id: int = SPECIAL_TOKEN_IDS[MASK]) -> Dict[str, object]:
  """What the model sees, measured on feature dicts (numpy or tensors) that carry `token_boundary`.

  The same measurement for static records and the dynamic pipeline: masked whole-word runs (maximal runs of
  consecutive masked words over the non-special positions; adjacent n-grams merge, identically for both), the
  [MASK]/kept/random fractions of the masked positions, the SOP label-1 fraction, predictions per sequence, the
  padding fraction and the number of masked pieces whose word is only partly masked (0 for whole-word masking).
  """
  runs: Dict[int, int] = {}
  n = mask = keep = rand = preds = sop = pad = total = partial = 0
  for batch in batches:
    b = {k: np.asarray(v) for k, v in batch.items()}
    ids, boundary, real = b["input_word_ids"], b["token_boundary"].astype(bool), b["input_mask"].astype(bool)
    weights = b["masked_lm_weights"] > 0
    n += ids.shape[0]
    preds += int(weights.sum())
    sop += int(b["next_sentence_labels"].sum())
    pad += int((~real).sum())
    total += real.size
    for row in range(ids.shape[0]):
      pos = b["masked_lm_positions"][row][weights[row]]
      labels = b["masked_lm_ids"][row][weights[row]]
      got = ids[row, pos]
      mask += int((got == mask_id).sum())
      keep += int(((got == labels) & (got != mask_id)).sum())
      rand += int(((got != labels) & (got != mask_id)).sum())
      masked = np.zeros(ids.shape[1], bool)
      masked[pos] = True
      special = ~real[row] | (np.arange(ids.shape[1]) == 0) | (boundary[row] & ~_is_body(b, row))
      cand = np.flatnonzero(~special)
      words: List[List[int]] = []
      for i, c in enumerate(cand):
        if i == 0 or boundary[row, c]:
          words.append([c])
        else:
          words[-1].append(c)
      run = 0
      for w in words:
        flags = masked[w]
        if flags.any() and not flags.all():
          partial += int(flags.sum())
        if flags.all():
          run += 1
        elif run:
          runs[run] = runs.get(run, 0) + 1
          run = 0
      if run:
        runs[run] = runs.get(run, 0) + 1
  masked_total = max(1, mask + keep + rand)
  run_total = max(1, sum(runs.values()))
  return {"examples": n, "predictions_per_sequence": preds / max(1, n), "sop_label_1_fraction": sop / max(1, n),
          "replacement_fractions": {"mask": mask / masked_total, "keep": keep / masked_total,
                                    "random": rand / masked_total},
          "masked_run_histogram": {str(k): v for k, v in sorted(runs.items())},
          "masked_run_fractions": {str(k): v / run_total for k, v in sorted(runs.items())},
          "padding_fraction": pad / max(1, total), "partially_masked_words": partial}


def _is_body(b: Dict[str, np.ndarray], row: int) -> np.ndarray:
  """Non-[SEP] positions of a row: [SEP]s are the last real position and the one where segment 1 starts - 1."""
  seg, real = b["input_type_ids"][row], b["input_mask"][row].astype(bool)
  out = np.ones(seg.shape[0], bool)
  last = int(real.sum()) - 1
  first_b = int(np.argmax(seg)) if seg.any() else last + 1
  out[last] = False
  out[first_b - 1] = False
  return out
