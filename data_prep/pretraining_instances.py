"""Pure logic of ALBERT pretraining-instance creation (reference §3.2-3.4), on token ids and NumPy.

Everything here works on int32 token-id arrays (a document is a list of sentence arrays), never on piece strings:
the start-piece rule of the reference is evaluated once per vocabulary entry (`VocabInfo.is_start`) and then looked
up by id. Every random draw comes from the `random.Random` passed in, so the caller decides the seeding (Python's
generator, not NumPy's: the draws are scalar and `random.Random` is ~10x cheaper per scalar draw). Instances are
serialised in blocks: padding, the 2-D feature arrays and the packed varints are computed with NumPy for the whole
block, and the `tf.train.Example` bytes are assembled by hand (`encode_examples`, byte-identical to protobuf).

Differences from the reference algorithm (each behind an option whose default is documented on `InstanceOptions`):
- A one-sentence chunk (in SOP mode) is split inside the sentence at a random word start instead of taking B from
  a random other document (reference behaviour: `sop_random_document_for_single_sentence=True`).
- The random draws are not the reference's (its n-gram length uses the unseeded global NumPy RNG, so no stream can
  be matched); the distributions are the same: p(n) ∝ 1/n, 80/10/10 replacement (one uniform draw per token
  instead of two), 50/50 swaps and truncation sides, and the candidate shuffle (drawn lazily, only as far as the
  walk goes: a prefix of a uniform shuffle).
- `truncate_pair_randomly` (the reference's `truncate_seq_pair`) is computed in closed form: the reference removes
  one token at a time from the longer side (B on a tie), front or back with p = 0.5; the number removed per side is
  the same here and the number removed from the front of a side is Binomial(k, 0.5), which is the distribution of the
  reference's per-token coin flips.

Long because: one algorithm, the reference's instance creation (create_pretraining_data.py §3.2-3.4: options, n-gram
masking, segment pairing, SOP), in its order; its deviations from the reference are listed above and each is read
beside the code it changes.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
import string
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tasks.masking_options import MaskingOptions
from tasks.masking_options import ngram_cdf

# string.punctuation without "'", "<", "=", ">" (the reference's `special_pieces`), plus the two currency signs.
_SPECIAL_PIECE_CHARS = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_SPECIAL_PIECES = _SPECIAL_PIECE_CHARS | {"€", "£"}
_CONTINUATION_CHARS = frozenset(string.ascii_lowercase) | _SPECIAL_PIECE_CHARS


def is_start_piece_sp(piece: str) -> bool:
  """The reference's SentencePiece start-piece rule (§3.3).

  A piece starts a word if it starts with "▁" or "<", is a punctuation piece or €/£, or contains any character that
  is neither an ASCII letter (either case) nor one of the punctuation characters. Only pieces made purely of ASCII
  letters/punctuation without "▁" continue the previous word.
  """
  if piece.startswith("▁") or piece.startswith("<") or piece in _SPECIAL_PIECES:
    return True
  return not all(ch.lower() in _CONTINUATION_CHARS for ch in piece)


def is_start_piece_wordpiece(piece: str) -> bool:
  """BERT WordPiece rule: a piece continues the previous word iff it starts with "##"."""
  return not piece.startswith("##")


@dataclasses.dataclass(frozen=True)
class VocabInfo:
  """What instance creation needs to know about the vocabulary, indexed by token id.

  Attributes:
    is_start: bool [V], the start-piece rule evaluated for every vocabulary entry.
    cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
  """
  is_start: np.ndarray
  cls_id: int
  sep_id: int
  mask_id: int

  @property
  def vocab_size(self) -> int:
    return int(self.is_start.shape[0])

  @classmethod
  def from_pieces(cls, pieces: Sequence[str], wordpiece: bool = False) -> "VocabInfo":
    """Builds the table from the id → piece list; [CLS]/[SEP]/[MASK] must be present."""
    rule = is_start_piece_wordpiece if wordpiece else is_start_piece_sp
    ids = {}
    for name in ("[CLS]", "[SEP]", "[MASK]"):
      try:
        ids[name] = pieces.index(name)
      except ValueError:
        raise ValueError(f"The vocabulary has no {name} piece; ALBERT data needs [CLS], [SEP] and [MASK].") from None
    return cls(is_start=np.array([rule(p) for p in pieces], dtype=bool), cls_id=ids["[CLS]"], sep_id=ids["[SEP]"],
               mask_id=ids["[MASK]"])


@dataclasses.dataclass(frozen=True)
class InstanceOptions(MaskingOptions):
  """Instance-creation options; names and defaults are the reference flags (§3.1) unless marked.

  Attributes (beside `MaskingOptions`' layout and probabilities):
    ngram: longest n-gram (in whole-word units) to mask.
    favor_shorter_ngram: p(n) ∝ 1/n; False reverses the probabilities.
    do_whole_word_mask: mask whole words (start piece + continuation pieces) together.
    do_permutation: also permute up to `budget` more tokens among themselves and predict them (reference option);
      doubles the prediction slots.
    random_next_sentence: BERT NSP instead of SOP (label 1 = B from a random document).
    sop_random_document_for_single_sentence: reference compat; a one-sentence chunk gets B from a random other
      document (label 1). Default False (beyond the reference): the sentence is split at a random word start and
      the halves go through the normal SOP swap, so SOP labels never mean "random document".
  """
  ngram: int = 3
  favor_shorter_ngram: bool = True
  do_whole_word_mask: bool = True
  do_permutation: bool = False
  random_next_sentence: bool = False
  sop_random_document_for_single_sentence: bool = False

  def validate(self) -> None:
    self.check_options(self.ngram, "ngram")

  @property
  def max_num_tokens(self) -> int:
    return self.max_seq_length - 3

  @property
  def num_prediction_slots(self) -> int:
    return self.max_predictions_per_seq * (2 if self.do_permutation else 1)


class InstanceStats:
  """Counters of one shard (merged across shards by `merge`)."""

  COUNTERS = ("instances", "tokens", "masked_tokens", "permuted_tokens", "sop_label_0", "sop_label_1",
              "replaced_mask", "replaced_keep", "replaced_random", "truncated_instances", "truncated_tokens",
              "single_sentence_chunks_split", "single_sentence_chunks_random_document",
              "chunks_skipped_too_short", "short_target_passes")

  def __init__(self, ngram: int):
    self.counts: Dict[str, int] = {k: 0 for k in self.COUNTERS}
    # Index n-1 counts n-grams of n whole words: `drawn` is the sampled length (distribution p(n)), `masked` the
    # length actually masked (shorter near the sequence end or when the budget forced a fallback).
    self.ngram_drawn = [0] * ngram
    self.ngram_masked = [0] * ngram

  def add(self, key: str, value: int = 1) -> None:
    self.counts[key] += value

  def merge(self, other: "InstanceStats") -> None:
    for k, v in other.counts.items():
      self.counts[k] = self.counts.get(k, 0) + v
    for i, v in enumerate(other.ngram_drawn):
      self.ngram_drawn[i] += v
    for i, v in enumerate(other.ngram_masked):
      self.ngram_masked[i] += v

  def to_dict(self) -> Dict[str, object]:
    d: Dict[str, object] = dict(self.counts)
    d["ngram_drawn_histogram"] = {str(i + 1): int(v) for i, v in enumerate(self.ngram_drawn)}
    d["ngram_masked_histogram"] = {str(i + 1): int(v) for i, v in enumerate(self.ngram_masked)}
    return d

  @classmethod
  def from_dict(cls, d: Dict[str, object]) -> "InstanceStats":
    drawn = d.get("ngram_drawn_histogram", {})
    masked = d.get("ngram_masked_histogram", {})
    s = cls(len(drawn))
    for k in cls.COUNTERS:
      s.counts[k] = int(d.get(k, 0))
    s.ngram_drawn = [int(drawn[str(i + 1)]) for i in range(len(drawn))]
    s.ngram_masked = [int(masked[str(i + 1)]) for i in range(len(masked))]
    return s


@dataclasses.dataclass
class Instance:
  """One unpadded training instance.

  Attributes:
    tokens: int32 [n] original ids of `[CLS] A [SEP] B [SEP]` (before masking).
    len_a: length of segment A (segment ids are 1 from position len_a + 2 on).
    positions: masked-LM target positions, ascending.
    replacements: the id written at each position (input_ids[p]); the label is tokens[p].
    sop_label: `next_sentence_labels`: 1 = swapped (SOP) / random document (NSP), 0 = in order.
  """
  tokens: np.ndarray
  len_a: int
  positions: List[int]
  replacements: List[int]
  sop_label: int

  def input_ids(self) -> np.ndarray:
    out = self.tokens.copy()
    out[self.positions] = self.replacements
    return out


# ----------------------------------------------------------------------------------------------------- masking
def _select_ngrams(bounds: List[int], budget: int, covered: List[bool], rng: random.Random, cdf: Sequence[float],
                   stats: Optional[InstanceStats]) -> List[int]:
  """The reference n-gram walk over whole-word groups (§3.3 steps 1-3).

  Args:
    bounds: G+1 offsets; group g covers candidate slots [bounds[g], bounds[g+1]).
    budget: most slots to select.
    covered: per-group flags, updated in place (groups taken earlier are skipped).
    rng: the generator.
    cdf: cumulative p(n), n = 1..ngram.
    stats: optional counters.

  Returns:
    The selected candidate slots (in selection order).
  """
  num_groups = len(bounds) - 1
  if num_groups <= 0 or budget <= 0:
    return []
  ngram = len(cdf)
  order = list(range(num_groups))
  slots: List[int] = []
  count = 0
  rand = rng.random
  for j in range(num_groups):
    if count >= budget:
      break
    # Lazy Fisher-Yates: the first j entries are a uniform random prefix of a full shuffle, and only the prefix
    # the walk reaches is ever drawn. (int(u * n) is uniform up to float rounding, ~1e-14 here.)
    k = j + int(rand() * (num_groups - j))
    order[j], order[k] = order[k], order[j]
    g = order[j]
    n = min(bisect.bisect_right(cdf, rand()) + 1, ngram)
    if stats is not None:
      stats.ngram_drawn[n - 1] += 1
    # n-grams near the end are shorter (the reference slices cand_indexes[g:g+n]); over budget → try n-1 ... 1.
    end = min(g + n, num_groups)
    while count + bounds[end] - bounds[g] > budget and n > 1:
      n -= 1
      end = min(g + n, num_groups)
    size = bounds[end] - bounds[g]
    if count + size > budget:
      continue
    if True in covered[g:end]:
      continue
    for q in range(g, end):
      covered[q] = True
    slots.extend(range(bounds[g], bounds[end]))
    count += size
    if stats is not None:
      stats.ngram_masked[end - g - 1] += 1
  return slots


def create_masked_lm_predictions(tokens: np.ndarray, opts: InstanceOptions, vocab: VocabInfo, rng: random.Random,
                                 stats: Optional[InstanceStats] = None) -> Tuple[List[int], List[int]]:
  """n-gram whole-word masking (reference `create_masked_lm_predictions`).

  Args:
    tokens: int32 [n] ids of `[CLS] A [SEP] B [SEP]`.
    opts: options.
    vocab: vocabulary table.
    rng: the generator.
    stats: optional counters.

  Returns:
    (positions ascending, replacement id at each position). Labels are `tokens[positions]`.
  """
  if opts.masked_lm_prob == 0:
    return [], []
  budget = min(opts.max_predictions_per_seq, max(1, int(round(len(tokens) * opts.masked_lm_prob))))
  special = (tokens == vocab.cls_id) | (tokens == vocab.sep_id)
  cand_pos = np.nonzero(~special)[0]
  num_cand = int(cand_pos.size)
  if num_cand == 0:
    return [], []
  if opts.do_whole_word_mask:
    opens = vocab.is_start[tokens[cand_pos]]
    opens[0] = True  # the first candidate always opens a group, even a continuation piece
    # As in the reference, [CLS]/[SEP] are skipped without closing the open group, so a continuation piece right
    # after [SEP] (possible after front truncation) joins the last word of A.
    bounds = np.nonzero(opens)[0].tolist()
    bounds.append(num_cand)
  else:
    bounds = list(range(num_cand + 1))
  covered = [False] * (len(bounds) - 1)
  cdf = ngram_cdf(opts.ngram, opts.favor_shorter_ngram)
  cand = cand_pos.tolist()

  slots = _select_ngrams(bounds, budget, covered, rng, cdf, stats)
  positions = sorted(cand[s] for s in slots)
  replacements = []
  n_mask = n_keep = 0
  rand, randrange, mask_id, vocab_size = rng.random, rng.randrange, vocab.mask_id, vocab.vocab_size
  for p in positions:
    u = rand()
    if u < 0.8:
      replacements.append(mask_id)
      n_mask += 1
    elif u < 0.9:
      replacements.append(int(tokens[p]))
      n_keep += 1
    else:
      # Any id, specials included, as in the reference (vocab_words = all pieces).
      replacements.append(randrange(vocab_size))
  if stats is not None:
    m = len(positions)
    stats.add("masked_tokens", m)
    stats.add("replaced_mask", n_mask)
    stats.add("replaced_keep", n_keep)
    stats.add("replaced_random", m - n_mask - n_keep)

  if opts.do_permutation:
    perm_slots = _select_ngrams(bounds, budget, covered, rng, cdf, None)
    if perm_slots:
      src = sorted(cand[s] for s in perm_slots)
      tgt = list(src)
      rng.shuffle(tgt)
      # The permuted tokens are disjoint from the masked ones, so "the output so far" at tgt is the original.
      merged = sorted(list(zip(positions, replacements)) + [(s, int(tokens[t])) for s, t in zip(src, tgt)])
      positions = [p for p, _ in merged]
      replacements = [r for _, r in merged]
      if stats is not None:
        stats.add("permuted_tokens", len(src))
  return positions, replacements


# ----------------------------------------------------------------------------------------------- segments / SOP
def truncate_pair_randomly(tokens_a: np.ndarray, tokens_b: np.ndarray, max_num_tokens: int,
                           rng: random.Random) -> Tuple[np.ndarray, np.ndarray, int]:
  """The pretraining data's `truncate_seq_pair` in closed form (see the module docstring).

  How many tokens each side loses follows the classifiers' longest-first rule (`tokenization.truncated_lengths`);
  unlike there, each removed token comes from the front or the back at random. Returns (a, b, tokens_removed).
  """
  la, lb = len(tokens_a), len(tokens_b)
  excess = la + lb - max_num_tokens
  if excess <= 0:
    return tokens_a, tokens_b, 0
  # Imported here: the masking above needs no SentencePiece (a JAX accelerator host masks without it).
  from official_albert.tokenization import truncated_lengths  # noqa: PLC0415
  new_a, new_b = truncated_lengths(la, lb, max_num_tokens)
  cut_a, cut_b = la - new_a, lb - new_b
  # Binomial(k, 1/2) front cuts: the popcount of k fair random bits.
  front_a = bin(rng.getrandbits(cut_a)).count("1") if cut_a else 0
  front_b = bin(rng.getrandbits(cut_b)).count("1") if cut_b else 0
  return tokens_a[front_a:la - (cut_a - front_a)], tokens_b[front_b:lb - (cut_b - front_b)], excess


def _split_single_sentence(sentence: np.ndarray, vocab: VocabInfo,
                           rng: random.Random) -> Optional[Tuple[np.ndarray, np.ndarray]]:
  """Splits one sentence into two non-empty parts at a random word start (any token if none)."""
  if len(sentence) < 2:
    return None
  inner = (np.flatnonzero(vocab.is_start[sentence[1:]]) + 1).tolist()
  k = rng.choice(inner) if inner else rng.randint(1, len(sentence) - 1)
  return sentence[:k], sentence[k:]


# Long because: the reference's create_instances_from_document, step for step (chunks, segments A and B, the SOP swap,
# truncation), so that each deviation listed in the module docstring is read beside the code it changes.
def create_instances_from_document(documents: Sequence[Sequence[np.ndarray]], document_index: int,
                                   opts: InstanceOptions, vocab: VocabInfo, rng: random.Random,
                                   stats: Optional[InstanceStats] = None) -> List[Instance]:
  """One pass over one document (reference `create_instances_from_document`).

  Args:
    documents: the documents random-document negatives may come from (in this project: the shard's documents);
      each is a list of int32 sentence arrays, none empty.
    document_index: which of `documents` to process.
    opts: options.
    vocab: vocabulary table.
    rng: the generator for this (document, pass).
    stats: optional counters.

  Returns:
    The document's instances, unpadded.
  """
  document = documents[document_index]
  max_num_tokens = opts.max_num_tokens
  target_seq_length = max_num_tokens
  if rng.random() < opts.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
    if stats is not None:
      stats.add("short_target_passes")

  cls_ = np.array([vocab.cls_id], np.int32)
  sep_ = np.array([vocab.sep_id], np.int32)
  instances = []
  chunk: List[np.ndarray] = []
  chunk_len = 0
  i = 0
  while i < len(document):
    chunk.append(document[i])
    chunk_len += len(document[i])
    if i == len(document) - 1 or chunk_len >= target_seq_length:
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      tokens_a = chunk[0] if a_end == 1 else np.concatenate(chunk[:a_end])
      label = 0
      if ((len(chunk) == 1 and (opts.random_next_sentence or opts.sop_random_document_for_single_sentence))
          or (opts.random_next_sentence and rng.random() < 0.5)):
        label = 1
        target_b_length = target_seq_length - len(tokens_a)
        random_index = document_index
        for _ in range(10):
          random_index = rng.randint(0, len(documents) - 1)
          if random_index != document_index:
            break
        random_document = documents[random_index]
        parts, got = [], 0
        for j in range(rng.randint(0, len(random_document) - 1), len(random_document)):
          parts.append(random_document[j])
          got += len(random_document[j])
          if got >= target_b_length:
            break
        tokens_b = np.concatenate(parts)
        i -= len(chunk) - a_end  # put the unused sentences back
        if stats is not None and len(chunk) == 1:
          stats.add("single_sentence_chunks_random_document")
      else:
        if len(chunk) == 1:
          halves = _split_single_sentence(chunk[0], vocab, rng)
          if halves is None:
            if stats is not None:
              stats.add("chunks_skipped_too_short")
            chunk, chunk_len = [], 0
            i += 1
            continue
          tokens_a, tokens_b = halves
          if stats is not None:
            stats.add("single_sentence_chunks_split")
        else:
          tokens_b = chunk[a_end] if a_end == len(chunk) - 1 else np.concatenate(chunk[a_end:])
        if not opts.random_next_sentence and rng.random() < 0.5:
          label = 1
          tokens_a, tokens_b = tokens_b, tokens_a
      tokens_a, tokens_b, removed = truncate_pair_randomly(tokens_a, tokens_b, max_num_tokens, rng)
      if removed and stats is not None:
        stats.add("truncated_instances")
        stats.add("truncated_tokens", removed)
      tokens = np.concatenate([cls_, tokens_a, sep_, tokens_b, sep_])
      positions, replacements = create_masked_lm_predictions(tokens, opts, vocab, rng, stats)
      instances.append(Instance(tokens, len(tokens_a), positions, replacements, label))
      if stats is not None:
        stats.add("instances")
        stats.add("tokens", len(tokens))
        stats.add("sop_label_1" if label else "sop_label_0")
      chunk, chunk_len = [], 0
    i += 1
  return instances



