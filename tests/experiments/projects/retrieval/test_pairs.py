"""experiments/projects/retrieval/pairs.py: the study's (first line → rest) pairs and its held-out split."""

import random

import pytest

from experiments.projects.retrieval import pairs


def _doc(i, first=None):
  return (f"{first or f'Return the value number {i} of the table.'}\n"
          f"The table {i} keeps its rows in order and returns them one at a time.\nRaises an error at the end.")


TRAIN = [_doc(i) for i in range(40)] + [
    "Only one line here, no passage.",  # no passage
    "Short.\nA passage long enough to count as one for the rules here.",  # query of one word
    _doc(100, "Return the shared summary line of two documents."),  # this query heads two passages: ambiguous
    _doc(101, "Return the shared summary line of two documents."),
    _doc(7, "A held-out query copied into the training part."),  # its query is held out (below)
    _doc(200),  # its passage is held out (below), under another query
]
HELDOUT = [_doc(i) for i in range(300, 310)] + [_doc(7, "A held-out query copied into the training part.")]
HELDOUT[0] = HELDOUT[0].replace("Return the value number 300", "Fetch a value", 1)


def test_first_line_is_the_query_and_the_rest_the_passage():
  query, passage = pairs.document_pair(_doc(3))
  assert query == "Return the value number 3 of the table."
  assert passage == "The table 3 keeps its rows in order and returns them one at a time. Raises an error at the end."
  assert pairs.document_pair("One line only, no passage at all.") is None
  assert pairs.document_pair("Hi.\nA passage long enough to count as one for these rules.") is None


def test_held_out_queries_and_passages_never_appear_in_training():
  heldout = HELDOUT + [_doc(200).replace("Return the value number 200", "Another summary of the table", 1)]
  built = pairs.build_pairs(TRAIN, heldout)
  held_queries = {q for q, _ in built["heldout"]}
  held_passages = {p for _, p in built["heldout"]}
  assert len(built["heldout"]) == len(heldout)
  train_queries = {q for q, _ in built["train"]}
  assert not held_queries & train_queries and not held_passages & {p for _, p in built["train"]}
  assert "A held-out query copied into the training part." not in train_queries
  assert "Return the value number 200 of the table." not in train_queries  # its passage is held out
  assert "Return the shared summary line of two documents." not in train_queries  # ambiguous
  assert len(built["train"]) == 40 - 1  # doc 7's own pair shares its passage with the held-out copy


def test_a_passage_under_two_training_queries_is_left_out():
  """Mutation audit 24 F4: a passage kept under both of its queries sits in the corpus twice, under two ids, so one of
  its queries can at best rank its answer second; neither pair is kept (the fixture's only shared passage, doc 7's,
  is dropped because it is held out)."""
  train = TRAIN + [_doc(3, "Another question about the same table here.")]
  built = pairs.build_pairs(train, HELDOUT)
  train_queries = {q for q, _ in built["train"]}
  assert not {"Return the value number 3 of the table.", "Another question about the same table here."} & train_queries
  passages = [p for _, p in built["train"]]
  assert pairs.document_pair(_doc(3))[1] not in passages
  assert len(passages) == len(set(passages)) == 40 - 2 + 1  # less docs 3 (two queries) and 7 (held out), plus 200


def test_pairs_do_not_depend_on_the_order_or_repetition_of_the_documents():
  options = pairs.PairOptions(max_heldout=6, max_train=20)
  built = pairs.build_pairs(TRAIN, HELDOUT, options)
  rng = random.Random(3)
  for _ in range(3):
    train = TRAIN + rng.sample(TRAIN, 10)
    heldout = HELDOUT + HELDOUT[:4]
    rng.shuffle(train)
    rng.shuffle(heldout)
    assert pairs.build_pairs(train, heldout, options) == built
  assert len(built["heldout"]) == 6 and len(built["train"]) == 20


def test_too_small_a_corpus_names_the_fix():
  with pytest.raises(ValueError, match="--corpus_bytes"):
    pairs.build_pairs(["One line only."], HELDOUT)


CLOZE_TRAIN = [
    ("Return the table.", "The table keeps its rows in order. It returns them one at a time to the caller. "
                          "Raises KeyError when the key is not there at all."),
    ("Open the file.", "The file is opened for reading by default. It returns them one at a time to the caller. "
                       "Pass mode='w' to write to it instead of reading."),  # shares a sentence with the first
    ("Close the file.", "Flush the buffers first and then close the handle. Flush the buffers first and then close "
                        "the handle. A closed file raises ValueError on every later call."),  # repeated inside
    ("Sort a list.", "The sort is stable, so equal keys keep their order (e.g. two records with one date). "
                     "A held-out query that also sits in a training passage. Key functions are called once each. "
                     "The list is sorted in place and"),  # cut mid-sentence, as max_passage_chars leaves it
]


def test_cloze_rows_cut_their_sentence_out_of_the_positive():
  rows = pairs.cloze_rows(CLOZE_TRAIN, {"A held-out query that also sits in a training passage."}, per_passage=5)
  by_passage = {}
  for query, positive, index in rows:
    assert query not in positive and query in CLOZE_TRAIN[index][1]
    assert positive == " ".join(CLOZE_TRAIN[index][1].replace(query, " ", 1).split())
    by_passage.setdefault(index, []).append(query)
  assert by_passage[0] == sorted(["The table keeps its rows in order.",
                                  "Raises KeyError when the key is not there at all."])  # not the shared sentence
  assert by_passage[1] == sorted(["The file is opened for reading by default.",
                                  "Pass mode='w' to write to it instead of reading."])
  assert by_passage[2] == ["A closed file raises ValueError on every later call."]  # not the repeated one
  # "e.g. two" does not end a sentence; the held-out query and the cut last piece are left out.
  assert by_passage[3] == sorted(["The sort is stable, so equal keys keep their order (e.g. two records with one "
                                  "date).", "Key functions are called once each."])
  assert pairs.cloze_rows(CLOZE_TRAIN, set(), per_passage=0) == []


def test_cloze_rows_keep_at_most_n_a_passage_whatever_the_order_of_its_pairs():
  rows = pairs.cloze_rows(CLOZE_TRAIN, set(), per_passage=1)
  assert sorted(i for _, _, i in rows) == [0, 1, 2, 3]
  shuffled = [CLOZE_TRAIN[i] for i in (2, 0, 3, 1)]
  again = pairs.cloze_rows(shuffled, set(), per_passage=1)
  assert sorted((q, p) for q, p, _ in again) == sorted((q, p) for q, p, _ in rows)
  assert all(shuffled[i][1].count(q) == 1 for q, _, i in again)
