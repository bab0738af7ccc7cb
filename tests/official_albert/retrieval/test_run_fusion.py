"""`run_files.fuse`: reciprocal rank fusion of runs (a hybrid first stage), by hand on a small case."""

import pytest

from official_albert.retrieval import run_files


def test_reciprocal_rank_fusion_by_hand(tmp_path):
  bm25 = {"q": [("a", 9.0), ("b", 7.0), ("c", 1.0)], "only_bm25": [("x", 1.0)]}
  dense = {"q": [("c", 0.9), ("a", 0.8), ("d", 0.1)]}
  fused = run_files.fuse([bm25, dense], k=60)
  want = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62, "d": 1 / 63}
  assert [d for d, _ in fused["q"]] == ["a", "c", "b", "d"]  # (a and c: a's sum is larger by 1/62 - 1/63)
  assert dict(fused["q"]) == pytest.approx(want)
  assert fused["only_bm25"] == [("x", pytest.approx(1 / 61))]
  # Equal sums: the better best rank first, then the id.
  tied = run_files.fuse([{"q": [("b", 1.0), ("a", 0.5)]}, {"q": [("a", 1.0), ("b", 0.5)]}, {"q": [("z", 1.0)]}])
  assert [d for d, _ in tied["q"]] == ["a", "b", "z"]
  run_files.write_run(str(tmp_path / "fused.trec"), fused)
  assert run_files.read_run(str(tmp_path / "fused.trec")) == {q: [(d, pytest.approx(s)) for d, s in r]
                                                              for q, r in fused.items()}
  with pytest.raises(ValueError, match="at least one run"):
    run_files.fuse([])
