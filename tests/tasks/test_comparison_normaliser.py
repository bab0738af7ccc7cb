"""`comparison_text` normalises under the run's SentencePiece model's own rule, not always nmt_nfkc.

Before: a model trained with `normalization_rule_name=identity` keeps a zero-width space or a full-width letter as its
own character (other ids than "a b" / "A"), but the comparison normalised with nmt_nfkc and called both one text: a
valid hard negative was refused (`read_pairs`) and a ranking negative dropped (`read_groups`).
"""

import json
import logging

import pytest

from data_prep import train_sentencepiece
from official_albert.tokenization import FullTokenizer
from tasks.embedding import data as pair_data
from tasks.embedding.data import comparison_text
from tasks.ranking import data as ranking_data

# Texts that nmt_nfkc makes one (a zero-width space becomes a space, a full-width letter its ASCII one, a ligature its
# letters) and an identity model keeps apart.
PAIRS = [("a b c", "a\u200bb c"), ("ﬁne day", "fine day"), ("ｆｕｌｌ width", "full width")]
CASED = {"do_lower_case": False, "keep_accents": True, "remove_space": True, "tokenizer_mode": "hf"}


@pytest.fixture(scope="module")
def identity_spm(tmp_path_factory):
  """A tiny SentencePiece model trained (as data_prep.train_sentencepiece trains one) with the identity rule."""
  root = tmp_path_factory.mktemp("identity_spm")
  corpus = root / "corpus.txt"
  lines = [f"the cat sat on the mat {i} a b c fine day full width ﬁne ｆｕｌｌ" for i in range(200)]
  corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return train_sentencepiece.train_sentencepiece(
      [str(corpus)], str(root / "identity"), vocab_size=60, do_lower_case=False, hard_vocab_limit=False,
      extra_options={"normalization_rule_name": "identity"})


def test_identity_model_texts_compare_as_its_ids(identity_spm, spm_model_file):
  tokenizer = FullTokenizer(identity_spm, do_lower_case=False, keep_accents=True)
  options = dict(CASED, spm_model_file=identity_spm)
  for a, b in PAIRS:
    assert tokenizer.encode_ids(a) != tokenizer.encode_ids(b), (a, b)  # the model tells them apart
    assert comparison_text(a, options) != comparison_text(b, options), (a, b)
    assert comparison_text(a, CASED) == comparison_text(b, CASED), (a, b)  # nmt_nfkc (no model) calls them one
  # An nmt_nfkc model (the test fixture) compares as before: the same texts one, as its ids are.
  nfkc = FullTokenizer(spm_model_file, do_lower_case=False, keep_accents=True)
  for a, b in PAIRS:
    assert nfkc.encode_ids(a) == nfkc.encode_ids(b), (a, b)
    assert comparison_text(a, dict(CASED, spm_model_file=spm_model_file)) == comparison_text(b, CASED), (a, b)


def test_an_identity_models_negatives_are_kept(tmp_path, caplog, identity_spm):
  options = dict(CASED, spm_model_file=identity_spm)
  groups = tmp_path / "groups.jsonl"
  groups.write_text(json.dumps({"query": "q", "positive": "a b c", "negatives": ["a\u200bb c", "the cat"]}) + "\n",
                    encoding="utf-8")
  columns = {"query": "query", "positive": "positive", "negative": "negatives"}
  with caplog.at_level(logging.WARNING):
    kept = ranking_data.read_groups(str(groups), columns, 2, tokenizer_options=options)[0].negatives
  assert kept == ["a\u200bb c", "the cat"]
  assert "equal to their row's positive" not in caplog.text
  pairs = tmp_path / "pairs.tsv"
  pairs.write_text("anchor\tpositive\tnegative\nq\tfine day\tﬁne day\n", encoding="utf-8")
  sides = {"anchor": "anchor", "positive": "positive", "negative": "negative"}
  examples = pair_data.read_pairs(str(pairs), sides, tokenizer_options=options)
  assert [(e.positive, e.negative) for e in examples] == [("fine day", "ﬁne day")]


def test_the_ranking_task_compares_under_its_own_model(tmp_path, identity_spm):
  """The task hands its SentencePiece model to the comparison (`RowTask.comparison_options`)."""
  from tests.tasks.test_text_ranking import make_task  # noqa: PLC0415 (its helpers, not its tests)
  from tests.tasks.test_text_ranking import override  # noqa: PLC0415
  path = tmp_path / "groups.jsonl"
  path.write_text(json.dumps({"query": "q", "positive": "a b c", "negatives": ["a\u200bb c", "fine day"]}) + "\n",
                  encoding="utf-8")
  task = make_task(override(str(path), str(path), identity_spm, 1, num_negatives=1, do_lower_case=False),
                   str(tmp_path / "m"))
  assert task.read(task.params.train_data, "train")[0].negatives == ["a\u200bb c"]  # (kept: other ids)
  assert task.comparison_options().get("spm_model_file") == identity_spm


def test_the_models_whitespace_flag_is_read_from_its_proto(spm_model_file):
  """`spm_model.removes_extra_whitespaces` reads the flag the normaliser is given (sentencepiece < 0.2.1 reset a flag
  not passed to False): the fixture's True, and False once the proto says so."""
  from sentencepiece import sentencepiece_model_pb2  # (protobuf >= 7: the test venv's; the library reads the wire)

  from official_albert.tokenization import spm_model
  proto = open(spm_model_file, "rb").read()
  assert spm_model.removes_extra_whitespaces(proto) is True
  model = sentencepiece_model_pb2.ModelProto.FromString(proto)
  model.normalizer_spec.remove_extra_whitespaces = False
  assert spm_model.removes_extra_whitespaces(model.SerializeToString()) is False
