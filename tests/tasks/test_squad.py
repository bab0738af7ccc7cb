"""SQuAD reading, features (alignment round trip, windows, labels) and post-processing."""

import gzip
import json
import os

import numpy as np
import pytest

from official_albert.data import squad_features
from tasks import squad


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
  from official_albert.tokenization import FullTokenizer
  return FullTokenizer(spm_model_file, do_lower_case=True)


def _write_json(path, obj):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f)
  return str(path)


def _nested(context, qas, version="v2.0"):
  return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def _qa(qid, context, answer, plausible=False):
  if answer is None:
    return {"id": qid, "question": "What is it?", "answers": [], "is_impossible": True}
  return {"id": qid, "question": "What is it?", "is_impossible": False,
          "answers": [{"text": answer, "answer_start": context.index(answer)}]}


# ----------------------------------------------------------------------------------------------------- reading


def test_bad_answer_start_and_empty_context_are_clear_errors(tmp_path):
  ctx = "Alpha beta gamma."
  bad = _nested(ctx, [{"id": "q-bad", "question": "?", "answers": [{"text": "beta", "answer_start": 0}]}])
  path = _write_json(tmp_path / "bad.json", bad)
  with pytest.raises(squad.SquadDataError, match=r"bad\.json: question q-bad: answer 'beta' is not at answer_start=0"):
    squad.read_squad_examples(path, is_training=True)
  empty = _nested("  ", [_qa("q-empty", "x", None)])
  path = _write_json(tmp_path / "empty.json", empty)
  with pytest.raises(squad.SquadDataError, match=r"empty\.json: question q-empty: empty context"):
    squad.read_squad_examples(path, is_training=False)
  two = _nested(ctx, [{"id": "q2", "question": "?", "answers": [{"text": "beta", "answer_start": 6},
                                                                 {"text": "gamma", "answer_start": 11}]}], "1.1")
  path = _write_json(tmp_path / "two.json", two)
  with pytest.raises(squad.SquadDataError, match="q2: training questions need exactly 1 answer"):
    squad.read_squad_examples(path, is_training=True)
  assert squad.read_squad_examples(path, is_training=False)[0].answers == ["beta", "gamma"]


def test_answers_of_an_evaluation_file_are_scored_by_their_text(tmp_path, caplog):
  """Scoring reads only the answers' texts (the official scripts ignore answer_start): an evaluation file whose
  alternative answer is not at its answer_start is read with a counted warning (before: refused whole), and gives
  no span label; a training file still refuses it."""
  ctx = "Alpha beta gamma."
  qas = [{"id": "q", "question": "?", "answers": [{"text": "beta", "answer_start": 6},
                                                   {"text": "gamma", "answer_start": 2}]},
         {"id": "r", "question": "?", "answers": [{"text": "gamma", "answer_start": 0}]}]
  path = _write_json(tmp_path / "dev.json", _nested(ctx, qas, "1.1"))
  with caplog.at_level("WARNING"):
    examples = squad.read_squad_examples(path, is_training=False)
  assert [e.answers for e in examples] == [["beta", "gamma"], ["gamma"]]
  assert (examples[0].start_char, examples[1].start_char) == (6, -1)
  assert "2 answers of 2 questions are not at their answer_start (e.g. question q)" in caplog.text
  with pytest.raises(squad.SquadDataError, match=r"question r: answer 'gamma' is not at answer_start=0"):
    squad.read_squad_examples(_write_json(tmp_path / "train.json", _nested(ctx, qas[1:], "1.1")), is_training=True)


@pytest.mark.parametrize("answer, message", [
    ({"text": "", "answer_start": 0}, r"question q: the answer's text is empty; an answerable training question"),
    ({"text": "", "answer_start": -1}, r"question q, answer 0: 'answer_start' is -1; a character offset counts"),
    ({"text": "a", "answer_start": -17}, r"'answer_start' is -17"),
], ids=["empty-text", "minus-one", "negative"])
def test_an_empty_answer_or_a_negative_offset_is_refused_for_training(tmp_path, answer, message):
  """Before: read, and the question trained with start / end labels -1 (no span, no [CLS]: a broken gather)."""
  ctx = "Alpha beta gamma."
  path = _write_json(tmp_path / "t.json", _nested(ctx, [{"id": "q", "question": "?", "answers": [answer]}]))
  with pytest.raises(squad.SquadDataError, match=message):
    squad.read_squad_examples(path, is_training=True)


@pytest.mark.parametrize("value, impossible", [
    (False, False), ("false", False), ("False", False), (0, False), (True, True), ("true", True), (1, True)],
    ids=["bool-false", "str-false", "str-False", "int-0", "bool-true", "str-true", "int-1"])
def test_is_impossible_strings_are_read_as_their_truth(tmp_path, value, impossible):
  """Some converters write "is_impossible": "false"; bool("false") made such a question unanswerable."""
  ctx = "Alpha beta gamma."
  qa = {"id": "q", "question": "?", "answers": [] if impossible else [{"text": "beta", "answer_start": 6}],
        "is_impossible": value}
  (example,) = squad.read_squad_examples(_write_json(tmp_path / "t.json", _nested(ctx, [qa])), is_training=True)
  assert example.is_impossible is impossible
  assert example.orig_answer_text == ("" if impossible else "beta")


def test_an_unreadable_is_impossible_is_named(tmp_path):
  qa = {"id": "q", "question": "?", "answers": [], "is_impossible": "maybe"}
  path = _write_json(tmp_path / "t.json", _nested("Alpha beta.", [qa]))
  with pytest.raises(squad.SquadDataError, match=r"question q: 'is_impossible' must be true or false, got 'maybe'"):
    squad.read_squad_examples(path, is_training=False)


def test_nested_and_flat_files_read_the_same(shared_data_dir):
  nested = squad.read_squad_examples(str(shared_data_dir / "squad" / "dev-v2.0.json"), is_training=False)
  flat = squad.read_squad_examples(str(shared_data_dir / "squad" / "sample.json"), is_training=False)
  assert len(nested) == len(flat) == 14
  by_id = {e.qas_id: e for e in flat}
  for e in nested:
    f = by_id[e.qas_id]
    assert (f.question_text, f.paragraph_text, f.is_impossible, f.orig_answer_text) == (
        e.question_text, e.paragraph_text, e.is_impossible, e.orig_answer_text)
  assert sum(e.is_impossible for e in nested) > 0 and sum(not e.is_impossible for e in nested) > 0


def test_a_gzip_squad_file_reads_as_the_plain_one_and_is_a_raw_input(shared_data_dir, tmp_path):
  from official_albert import train  # pylint: disable=import-outside-toplevel
  from tasks.squad import data as squad_data  # pylint: disable=import-outside-toplevel
  plain = str(shared_data_dir / "squad" / "dev-v2.0.json")
  with open(plain, "rb") as f:
    packed = gzip.compress(f.read())
  (tmp_path / "dev-v2.0.json.gz").write_bytes(packed)
  want = squad.read_squad_examples(plain, is_training=False)
  got = squad.read_squad_examples(str(tmp_path / "dev-v2.0.json.gz"), is_training=False)
  assert [vars(e) for e in got] == [vars(e) for e in want] and len(got) == 14
  params = train.build_params("squad_v2")
  config = params.task.validation_data.replace(input_path=str(tmp_path / "dev-v2.0.json.gz"))
  assert squad_data.raw_writer(params.task, config, "eval") is not None  # (not taken for records)
  (tmp_path / "cut.json.gz").write_bytes(packed[:len(packed) // 2])
  with pytest.raises(squad.SquadDataError, match=r"cut\.json\.gz: not a readable gzip file \(EOFError"):
    squad.read_squad_examples(str(tmp_path / "cut.json.gz"), is_training=False)


# ---------------------------------------------------------------------------------------------------- features


def _check_round_trip(examples, features):
  """Every answer inside a window decodes, from its token positions, to the exact original substring."""
  decoded = set()
  for f in features:
    ex = examples[f.example_index]
    if f.is_impossible:
      assert (f.start_position, f.end_position) == (0, 0)
      continue
    assert f.start_position >= f.doc_offset and f.p_mask[f.start_position] == 0
    assert squad.feature_text(ex, f, f.start_position, f.end_position) == ex.orig_answer_text
    decoded.add(ex.qas_id)
  return decoded


@pytest.mark.parametrize("max_seq_length,doc_stride,max_query_length", [(384, 128, 64), (96, 24, 24)])
def test_dev_v2_every_gold_answer_round_trips(shared_data_dir, tokenizer, max_seq_length, doc_stride,
                                              max_query_length):
  examples = squad.read_squad_examples(str(shared_data_dir / "squad" / "dev-v2.0.json"), is_training=True)
  features, stats = squad.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                                       max_query_length)
  assert stats.mismatched_examples == [] and stats.answers_off_token_boundary == []
  answerable = {e.qas_id for e in examples if not e.is_impossible}
  assert _check_round_trip(examples, features) == answerable
  assert [f.unique_id for f in features] == list(range(1000000000, 1000000000 + len(features)))
  # Every paragraph token is the max-context token of exactly one window of its example.
  by_example = {}
  for f in features:
    by_example.setdefault(f.example_index, []).append(f)
  for feats in by_example.values():
    counts = {}
    for f in feats:
      for pos, is_max in f.token_is_max_context.items():
        key = f.token_to_orig[pos]
        counts[key] = counts.get(key, 0) + int(is_max)
    assert set(counts.values()) == {1}


def test_feature_layout_p_mask_segments_and_windows(tokenizer):
  ctx = " ".join(f"word{i} is here." for i in range(60))
  ex = squad.SquadExample("q", "Where is word7?", ctx, "word1", ctx.index("word1"), False, ["word1"])
  features, _ = squad.convert_examples_to_features([ex], tokenizer, max_seq_length=64, doc_stride=16,
                                                   max_query_length=16)
  assert len(features) > 3
  q_len = len(tokenizer.tokenize("Where is word7?"))
  for f in features:
    n = sum(f.input_mask)
    assert f.input_word_ids[0] == 2 and f.input_word_ids[q_len + 1] == 3 and f.input_word_ids[n - 1] == 3
    assert f.doc_offset == q_len + 2
    assert f.input_type_ids[:q_len + 2] == [0] * (q_len + 2)
    assert f.input_type_ids[q_len + 2:n] == [1] * (n - q_len - 2)
    assert f.p_mask[0] == 0 and f.p_mask[1:q_len + 2] == [1] * (q_len + 1)
    assert f.p_mask[q_len + 2:n - 1] == [0] * (n - q_len - 3) and f.p_mask[n - 1:] == [1] * (64 - n + 1)
    assert sorted(f.token_to_orig) == list(range(q_len + 2, n - 1))
  # The answer (token ~8) is in the first window only (windows advance 16 tokens); later windows label [CLS] and
  # is_impossible (v1 data too).
  assert features[0].is_impossible == 0 and features[0].start_position > 0
  assert all((f.start_position, f.end_position, f.is_impossible) == (0, 0, 1) for f in features[2:])
  # Windows advance by doc_stride tokens.
  firsts = [f.token_to_orig[f.doc_offset][0] for f in features]
  assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
  arrays = squad.features_to_arrays(features, is_training=True)
  assert arrays["input_word_ids"].shape == (len(features), 64) and arrays["start_positions"].dtype == np.int32


@pytest.mark.parametrize("context,answer", [
    ("Café  Müller opened in 1990, in Zürich.", "Müller"),
    ("Numbers: 1990, 2,500, and 3.0, all parsed.", "2,500"),
    ("He said ``hello'' twice.\n\nThen left.", "hello'' twice"),
    ("Ｆｕｌｌ－width ＡＢＣ text and ﬁne ligatures.", "ＡＢＣ"),
    ("Korean 한국어 text with Ǆ and ΣΑΣ words.", "한국어"),
    ("Tabs\tand\u00a0nbsp\u2003spaces end here.", "nbsp\u2003spaces"),
])
def test_alignment_round_trips_unusual_text(tokenizer, context, answer):
  ex = squad.SquadExample("q", "Which?", context, answer, context.index(answer), False, [answer])
  features, stats = squad.convert_examples_to_features([ex], tokenizer, 64, 32, 16)
  assert stats.mismatched_examples == []
  assert _check_round_trip([ex], features) == {"q"}


@pytest.mark.parametrize("mode", ["reference", "upstream_py3"])
def test_alignment_with_other_tokenizer_modes(spm_model_file, mode):
  from official_albert.tokenization import FullTokenizer
  tok = FullTokenizer(spm_model_file, mode=mode)
  context = "In 1990, about 3,500, or 12%, of ``the files'' were parsed."
  examples = [squad.SquadExample(f"q{i}", "Which?", context, a, context.index(a), False, [a])
              for i, a in enumerate(["1990", "3,500", "``the files''"])]
  features, stats = squad.convert_examples_to_features(examples, tok, 64, 32, 16)
  assert stats.mismatched_examples == [] and stats.answers_off_token_boundary == []
  assert _check_round_trip(examples, features) == {"q0", "q1", "q2"}
  # (review s51: the reference mode lower-cases the whole string, so a word-final Σ became ς in its pieces and σ in
  # the per-character walk: the Σ ending an answer was cut off; a half-width voiced mark ﾞ was left off a span)
  greek = "Ο ΟΔΥΣΣΕΥΣ ΗΤΑΝ ΒΑΣΙΛΙΑΣ ｶﾞ."
  examples = [squad.SquadExample(f"g{i}", "Who?", greek, a, greek.index(a), False, [a])
              for i, a in enumerate(["ΟΔΥΣΣΕΥΣ", "ΒΑΣΙΛΙΑΣ", "ｶﾞ"])]
  features, stats = squad.convert_examples_to_features(examples, tok, 64, 32, 16)
  assert stats.answers_off_token_boundary == []
  assert _check_round_trip(examples, features) == {"g0", "g1", "g2"}


def test_preprocess_with_offsets_matches_reference_preprocess():
  from official_albert.tokenization import preprocess_text
  for text in ["  Café\t\tMüller  ", "ÀÉÎÕÜ ﬁ x", "a \u00a0 b", "Ǆemal"]:
    for lower in (False, True):
      norm, offsets = squad.preprocess_with_offsets(text, lower)
      assert norm == preprocess_text(text, lower=lower)
      assert len(offsets) == len(norm) and offsets == sorted(offsets)


def test_hf_quote_pairs_align_to_both_of_their_characters(tokenizer):
  """The "hf" tokenizer mode turns `` and '' into " before SentencePiece; the alignment does the same, each '"'
  covering its pair. Before: the '"' pieces matched nothing, this short paragraph aligned at 73% and the example was
  dropped as a MISMATCH (no features, the fallback answer)."""
  from official_albert.tokenization import preprocess_text
  from official_albert.tokenization.alignment import align_tokens
  context = "Ann wrote ``Up''."
  examples = [squad.SquadExample(f"q{i}", "What?", context, a, context.index(a), False, [a])
              for i, a in enumerate(["``Up''", "Up"])]
  features, stats = squad.convert_examples_to_features(examples, tokenizer, 64, 32, 16)
  assert stats.mismatched_examples == [] and stats.answers_off_token_boundary == []
  assert _check_round_trip(examples, features) == {"q0", "q1"}
  tokens = tokenizer.tokenize(context)
  alignment = align_tokens(tokens, context, lower=True, normalize_quotes=True)
  assert alignment.matched_fraction == 1.0
  assert [context[s:e] for t, s, e in zip(tokens, alignment.starts, alignment.ends) if t == '"'] == ["``", "''"]
  for text in ["a ``b'' c", "```x'''", "`'`' ''``", "x ` ` y '", "Ǆ``É''  ''"]:
    for lower in (False, True):
      norm, offsets = squad.preprocess_with_offsets(text, lower, normalize_quotes=True)
      assert norm == preprocess_text(text, lower=lower, normalize_quotes=True)
      assert len(offsets) == len(norm) and offsets == sorted(offsets)


def test_badly_aligned_example_is_counted_and_gets_fallback(tokenizer, caplog):
  ex = squad.SquadExample("q-mis", "Which?", "abc def", "abc", 0, False, ["abc"])
  with caplog.at_level("WARNING"):
    features, stats = squad.convert_examples_to_features([ex], tokenizer, 64, 32, 16, min_match_fraction=1.01)
  assert features == [] and stats.mismatched_examples == ["q-mis"] and "MISMATCH" in caplog.text
  preds, _ = squad.postprocess_v1([ex], features, {})
  assert preds == {"q-mis": "empty"}
  preds, _, null = squad.postprocess_v2([ex], features, {})
  assert preds == {"q-mis": ""} and null == {"q-mis": 1e6}


def _reference_check_is_max_context(doc_spans, cur_span_index, position):
  """run_squad_sp.py's `_check_is_max_context`, verbatim but for spans given as (start, length) tuples."""
  best_score = None
  best_span_index = None
  for (span_index, doc_span) in enumerate(doc_spans):
    end = doc_span[0] + doc_span[1] - 1
    if position < doc_span[0]:
      continue
    if position > end:
      continue
    num_left_context = position - doc_span[0]
    num_right_context = end - position
    score = min(num_left_context, num_right_context) + 0.01 * doc_span[1]
    if best_score is None or score > best_score:
      best_score = score
      best_span_index = span_index
  return cur_span_index == best_span_index


def test_max_context_owners_equal_the_reference_check_ties_included():
  """Over a grid of paragraph lengths, windows and strides (and the reference's 317-token windows at stride 128), each
  token's owner is the one window where the reference's check says True. Equal scores are frequent (equal-length
  windows give a token the same context in two of them); there the first window wins, as the reference's `>`."""
  configs = [(n, m, stride) for n in range(1, 120) for m in (8, 13, 16, 21) for stride in (3, 5, 8, 16)]
  configs += [(700, 317, 128), (500, 317, 128)]
  ties = 0
  for num_tokens, max_tokens_for_doc, stride in configs:
    spans = squad_features.doc_spans(num_tokens, max_tokens_for_doc, stride)
    owners = squad_features.max_context_owners(spans, num_tokens)
    for position in range(num_tokens):
      # The reference's check is True for exactly one window per token.
      assert _reference_check_is_max_context(spans, owners[position], position), (
          num_tokens, max_tokens_for_doc, stride, spans, position, owners[position])
      scores = [squad_features.max_context_score(s, n, position) for s, n in spans if s <= position < s + n]
      ties += scores.count(max(scores)) > 1
  assert ties > 1000


# --------------------------------------------------------------------------------------------- post-processing


def _one_feature(tokenizer, context="The Normans lived in Normandy, a region in France.", answer="Normandy",
                 max_seq_length=64):
  ex = squad.SquadExample("q1", "Where did they live?", context, answer, context.index(answer), False, [answer])
  features, _ = squad.convert_examples_to_features([ex], tokenizer, max_seq_length, 32, 16)
  assert len(features) == 1
  return ex, features[0]


def test_postprocess_v1_picks_best_valid_span_and_writes_files(tokenizer, tmp_path):
  ex, f = _one_feature(tokenizer)
  L = len(f.input_word_ids)
  start_logits, end_logits = np.full(L, -5.0), np.full(L, -5.0)
  start_logits[0] = end_logits[0] = 20.0  # [CLS] and question tokens are never answers
  start_logits[2] = 15.0
  start_logits[f.start_position] = 10.0
  end_logits[f.end_position] = 10.0
  end_logits[f.doc_offset] = 9.0  # before the start: only valid with an earlier start
  preds, nbest = squad.postprocess_v1([ex], [f], {f.unique_id: {"start_logits": start_logits,
                                                                  "end_logits": end_logits}})
  assert preds == {"q1": "Normandy"}
  probs = [n["probability"] for n in nbest["q1"]]
  assert len(nbest["q1"]) <= 20 and sum(probs) == pytest.approx(1.0) and probs == sorted(probs, reverse=True)
  assert len({n["text"] for n in nbest["q1"]}) == len(nbest["q1"])
  assert set(nbest["q1"][0]) == {"text", "probability", "start_logit", "end_logit"}
  # A span longer than max_answer_length is rejected.
  preds, _ = squad.postprocess_v1([ex], [f], {f.unique_id: {"start_logits": start_logits,
                                                             "end_logits": end_logits}}, max_answer_length=0)
  assert preds == {"q1": "empty"}
  (tmp_path / "null_odds.json").write_text('{"q0": 1.0}')  # an earlier v2 run's, in the same folder
  paths = squad.write_predictions(str(tmp_path), preds, nbest)
  assert json.load(open(paths["predictions"])) == {"q1": "empty"}
  assert "null_odds" not in paths and not [n for n in os.listdir(tmp_path) if ".tmp" in n]
  assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "predictions.json"]  # (the stale one removed)


def test_answers_never_carry_the_space_of_a_bare_underline_piece(tokenizer):
  """A bare "▁" piece (SentencePiece puts one before "£", "(", CJK, ...) covers no character; a span starting or
  ending at it takes its text and offsets from its covered pieces, as the reference strips its answer, and the
  n-best is deduplicated on that text. Before: ' £5 million' (with the space) and '£5 million' were two entries."""
  context = "He paid £5 million in 北京 today."
  ex, f = _one_feature(tokenizer, context, "£5 million")
  bare = f.start_position - 1
  assert f.tokens[bare] == "▁" and f.tokens[f.start_position] == "£"
  L = len(f.input_word_ids)
  start_logits, end_logits = np.full(L, -20.0), np.full(L, -20.0)
  start_logits[bare], start_logits[f.start_position], end_logits[f.end_position] = 10.0, 9.0, 10.0
  preds, nbest = squad.postprocess_v1([ex], [f], {f.unique_id: {"start_logits": start_logits,
                                                                  "end_logits": end_logits}}, char_offsets=True)
  assert preds == {"q1": "£5 million"}
  texts = [n["text"] for n in nbest["q1"]]
  assert texts.count("£5 million") == 1 and all(t == t.strip() for t in texts)
  assert all(context[n["start"]:n["end"]] == n["text"] for n in nbest["q1"])
  results = {f.unique_id: _v2_result(f, bare, f.end_position)}
  preds, nbest, _ = squad.postprocess_v2([ex], [f], results, char_offsets=True)
  assert preds == {"q1": "£5 million"} and (nbest["q1"][0]["start"], nbest["q1"][0]["end"]) == (8, 18)
  assert squad.feature_text(ex, f, bare, bare) == ""  # covers no character


def _v2_result(f, start, end, start_lp=-0.1, end_lp=-0.2, cls=0.0, k=5):
  st_idx = np.array([start] + [0] * (k - 1))  # the other beams point at [CLS] (invalid)
  en_idx = np.zeros(k * k, np.int64)
  en_idx[0] = end
  return {"start_top_log_probs": np.array([start_lp] + [-9.0] * (k - 1)), "start_top_index": st_idx,
          "end_top_log_probs": np.array([end_lp] + [-9.0] * (k * k - 1)), "end_top_index": en_idx,
          "cls_logits": np.float32(cls)}


def test_postprocess_v2_null_score_is_min_over_features_and_thresholds(tokenizer, tmp_path):
  ctx = " ".join(f"token{i} stays." for i in range(40)) + " The answer is Normandy today."
  ex = squad.SquadExample("q1", "Where?", ctx, "Normandy", ctx.index("Normandy"), False, ["Normandy"])
  features, _ = squad.convert_examples_to_features([ex], tokenizer, 64, 16, 16)
  assert len(features) > 2
  results = {}
  for i, f in enumerate(features):
    if f.is_impossible:
      results[f.unique_id] = _v2_result(f, 0, 0, cls=3.0 + i)
    else:
      results[f.unique_id] = _v2_result(f, f.start_position, f.end_position, cls=-1.5)
  preds, nbest, null = squad.postprocess_v2([ex], features, results)
  assert preds == {"q1": "Normandy"} and null == {"q1": -1.5}
  assert nbest["q1"][0]["start_log_prob"] == pytest.approx(-0.1)
  assert squad.apply_null_threshold(preds, null, -2.0) == {"q1": ""}
  assert squad.apply_null_threshold(preds, null, -1.5) == {"q1": "Normandy"}
  assert squad.apply_null_threshold(preds, null, -1.5, null_at_threshold=True) == {"q1": ""}
  paths = squad.write_predictions(str(tmp_path), preds, nbest, null)
  assert json.load(open(paths["null_odds"])) == {"q1": -1.5}
  # The end must not come before the start: such a pair is skipped, leaving "" with -1e6 log probs.
  f0 = next(f for f in features if not f.is_impossible)
  bad = {f.unique_id: _v2_result(f, f0.end_position, f0.start_position - 1) for f in features}
  preds, nbest, _ = squad.postprocess_v2([ex], features, bad)
  assert preds == {"q1": ""} and nbest["q1"][0]["start_log_prob"] == -1e6


def test_v2_protocols_fixed_and_dev_tuned(tmp_path):
  dataset = [{"title": "t", "paragraphs": [{"context": "Paris is in France.", "qas": [
      {"id": "a", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]},
      {"id": "b", "question": "?", "answers": [], "is_impossible": True},
      {"id": "c", "question": "?", "answers": [], "is_impossible": True}]}]}]
  preds = {"a": "Paris", "b": "France", "c": "Paris"}
  null = {"a": -2.0, "b": 0.5, "c": -1.0}
  out = squad.evaluate_v2_protocols(dataset, preds, null, fixed_threshold=0.0)
  fixed, tuned = out["fixed_threshold"], out["dev_tuned_threshold_reference"]
  assert fixed["null_score_diff_threshold"] == 0.0 and fixed["exact"] == pytest.approx(200 / 3)
  # find_best_thresh answers a (na -2.0) only: best_f1_thresh = -2.0 (best_f1 100). The reference's re-write
  # predicts null at or above the threshold, so it also nulls `a` itself (the upstream edge case, kept on purpose).
  assert tuned["null_score_diff_threshold"] == -2.0 and tuned["search_best_f1"] == pytest.approx(100.0)
  assert tuned["exact"] == pytest.approx(200 / 3) and tuned["HasAns_exact"] == 0.0


# ------------------------------------------------------------------------------------------- malformed files


def _three_questions():
  ctx = "Paris is in France. The dog is lazy."
  return {"version": "v2.0", "data": [{"title": "Geo", "paragraphs": [{"context": ctx, "qas": [
      {"id": "a", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 0}], "is_impossible": False},
      {"id": "b", "question": "Who?", "answers": [], "is_impossible": True},
      {"id": "c", "question": "What?", "answers": [{"text": "France", "answer_start": 12}],
       "is_impossible": False}]}]}]}


def _drop(path_keys):
  data = _three_questions()
  entry = data
  for k in path_keys[:-1]:
    entry = entry[k]
  del entry[path_keys[-1]]
  return data


@pytest.mark.parametrize("keys,expected", [
    (("data", 0, "paragraphs", 0, "qas", 1, "question"),
     r"article 0 \('Geo'\), paragraph 0, question b: missing key 'question'"),
    (("data", 0, "paragraphs", 0, "qas", 2, "id"),
     r"article 0 \('Geo'\), paragraph 0, question #2 \(no id\): missing key 'id'"),
    (("data", 0, "paragraphs", 0, "context"), r"article 0 \('Geo'\), paragraph 0: missing key 'context'"),
    (("data", 0, "paragraphs", 0, "qas", 2, "answers", 0, "answer_start"),
     r"article 0 \('Geo'\), paragraph 0, question c, answer 0: missing key 'answer_start'"),
    (("data", 0, "paragraphs", 0, "qas", 2, "answers", 0, "text"),
     r"article 0 \('Geo'\), paragraph 0, question c, answer 0: missing key 'text'"),
    (("data", 0, "paragraphs", 0, "qas", 2, "answers"),
     r"article 0 \('Geo'\), paragraph 0, question c \(training data needs the gold answer\): missing key 'answers'"),
])
def test_missing_keys_name_file_entry_question_and_key(tmp_path, keys, expected):
  # Before: a bare KeyError naming only the key (and for a missing 'answers' in v2 training data, a silently
  # unanswerable question).
  path = _write_json(tmp_path / "train.json", _drop(keys))
  with pytest.raises(squad.SquadDataError, match=r"train\.json: " + expected + r"\. .*; expected layout: "):
    squad.read_squad_examples(path, is_training=True)


def test_wrong_types_and_flat_rows_are_named(tmp_path):
  data = _three_questions()
  data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = "zero"
  path = _write_json(tmp_path / "t.json", data)
  with pytest.raises(squad.SquadDataError, match=r"t\.json: article 0 \('Geo'\), paragraph 0, question a, answer 0: "
                                                 r"'answer_start' must be a character offset \(an integer\), got "
                                                 r"'zero'"):
    squad.read_squad_examples(path, is_training=False)
  data["data"][0]["paragraphs"][0]["qas"] = {"a": 1}
  path = _write_json(tmp_path / "t.json", data)
  with pytest.raises(squad.SquadDataError, match=r"t\.json: article 0 \('Geo'\), paragraph 0: 'qas' is a JSON "
                                                 r"object, expected a JSON array"):
    squad.read_squad_examples(path, is_training=False)
  rows = {"data": [{"id": "x1", "context": "Paris.", "question": "Where?",
                    "answers": {"text": ["Paris"], "answer_start": [0]}},
                   {"id": "x2", "context": "Paris.", "answers": {"text": ["Paris"], "answer_start": [0]}}]}
  path = _write_json(tmp_path / "flat.json", rows)
  with pytest.raises(squad.SquadDataError, match=r"flat\.json: row 1 \(id 'x2'\): missing key 'question'"):
    squad.read_squad_examples(path, is_training=False)


def test_a_repeated_question_id_is_refused_naming_both_places(tmp_path):
  # Two merged files whose ids both restart at 1 (one as a number). Before: read silently; predictions.json kept one
  # answer for both questions and the metric scored one against the other's answer.
  data = _three_questions()
  data["data"].append({"title": "Zoo", "paragraphs": [{"context": "The dog is lazy.", "qas": [
      {"id": "1", "question": "Who?", "answers": [{"text": "dog", "answer_start": 4}]}]}]})
  data["data"][0]["paragraphs"][0]["qas"][2]["id"] = 1
  path = _write_json(tmp_path / "merged.json", data)
  with pytest.raises(squad.SquadDataError, match=r"merged\.json: article 1 \('Zoo'\), paragraph 0, question 1: the "
                                                 r"question id '1' is used again \(first at article 0 \('Geo'\), "
                                                 r"paragraph 0, question 1\)\..*give each question its own id"):
    squad.read_squad_examples(path, is_training=False)
  rows = {"data": [{"id": i, "context": "Paris.", "question": "Where?",
                    "answers": {"text": ["Paris"], "answer_start": [0]}} for i in ("x1", "x2", "x1")]}
  path = _write_json(tmp_path / "flat.json", rows)
  with pytest.raises(squad.SquadDataError, match=r"flat\.json: row 2 \(id 'x1'\): the question id 'x1' is used "
                                                 r"again \(first at row 0\)"):
    squad.read_squad_examples(path, is_training=False)


def test_malformed_json_names_the_file(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"version": "v2.0", "data": [\n {"title": "x",, }]}')
  # Before: json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 2 column 16.
  with pytest.raises(squad.SquadDataError, match=r"broken\.json: not valid JSON: Expecting property name enclosed in "
                                                 r"double quotes at line 2, column 16"):
    squad.read_squad_examples(str(path), is_training=True)


def test_json_with_a_utf8_byte_order_mark_is_read(tmp_path):
  # Before: "bom.json: not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)"; Windows editors write one.
  path = tmp_path / "bom.json"
  path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_three_questions()).encode("utf-8"))
  assert [e.qas_id for e in squad.read_squad_examples(str(path), is_training=False)] == ["a", "b", "c"]


# ---------------------------------------------------------------------------------------- best checkpoint (v2)


def test_v2_best_checkpoint_is_chosen_by_the_dev_tuned_f1():
  """Reference §5.2: the kept SQuAD 2.0 checkpoint is the one with the best F1 after the dev-tuned threshold, not the
  best F1 at a fixed threshold. Checkpoint A wins at the fixed threshold 0, B with the tuned one."""
  import types

  from official_albert.training import evaluation
  ctx = "Paris is in France."
  qas = [{"id": f"a{i}", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]} for i in (1, 2, 3)]
  qas.append({"id": "n1", "question": "?", "answers": [], "is_impossible": True})
  dataset = [{"title": "t", "paragraphs": [{"context": ctx, "qas": qas}]}]
  outputs = {
      "A": ({"a1": "Paris", "a2": "zzz", "a3": "zzz", "n1": "x"}, {"a1": -1.0, "a2": -1.0, "a3": -1.0, "n1": 1.0}),
      "B": ({"a1": "Paris", "a2": "Paris", "a3": "Paris", "n1": "x"}, {"a1": 1.0, "a2": 2.0, "a3": 3.0, "n1": 4.0}),
  }
  task = squad.SquadTask(squad.SquadTaskConfig(version_2_with_negative=True))
  task._eval_data = (None, None, dataset)  # pylint: disable=protected-access
  task.postprocess = lambda logs: (None, logs["preds"], {}, logs["null"])
  results = {name: task.reduce_aggregated_logs({"preds": p, "null": n}) for name, (p, n) in outputs.items()}
  assert results["A"]["f1"] == pytest.approx(50.0) and results["B"]["f1"] == pytest.approx(25.0)
  assert results["A"]["best_f1"] == pytest.approx(25.0) and results["B"]["best_f1"] == pytest.approx(50.0)
  assert results["B"]["best_f1_thresh"] == 3.0 and results["B"]["best_f1"] == results["B"]["dev_tuned_f1"]
  # The metric the trainer keeps model.ckpt-best by (no trainer.best_checkpoint_metric override).
  trainer = types.SimpleNamespace(task=task, params=types.SimpleNamespace(
      trainer=types.SimpleNamespace(best_checkpoint_metric="", best_checkpoint_mode="max")))
  name, higher = evaluation.Evaluator(trainer).best_metric()
  assert (name, higher) == ("best_f1", True)
  assert max(results, key=lambda k: results[k][name]) == "B"
  v1 = squad.SquadTask(squad.SquadTaskConfig(version_2_with_negative=False))
  assert v1.best_metric == "f1"  # v1: the reference keeps the best f1 (§5.2)
