"""In-graph ALBERT tokenization (TensorFlow + tensorflow_text): `AlbertTextTokenizer`, `AlbertPacker`,
`AlbertPreprocessor`.

Kept apart from `official_albert.tokenization` so that the Python `FullTokenizer` (data-prep workers) never pays
for a TensorFlow import; `official_albert.tokenization` re-exports these classes lazily, so
`from official_albert.tokenization import AlbertPreprocessor` keeps working.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_text as tf_text

from official_albert import compat
from official_albert.tokenization.graph_tables import char_map_table
from official_albert.tokenization.graph_tables import digit_comma_table
from official_albert.tokenization.graph_tables import final_sigma
from official_albert.tokenization.graph_tables import sigma_context_tables
from official_albert.tokenization.graph_tables import special_token_patterns
from official_albert.tokenization.graph_tables import ws_class
from official_albert.tokenization.tokenizer import CLS
from official_albert.tokenization.tokenizer import FullTokenizer
from official_albert.tokenization.tokenizer import MASK
from official_albert.tokenization.tokenizer import SEP
from official_albert.tokenization.tokenizer import SPECIAL_TOKEN_IDS
from official_albert.tokenization.tokenizer import SPECIAL_TOKENS


# ------------------------------------------------------------------------------------------------ in-graph tokenizer
class _TokenMap(tf.Module):
  """Maps each element of a ragged int32 tensor to a (possibly empty) sequence, from a sorted lookup table.

  Written with dense ops only (no RaggedTensor constructors, concat or merge_dims), whose validation asserts would
  add dozens of conditional sub-graphs to every trace.
  """

  def __init__(self, keys: Sequence[int], values: Sequence[Sequence[int]], name=None):
    super().__init__(name=name)
    self.size = len(keys)
    # Sentinels: a key no code point/id reaches, and one value so that gathers on an empty table stay valid.
    self._keys = tf.constant(list(keys) + [2**31 - 1], tf.int32)
    lengths = [len(v) for v in values] + [0]
    self._lengths = tf.constant(lengths, tf.int32)
    starts = [0]
    for n in lengths[:-1]:
      starts.append(starts[-1] + n)
    self._starts = tf.constant(starts, tf.int32)
    self._values = tf.constant([x for v in values for x in v] + [0], tf.int32)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, x: tf.RaggedTensor) -> tf.RaggedTensor:
    values, splits = self.map_flat(x.flat_values, x.row_splits)
    return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

  def map_flat(self, flat: tf.Tensor, row_splits: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """The mapping on (flat values, row splits) of a 2-D ragged tensor; returns the same pair."""
    idx = tf.searchsorted(self._keys, flat, side="left", out_type=tf.int32)
    idx = tf.minimum(idx, tf.shape(self._keys)[0] - 1)
    hit = tf.equal(tf.gather(self._keys, idx), flat)
    out_len = tf.where(hit, tf.gather(self._lengths, idx), 1)
    ends = tf.cumsum(out_len)
    total = tf.reduce_sum(out_len)
    # For every output position: the input element it comes from and its offset inside that element's output.
    src = tf.repeat(tf.range(tf.size(flat)), out_len)
    offset = tf.range(total) - tf.gather(ends - out_len, src)
    src_hit = tf.gather(hit, src)
    table_pos = tf.where(src_hit, tf.gather(self._starts, tf.gather(idx, src)) + offset, 0)
    values = tf.where(src_hit, tf.gather(self._values, table_pos), tf.gather(flat, src))
    cum = tf.concat([[0], ends], axis=0)
    splits = tf.gather(cum, tf.cast(row_splits, tf.int32))
    return values, tf.cast(splits, row_splits.dtype)


class AlbertTextTokenizer(tf.Module):
  """In-graph `FullTokenizer`: string tensor [B] -> ragged int32 ids [B, (T)], the same ids in every mode.

  Works in eager mode, in `tf.function`, in `tf.data.Dataset.map` and inside a SavedModel (reload after
  `import tensorflow_text`). The SentencePiece model bytes live in the graph; the model file is also tracked as a
  SavedModel asset (`spm_model_asset`) when built from a local path.

  Lower-casing and NFKD use code-point tables derived from Python's `unicodedata`/`str.lower()` (TF's and ICU's
  tables follow other Unicode versions), including CPython's context rule for a word-final capital sigma, so the
  normalised text equals Python's for every code point; NUL and the other control characters give the same ids as
  `FullTokenizer` too (seeded random-Unicode property test). One documented difference: invalid UTF-8 bytes become
  U+FFFD here, while the Python tokenizer raises UnicodeDecodeError.

  Args:
    spm_model_file: SentencePiece model path; or pass `full_tokenizer` instead.
    do_lower_case, remove_space, keep_accents, mode: as `FullTokenizer`.
    full_tokenizer: an existing `FullTokenizer` whose settings and model are used.
  """

  def __init__(self, spm_model_file: Optional[str] = None, do_lower_case: bool = True, remove_space: bool = True,
               keep_accents: bool = False, mode: str = "hf", full_tokenizer: Optional[FullTokenizer] = None,
               name: Optional[str] = None):
    super().__init__(name=name)
    if full_tokenizer is None:
      if spm_model_file is None:
        raise ValueError("AlbertTextTokenizer needs spm_model_file or full_tokenizer.")
      full_tokenizer = FullTokenizer(spm_model_file, do_lower_case=do_lower_case, remove_space=remove_space,
                                     keep_accents=keep_accents, mode=mode)
    ft = full_tokenizer
    self.do_lower_case, self.remove_space = ft.do_lower_case, ft.remove_space
    self.keep_accents, self.mode = ft.keep_accents, ft.mode
    self.vocab_size = ft.vocab_size
    if "," not in ft.vocab:
      raise ValueError(f"{ft.spm_model_file}: ',' is not a vocabulary piece; the in-graph digit-comma rule needs it.")
    # FastSentencepieceTokenizer, not SentencepieceTokenizer: the latter's bundled sentencepiece breaks ties between
    # equal-score segmentations differently from the Python package ("===" -> "=","==" vs "==","=").
    self._sp = tf_text.FastSentencepieceTokenizer(ft.sp_model_proto)
    if ft.spm_model_file and "://" not in ft.spm_model_file and tf.io.gfile.exists(ft.spm_model_file):
      self.spm_model_asset = tf.saved_model.Asset(ft.spm_model_file)
    # Chunk preprocessing as code-point tables: (HF's per-character lower-casing +) NFKD + accent stripping, then
    # the final lower-casing, with CPython's one context rule (word-final capital sigma) applied in between.
    pre_lower = ft.mode == "hf" and ft.do_lower_case
    strip_accents = not ft.keep_accents
    self._norm_map = (_TokenMap(*char_map_table(pre_lower, strip_accents, False))
                      if (pre_lower or strip_accents) else None)
    self._lower_map = _TokenMap(*char_map_table(False, False, True)) if ft.do_lower_case else None
    if ft.do_lower_case:
      ignorable, cased = sigma_context_tables()
      self._ignorable = tf.constant(list(ignorable) + [2**31 - 1], tf.int32)  # (the memoised tables are tuples)
      self._cased = tf.constant(list(cased) + [2**31 - 1], tf.int32)
    self._digit_comma = _TokenMap(*digit_comma_table(ft.sp_model, ft.mode != "upstream_py3"))
    # HF lower-cases around special tokens and splits afterwards, so "<PAD>" is <pad>: one split with patterns
    # that accept every string whose per-character lower-casing is the token does the same in one pass.
    self._token_patterns = special_token_patterns(pre_lower)
    self._special_pattern = "|".join(self._token_patterns[t] for t in SPECIAL_TOKENS)
    self._ws = ws_class()

  @tf.autograph.experimental.do_not_convert
  def preprocess(self, texts) -> tf.Tensor:
    """The normalised strings SentencePiece sees (= `FullTokenizer.preprocess`), for texts without special tokens."""
    return self._preprocess_chunks(tf.convert_to_tensor(texts, tf.string))

  def _preprocess_chunks(self, chunks: tf.Tensor) -> tf.Tensor:
    if self.remove_space:
      chunks = tf.strings.regex_replace(chunks, f"^{self._ws}+|{self._ws}+$", "")
      chunks = tf.strings.regex_replace(chunks, f"{self._ws}+", " ")
    if self.mode == "hf":
      chunks = tf.strings.regex_replace(chunks, "``", '"')
      chunks = tf.strings.regex_replace(chunks, "''", '"')
    if self._norm_map is None and self._lower_map is None:
      return chunks
    # Raw ops, not tf.strings.unicode_decode/encode: no ragged validation sub-graphs.
    splits, cps = tf.raw_ops.UnicodeDecode(input=chunks, input_encoding="UTF-8", errors="replace",
                                           replacement_char=0xFFFD, Tsplits=tf.int64)
    if self._norm_map is not None:
      cps, splits = self._norm_map.map_flat(cps, splits)
    if self._lower_map is not None:
      cps = final_sigma(cps, splits, self._ignorable, self._cased)
      cps, splits = self._lower_map.map_flat(cps, splits)
    return tf.raw_ops.UnicodeEncode(input_values=cps, input_splits=splits, output_encoding="UTF-8",
                                    errors="replace", replacement_char=0xFFFD)

  # Plain Python control flow on static facts only: autograph conversion would just cost seconds per trace.
  @tf.autograph.experimental.do_not_convert
  def __call__(self, texts) -> tf.RaggedTensor:
    """Tokenizes a string tensor of shape [B] (or a scalar) into ragged int32 ids [B, (T)] (or [T])."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 0:
      return self(texts[tf.newaxis])[0]
    if self.mode != "hf":
      flat = texts
      chunk_splits = tf.range(tf.size(texts, out_type=tf.int64) + 1)
      is_special = tf.zeros_like(flat, tf.bool)
      special_ids = tf.zeros_like(flat, tf.int32)
    else:
      chunks = _regex_split(_escape_nul(texts), self._special_pattern)
      flat, chunk_splits = _unescape_nul(chunks.flat_values), chunks.row_splits
      special_ids = tf.fill(tf.shape(flat), -1)
      for token, token_id in SPECIAL_TOKEN_IDS.items():
        match = tf.strings.regex_full_match(flat, self._token_patterns[token])
        special_ids = tf.where(match, token_id, special_ids)
      is_special = special_ids >= 0
      # [MASK] is an lstrip token: the chunk before it (in the same text) loses its trailing whitespace.
      rows = chunks.value_rowids()
      next_is_mask = tf.concat([tf.equal(flat[1:], MASK) & tf.equal(rows[1:], rows[:-1]),
                                tf.zeros([tf.minimum(tf.size(flat), 1)], tf.bool)], axis=0)
      flat = tf.where(next_is_mask, tf.strings.regex_replace(flat, f"{self._ws}+$", ""), flat)
    normal = tf.where(is_special, "", flat)
    ids = self._sp.tokenize(self._preprocess_chunks(normal))
    ids = self._digit_comma(tf.cast(ids, tf.int32))
    return _join_chunks(chunk_splits, ids, is_special, special_ids)


# tensorflow_text's regex-split op reads each string only up to its first NUL byte (it hands RE2 a C string), so
# "nul\x00byte and more words" lost everything after the NUL (issue 12), while `FullTokenizer` keeps it (NUL is an
# <unk> piece to SentencePiece). Around the split, NUL is escaped as ESC "0" and ESC itself as ESC "1", with ESC a
# private-use character: reversible for every text, and neither sequence can take part in a special-token match
# (those hold only brackets, "<", ">" and letters), so the chunks are exactly those of the unescaped text.
_ESC = "\ue000"
_ESC_RE = "\\x{e000}"


def _escape_nul(texts: tf.Tensor) -> tf.Tensor:
  return tf.strings.regex_replace(tf.strings.regex_replace(texts, _ESC_RE, _ESC + "1"), "\\x00", _ESC + "0")


def _unescape_nul(chunks: tf.Tensor) -> tf.Tensor:
  # Every ESC in escaped text starts a two-character sequence, so replacing ESC "0" first cannot match across two.
  return tf.strings.regex_replace(tf.strings.regex_replace(chunks, _ESC_RE + "0", "\x00"), _ESC_RE + "1", _ESC)


def _regex_split(texts: tf.Tensor, pattern: str) -> tf.RaggedTensor:
  """`tf_text.regex_split(texts, pattern, pattern)` for a [B] string tensor, without validation asserts.

  tf_text wraps the op's output in three validated `RaggedTensor.from_row_splits` (9 Assert ops + conditionals per
  trace); the op's row splits are correct by construction, so one unvalidated ragged tensor is built instead.
  """
  split_op = compat.regex_split_op()
  if split_op is None:  # another tensorflow_text layout: same result, validated
    return tf_text.regex_split(texts, pattern, pattern)
  grouped = f"({pattern})"  # as tf_text does: the op keeps/drops whole groups
  tokens, _, _, row_splits = split_op(tf.reshape(texts, [-1]), grouped, grouped)
  return tf.RaggedTensor.from_row_splits(tokens, row_splits, validate=False)


def _join_chunks(chunk_splits, ids: tf.RaggedTensor, is_special, special_ids) -> tf.RaggedTensor:
  """Concatenates per-chunk ids ([C, (P)]; a special chunk contributes its one id) into rows of `chunk_splits`.

  Dense ops only, for the same reason as `_TokenMap`.
  """
  id_starts = tf.cast(ids.row_starts(), tf.int32)
  chunk_len = tf.where(is_special, 1, tf.cast(ids.row_lengths(), tf.int32))
  ends = tf.cumsum(chunk_len)
  src = tf.repeat(tf.range(tf.size(chunk_len)), chunk_len)
  offset = tf.range(tf.reduce_sum(chunk_len)) - tf.gather(ends - chunk_len, src)
  src_special = tf.gather(is_special, src)
  flat_ids = tf.concat([ids.flat_values, [0]], axis=0)  # sentinel keeps the gather valid when there are no ids
  gather_pos = tf.where(src_special, 0, tf.gather(id_starts, src) + offset)
  values = tf.where(src_special, tf.gather(special_ids, src), tf.gather(flat_ids, gather_pos))
  splits = tf.gather(tf.concat([[0], ends], axis=0), tf.cast(chunk_splits, tf.int32))
  return tf.RaggedTensor.from_row_splits(values, tf.cast(splits, tf.int64), validate=False)


def _as_int32_ragged(x) -> tf.RaggedTensor:
  if not isinstance(x, tf.RaggedTensor):
    x = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(x))
  return tf.cast(x, tf.int32)


class AlbertPacker(tf.Module):
  """In-graph `pack_ids`: one or two ragged id tensors [B, (T)] -> the model's int32 [B, seq_length] inputs.

  `[CLS] A [SEP] (B [SEP])`, longest-first truncation (pop from the longer segment, B on ties: the reference
  classifier's `_truncate_seq_pair`), zero padding; returns dict `input_word_ids`, `input_mask`, `input_type_ids`.
  A row whose B has no pieces packs one segment, as the Python packers' callers do, unless `empty_b_alone=False`.
  With `qa_cap` (multiple choice) the rows are RACE's (`choices.pack_choices`, what the records and every Python
  predictor pack): B (question+option) keeps its LAST `qa_cap` ids, where the option sits, A (the article) is cut
  from its end to seq_length - 3 - len(B), and both segments are always written. Longest-first would instead cut B
  from its end, dropping the option of a long question, so that every choice's row could be the same.
  """

  def __init__(self, seq_length: int, name: Optional[str] = None):
    super().__init__(name=name)
    if seq_length < 3:
      raise ValueError(f"AlbertPacker seq_length must be >= 3, got {seq_length}.")
    self.seq_length = int(seq_length)

  def _pair_lengths(self, len_a, len_b, qa_cap: Optional[int]):
    """(A's kept length, B's kept length, B's ids skipped at its start), each [B]."""
    budget = self.seq_length - 3
    if qa_cap is not None:  # RACE: B keeps its end, A gives way
      new_b = tf.minimum(len_b, qa_cap)
      return tf.minimum(len_a, budget - new_b), new_b, len_b - new_b
    # Closed form of the pop-from-the-longer loop (see `truncated_lengths`).
    new_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
    fits = len_a + len_b <= budget
    new_a = tf.where(fits, len_a, new_a)
    return new_a, tf.where(fits, len_b, budget - new_a), tf.zeros_like(len_b)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, segment_a, segment_b=None, empty_b_alone: bool = True,
               qa_cap: Optional[int] = None) -> Dict[str, tf.Tensor]:
    # Dense index arithmetic on [B, seq_length] positions instead of ragged concat/mask/to_tensor, whose
    # validation sub-graphs made tracing this packer several times slower than the whole tokenizer.
    if qa_cap is not None and (segment_b is None or not 1 <= qa_cap <= self.seq_length - 4):
      raise ValueError(f"AlbertPacker: qa_cap={qa_cap} needs a second segment and 1 <= qa_cap <= seq_length - 4 = "
                       f"{self.seq_length - 4} (the article keeps at least one piece, as `pack_choices` requires).")
    a = _as_int32_ragged(segment_a)
    len_a = tf.cast(a.row_lengths(), tf.int32)
    pos = tf.range(self.seq_length, dtype=tf.int32)[tf.newaxis, :]
    alone = tf.minimum(len_a, self.seq_length - 2)[:, tf.newaxis]
    if segment_b is None:
      new_a, new_b, has_b = alone, tf.zeros_like(alone), tf.zeros_like(alone, tf.bool)
    else:
      b = _as_int32_ragged(segment_b)
      len_b = tf.cast(b.row_lengths(), tf.int32)
      new_a, new_b, skip_b = self._pair_lengths(len_a, len_b, qa_cap)
      # A second text without pieces packs as one segment, `[CLS] A [SEP]`, as the Python packers do (GLUE's
      # records, the pipelines): the reference writes B only `if tokens_b`.
      # (Multiple choice keeps both, as RACE's `pack_choices` does: empty_b_alone=False, or qa_cap.)
      keep_empty = not empty_b_alone or qa_cap is not None
      has_b = (tf.ones_like(len_b, tf.bool) if keep_empty else len_b > 0)[:, tf.newaxis]
      new_a = tf.where(has_b, new_a[:, tf.newaxis], alone)
      new_b = tf.where(has_b, new_b[:, tf.newaxis], 0)
    in_a = (pos >= 1) & (pos <= new_a)
    sep_a = tf.equal(pos, new_a + 1)
    word_ids = tf.where(in_a, _gather_rows(a, pos - 1), 0)
    type_ids = tf.zeros_like(word_ids)
    if segment_b is not None:
      in_b = (pos >= new_a + 2) & (pos <= new_a + 1 + new_b)
      sep_b = tf.equal(pos, new_a + new_b + 2) & has_b
      word_ids = tf.where(in_b, _gather_rows(b, pos - new_a - 2 + skip_b[:, tf.newaxis]), word_ids)
      sep_a = sep_a | sep_b
      type_ids = tf.cast(in_b | sep_b, tf.int32)
    word_ids = tf.where(sep_a, SPECIAL_TOKEN_IDS[SEP], word_ids)
    word_ids = tf.where(tf.equal(pos, 0), SPECIAL_TOKEN_IDS[CLS], word_ids)
    mask = tf.cast(pos < new_a + new_b + 2 + tf.cast(has_b, tf.int32), tf.int32)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def _gather_rows(x: tf.RaggedTensor, offsets: tf.Tensor) -> tf.Tensor:
  """x[r, offsets[r, j]] as a dense [B, S] tensor; out-of-row offsets give garbage that callers mask out."""
  values = tf.concat([x.flat_values, [0]], axis=0)  # sentinel: valid index even for an all-empty batch
  starts = tf.cast(x.row_starts(), tf.int32)[:, tf.newaxis]
  index = tf.clip_by_value(starts + offsets, 0, tf.shape(values)[0] - 1)
  return tf.gather(values, index)


class AlbertPreprocessor(tf.Module):
  """Text in, model inputs out: `AlbertTextTokenizer` + `AlbertPacker`.

  Call with a string tensor [B] (single segment) or two ([B] each, a pair) to get int32 [B, seq_length]
  `input_word_ids`, `input_mask`, `input_type_ids`. `tokenizer` and `packer` are tracked sub-modules, so a
  `tf.Module` holding this object exports to a SavedModel with its SentencePiece model.
  """

  def __init__(self, spm_model_file: Optional[str] = None, seq_length: int = 128, do_lower_case: bool = True,
               remove_space: bool = True, keep_accents: bool = False, mode: str = "hf",
               full_tokenizer: Optional[FullTokenizer] = None, name: Optional[str] = None):
    super().__init__(name=name)
    self.tokenizer = AlbertTextTokenizer(spm_model_file, do_lower_case=do_lower_case, remove_space=remove_space,
                                         keep_accents=keep_accents, mode=mode, full_tokenizer=full_tokenizer)
    self.packer = AlbertPacker(seq_length)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, text_a, text_b=None, empty_b_alone: bool = True,
               qa_cap: Optional[int] = None) -> Dict[str, tf.Tensor]:
    """Packs `text_a` (and `text_b`, one per text: a different shape is refused, not broadcast); `empty_b_alone` and
    `qa_cap` (multiple choice: `text_b` is `choices.qa_text(question, option)`) as `AlbertPacker`."""
    if text_b is None:
      return self.packer(self.tokenizer(text_a), qa_cap=qa_cap)
    text_a, text_b = same_shape(text_a, text_b)
    # One tokenizer call for both segments: half the graph (and trace/optimisation time) of two calls.
    ids = self.tokenizer(tf.concat([text_a, text_b], axis=0))
    batch = tf.shape(text_a, out_type=tf.int64)[0]
    return self.packer(ids[:batch], ids[batch:], empty_b_alone=empty_b_alone, qa_cap=qa_cap)


def same_shape(text, text_b) -> Tuple[tf.Tensor, tf.Tensor]:
  """(text, text_b) as string tensors, refused unless their shapes are equal (eager: at once; in a graph: before
  anything reads them). Why: the packer's slicing and gathers broadcast a batch of 1 against B, so `text` [3] with
  `text_b` [1] paired every text with the one `text_b`, and 3 vs 2 failed deep inside as "Incompatible shapes"."""
  text, text_b = tf.convert_to_tensor(text, tf.string), tf.convert_to_tensor(text_b, tf.string)
  message = "text and text_b must have the same shape (one text_b per text); got the shapes of text, text_b:"
  if text.shape.rank is not None and text_b.shape.rank is not None and text.shape.rank != text_b.shape.rank:
    raise ValueError(f"{message} {text.shape}, {text_b.shape}.")
  check = tf.debugging.assert_equal(tf.shape(text), tf.shape(text_b), message=message)
  with tf.control_dependencies([check] if check is not None else []):
    return tf.identity(text), tf.identity(text_b)
