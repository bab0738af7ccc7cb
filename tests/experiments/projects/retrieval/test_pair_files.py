"""experiments/projects/retrieval/pair_files.py: how a reranker group's negatives are chosen from a ranking; the pair
files (written as UTF-8) are read as UTF-8 whatever the locale."""

import ast
import pathlib

import numpy as np

from experiments.projects.retrieval import pair_files

NUM = 30


def _rankings(seed=0, depth=21):
  """Each query's ranking of the NUM passages (its own passage somewhere in it, as a first stage's would be)."""
  rng = np.random.default_rng(seed)
  return [[int(j) for j in rng.permutation(NUM)[:depth]] for _ in range(NUM)]


def _first_version(ranked, negatives, hard_negatives, num, seed):
  """The data stage's BM25 groups as the measured study (2026-11-28) made them, written out again here: the
  refactored `choose_negatives` must give them bit for bit, so its data stage's files do not change."""
  hard = [[j for j in row if j != i] for i, row in enumerate(ranked)]
  rng = np.random.default_rng(seed)
  groups = []
  for i, row in enumerate(hard):
    group = row[:hard_negatives]
    while len(group) < negatives:
      j = int(rng.integers(num))
      if j != i and j not in group:
        group.append(j)
    groups.append(group)
  return groups


def test_best_wrong_passages_are_the_first_versions_groups():
  ranked = _rankings(depth=3)
  for hard in (0, 1, 2):
    assert pair_files.choose_negatives(ranked, 3, hard, NUM, 7) == _first_version(ranked, 3, hard, NUM, 7)


def test_sampled_negatives_come_from_the_rankings_top_k_and_never_are_the_positive():
  ranked = _rankings()
  k = 20
  groups = pair_files.choose_negatives(ranked, 4, 3, NUM, 5, sample_from=k)
  assert groups == pair_files.choose_negatives(ranked, 4, 3, NUM, 5, sample_from=k)  # seeded
  assert groups != pair_files.choose_negatives(ranked, 4, 3, NUM, 6, sample_from=k)
  drawn = set()
  for i, (row, group) in enumerate(zip(ranked, groups)):
    top = [j for j in row if j != i][:k]
    assert len(group) == len(set(group)) == 4 and i not in group
    assert set(group[:3]) <= set(top)
    drawn.update(top.index(j) for j in group[:3])
  assert max(drawn) > 10  # drawn across the top k, not only its best ones


def test_a_cloze_rows_negatives_never_are_the_passage_it_was_cut_from():
  ranked = _rankings(depth=21)
  own = [(3 * i) % NUM for i in range(NUM)]  # row i was cut from passage own[i]
  for sample_from in (0, 20):
    groups = pair_files.choose_negatives(ranked, 4, 2, NUM, 5, sample_from=sample_from, own=own)
    for row, group, mine in zip(ranked, groups, own):
      assert mine not in group and len(set(group)) == 4
      wrong = [j for j in row if j != mine]
      assert set(group[:2]) <= set(wrong[:sample_from or 2])
  assert pair_files.choose_negatives(ranked, 4, 2, NUM, 5, own=range(NUM)) == pair_files.choose_negatives(
      ranked, 4, 2, NUM, 5)


def test_the_studys_text_files_are_read_as_utf8_whatever_the_locale():
  """`atomic_write_text` writes UTF-8; an `open()` without encoding= read the pairs as mojibake under a latin-1 or
  cp1252 locale (silently for latin-1)."""
  folder = pathlib.Path(pair_files.__file__).parent
  for name in ("pair_files.py", "study.py"):
    for node in ast.walk(ast.parse((folder / name).read_text(encoding="utf-8"))):
      if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
        mode = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "r"
        assert "b" in mode or any(k.arg == "encoding" for k in node.keywords), f"{name}:{node.lineno}"
