"""A read normalises each text once (`ComparisonKeys`), and a data row is told from a repeated header without sorting.

Before: `read_groups` normalised a ranking row's texts 22 times (7 negatives) and `drop_query_positives` 10 more,
`read_pairs` / `check_hard_negatives` / `warn_of_repeated_texts` 8 times for 3 texts, at ~10 µs each (minutes per
million rows); `row_cells.header_again` sorted the row and the header for every data row. Nothing here is timed:
the results are checked equal to the previous code's, written below from it (`comparison_text` per comparison), and
the work is counted (normalisations, sorts).
"""

import dataclasses
import json

import pytest

from tasks import comparison_text as comparison_module
from tasks import row_cells
from tasks.comparison_text import comparison_text
from tasks.comparison_text import ComparisonKeys
from tasks.embedding import data as pair_data
from tasks.ranking import data as group_data

COLUMNS = {"query": "query", "positive": "positive", "negative": "negative"}
PAIR_COLUMNS = {"anchor": "anchor", "positive": "positive", "negative": "negative"}
TEXTS = ["Café au lait", "CAFE\u0301 au lait ", "a\u200bb", "a b", "Great  film", "great film", "[MASK] film",
         "[mask]  film", "''x''", '"x"', "ß", "ss", "Ｈello", "hello", "x\u03a3y", "plain"]
OPTIONS = [None, {"spm_model_version": None}, {"do_lower_case": False}, {"keep_accents": True},
           {"remove_space": False}, {"tokenizer_mode": "reference"}]

# A query with four relevant documents over four rows (written two ways), mined negatives holding them, a negative
# the positive itself (accents, case, spaces), repeats (case, a zero-width space) and a special token.
RANKING_ROWS = [
    ("What is X?", "Café au lait", ["CAFE\u0301 au lait ", "n1", "N1", "Doc B", "a\u200bb", "a b", "n2", "n3"]),
    ("what is x? ", "doc b", ["café au lait", "n4", "Doc C", "n5", "n6", "n7"]),
    ("WHAT IS X?", "Doc C", ["n8", "n9", "n10", "DOC B", "n11"]),
    ("[MASK] other", "Other doc", ["[mask] other", "o1", "o2", "O1", "o3"]),
    ("what is X?", "Doc D", ["doc b", "Doc C", "n12"]),  # (one negative left: skipped)
]
PAIR_ROWS = [
    ("What is X?", "Café au lait", "Doc B"),
    ("what is x? ", "doc b", "n1"),
    ("Another", "Other doc", "CAFE\u0301 au lait "),
    ("other doc", "another ", "n2"),
    ("Third", "Third doc", "n3"),
]


@pytest.fixture
def normalised(monkeypatch):
  """The texts `comparison_text` / `ComparisonKeys` normalise, one entry per normalisation."""
  seen = []
  original = comparison_module.special_chunks

  def counting(text, *args, **kwargs):
    seen.append(text)
    return original(text, *args, **kwargs)

  monkeypatch.setattr(comparison_module, "special_chunks", counting)
  return seen


def _write_ranking(tmp_path, rows=RANKING_ROWS):
  path = tmp_path / "groups.jsonl"
  path.write_text("".join(json.dumps({"query": q, "positive": p, "negative": n}) + "\n" for q, p, n in rows),
                  encoding="utf-8")
  return str(path)


def _write_pairs(tmp_path, rows=PAIR_ROWS):
  path = tmp_path / "pairs.jsonl"
  path.write_text("".join(json.dumps(dict(zip(PAIR_COLUMNS, row))) + "\n" for row in rows), encoding="utf-8")
  return str(path)


# ----------------------------------------------------------------------- the previous code, per comparison
def previous_group_negatives(positive, negatives, options):
  """`read_groups`' negatives as before: the positive's equals dropped, then repeats."""
  positive_text = comparison_text(positive, options)
  kept = [n for n in negatives if comparison_text(n, options) != positive_text]
  unique, seen = [], set()
  for negative in kept:
    if comparison_text(negative, options) not in seen:
      seen.add(comparison_text(negative, options))
      unique.append(negative)
  return unique


def previous_drop_query_positives(examples, num_negatives, options):
  positives = {}
  for e in examples:
    positives.setdefault(comparison_text(e.query, options), set()).add(comparison_text(e.positive, options))
  settled = []
  for e in examples:
    relevant = positives[comparison_text(e.query, options)]
    kept = [n for n in e.negatives if comparison_text(n, options) not in relevant]
    if len(kept) >= num_negatives:
      settled.append((e.line, e.query, e.positive, kept[:num_negatives]))
  return settled


def previous_check_hard_negatives(examples, options):
  positives = {}
  for e in examples:
    if e.positive is not None:
      positives.setdefault(comparison_text(e.anchor, options), {}).setdefault(comparison_text(e.positive, options), e)
  return [e for e in examples if e.negative is None
          or positives.get(comparison_text(e.anchor, options), {}).get(comparison_text(e.negative, options)) is None]


def previous_repeated(examples, options):
  seen, repeated = set(), 0
  for e in examples:
    keys = [comparison_text(t, options) for t in (e.anchor, e.positive) if t is not None]
    repeated += any(k in seen for k in keys)
    seen.update(keys)
  return repeated


def previous_header_again(header, row):
  if len(header) < 2 or len(row) != len(header):
    return None
  cells = [c.strip() for c in [row[0].lstrip("\ufeff")] + list(row[1:])]
  return cells if sorted(cells) == sorted(header) else None


# ------------------------------------------------------------------------------------------------ the keys
def test_comparison_keys_are_comparison_text(spm_model_file):
  for options in OPTIONS + [{"spm_model_file": spm_model_file}, {"spm_model_file": spm_model_file,
                                                                 "do_lower_case": False}]:
    keys = ComparisonKeys(options)
    for text in TEXTS * 2:  # (the second time from the memo)
      assert keys(text) == comparison_text(text, options), (options, text)
  text = "plain text"
  assert ComparisonKeys()(text) is text  # (a key equal to its text is no second copy on the row)


def test_a_small_memo_forgets_and_still_gives_the_same_keys(normalised):
  keys = ComparisonKeys(None, memo_size=2)
  assert [keys(t) for t in TEXTS + TEXTS] == [comparison_text(t) for t in TEXTS + TEXTS]
  assert len(normalised) == 4 * len(TEXTS)  # (each text twice through the memo, twice for comparison_text)


def test_row_keys_are_reused_only_under_their_options_and_length():
  keys, cased = ComparisonKeys(None), ComparisonKeys({"do_lower_case": False})
  stored = keys.row_keys(["Café", None, "B"])
  assert stored == (keys.options, comparison_text("Café"), None, "b")
  assert keys.row_keys(["Café", None, "B"], stored) is stored
  assert cased.row_keys(["Café", None, "B"], stored) == (cased.options, "Cafe", None, "B")
  assert keys.row_keys(["Café", None], stored) == (keys.options, comparison_text("Café"), None)


# ---------------------------------------------------------------------------------------------------- ranking
@pytest.mark.parametrize("options", [None, {"do_lower_case": False}, {"tokenizer_mode": "reference"}])
def test_ranking_groups_are_the_previous_ones_and_each_text_is_normalised_once(tmp_path, options, normalised):
  path = _write_ranking(tmp_path)
  examples = group_data.read_groups(path, COLUMNS, 2, tokenizer_options=options, trim=False)
  settled = group_data.drop_query_positives(examples, 2, skip_bad_rows=True, tokenizer_options=options)
  distinct = {t for q, p, n in RANKING_ROWS for t in [q, p] + n}
  assert sorted(normalised) == sorted(distinct)  # (before: 22 + 10 per row of 7 negatives)
  assert [e.negatives for e in examples] == [previous_group_negatives(p, n, options) for _, p, n in RANKING_ROWS]
  assert [(e.line, e.query, e.positive, e.negatives) for e in settled] == previous_drop_query_positives(
      examples, 2, options)
  assert all(e.keys is None for e in settled)  # (the groups training keeps do not carry the keys)
  if options is None:  # (the rows hold every case: equal to the positive, repeated, a positive of the query)
    assert len(settled) < len(examples) and any(len(e.negatives) < len(n) for e, (_, _, n) in zip(
        examples, RANKING_ROWS))


def test_trimmed_groups_and_rows_without_keys_are_the_previous_ones(tmp_path):
  path = _write_ranking(tmp_path)
  trimmed = group_data.read_groups(path, COLUMNS, 2)
  assert [e.negatives for e in trimmed] == [previous_group_negatives(p, n, None)[:2] for _, p, n in RANKING_ROWS]
  bare = [dataclasses.replace(e, keys=None) for e in group_data.read_groups(path, COLUMNS, 2, trim=False)]
  assert [(e.line, e.query, e.positive, e.negatives) for e in group_data.drop_query_positives(
      bare, 2, skip_bad_rows=True)] == previous_drop_query_positives(bare, 2, None)


def test_keys_read_under_other_options_are_not_reused(tmp_path):
  """Read cased, checked lower-cased: "Q" and "q" are one query, so "beta" is a positive of it (row 2's "BETA")."""
  path = _write_ranking(tmp_path, [("Q", "Alpha", ["beta", "g1", "g2"]), ("q", "BETA", ["h1", "h2", "h3"])])
  examples = group_data.read_groups(path, COLUMNS, 2, tokenizer_options={"do_lower_case": False}, trim=False)
  settled = group_data.drop_query_positives(examples, 2, tokenizer_options=None)
  assert [e.negatives for e in settled] == [["g1", "g2"], ["h1", "h2"]]
  assert [(e.line, e.query, e.positive, e.negatives) for e in settled] == previous_drop_query_positives(
      examples, 2, None)


# -------------------------------------------------------------------------------------------------- embedding
@pytest.mark.parametrize("options", [None, {"do_lower_case": False}])
def test_pairs_are_the_previous_ones_and_each_text_is_normalised_once(tmp_path, options, normalised):
  path = _write_pairs(tmp_path)
  examples = pair_data.read_pairs(path, PAIR_COLUMNS, tokenizer_options=options)
  kept = pair_data.check_hard_negatives(examples, skip_bad_rows=True, tokenizer_options=options)
  repeated = pair_data.warn_of_repeated_texts(kept, options)
  assert sorted(normalised) == sorted({t for row in PAIR_ROWS for t in row})  # (before: 8 per row of 3 texts)
  assert kept == previous_check_hard_negatives(examples, options)
  assert repeated == previous_repeated(kept, options)
  if options is None:  # (the rows hold both cases: a positive of the anchor as a negative, a repeated text)
    assert len(kept) < len(examples) and repeated


def test_pairs_without_keys_or_checked_under_other_options_are_the_previous_ones(tmp_path):
  """Read cased, checked lower-cased: row 2's negative "beta" is its own positive "BETA" (so a positive of "Q")."""
  path = _write_pairs(tmp_path, [("Q", "Alpha", "x"), ("q", "BETA", "beta"), ("R", "r", "s")])
  examples = pair_data.read_pairs(path, PAIR_COLUMNS, tokenizer_options={"do_lower_case": False})
  assert pair_data.check_hard_negatives(examples, True, None) == previous_check_hard_negatives(examples, None)
  assert [e.line for e in pair_data.check_hard_negatives(examples, True, None)] == [1, 3]
  bare = [dataclasses.replace(e, keys=None) for e in examples]
  assert pair_data.check_hard_negatives(bare, True, None) == previous_check_hard_negatives(bare, None)
  assert pair_data.warn_of_repeated_texts(bare, None) == previous_repeated(bare, None) == 1
  anchors = [pair_data.PairExample("f", i, t, None) for i, t in enumerate(["A", "a"])]  # (texts to embed)
  assert pair_data.check_hard_negatives(anchors, False, None) == anchors


# ---------------------------------------------------------------------------------------------- header again
HEADER_CASES = [
    (["text", "label"], ["Great film", "pos"]), (["text", "label"], ["label", "text"]),
    (["text", "label"], ["text", "label"]), (["text", "label"], ["\ufefftext ", " label"]),
    (["text", "label"], ["text", "text"]), (["text", "label"], ["text", "label", "x"]), (["text"], ["text"]),
    (["a", "b", "c"], ["c", "a", "b"]), (["a", "b", "c"], ["a", "b", "d"]), (["a", "a", "b"], ["a", "b", "b"]),
    (["text", "label"], ["label", "pos"]), (["a", "b"], ["b ", "\ufeffa"]), (["a", "b"], ["", ""]),
]


@pytest.mark.parametrize("header, row", HEADER_CASES)
def test_header_again_is_the_previous_rule(header, row):
  assert row_cells.header_again(header, row) == previous_header_again(header, row)


def test_a_data_row_is_told_from_the_header_without_sorting(monkeypatch):
  sorts = []
  monkeypatch.setattr(row_cells, "sorted", lambda cells: sorts.append(cells) or sorted(cells), raising=False)
  for i in range(50):
    assert row_cells.header_again(["text", "label"], [f"review {i}", "pos"]) is None
  assert not sorts
