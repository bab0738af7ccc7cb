"""SQuAD features on degenerate settings and characters (audit s31, findings 2, 4 and 5).

A stride or question cap below 1 (it hung / dropped the question), an answer no piece covers (it was written as a
training record at position -1) and one dropped character in a long paragraph (it sent the whole paragraph to a
quadratic `difflib` and could leave it a MISMATCH).
"""

import contextlib
import signal

import pytest

from official_albert.data import squad_features
from official_albert.tokenization.alignment import align_tokens
from tasks import squad


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
  from official_albert.tokenization import FullTokenizer
  return FullTokenizer(spm_model_file, do_lower_case=True)


@contextlib.contextmanager
def _bounded(seconds=5):
  """Turns a hang (the bug: `doc_spans` with a stride of 0 never returned) into a test failure."""
  def _alarm(*_):
    raise AssertionError(f"did not return within {seconds} s (endless loop)")
  previous = signal.signal(signal.SIGALRM, _alarm)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("value", [0, -3])
def test_fit_windows_refuses_a_stride_or_question_cap_below_one(value):
  with pytest.raises(ValueError, match=f"doc_stride={value} must be >= 1"):
    squad_features.fit_windows(384, value, None)
  with pytest.raises(ValueError, match=f"max_query_length={value} must be >= 1"):
    squad_features.fit_windows(384, None, value)
  assert squad_features.fit_windows(384, 1, 1) == (1, 1)


@pytest.mark.parametrize("stride", [0, -3])
def test_doc_spans_with_a_stride_below_one_raises_instead_of_looping(stride):
  with _bounded(), pytest.raises(ValueError, match="doc_stride"):
    squad_features.doc_spans(100, 40, stride)
  with _bounded(), pytest.raises(ValueError, match="no room for the paragraph"):
    squad_features.doc_spans(100, 0, 8)


def test_features_refuse_a_zero_stride_or_question_cap(tokenizer):
  ctx = " ".join(f"word{i} is here." for i in range(60))
  ex = squad.SquadExample("q", "Where is word7?", ctx, "word1", ctx.index("word1"), False, ["word1"])
  with _bounded(), pytest.raises(ValueError, match="doc_stride=0"):
    squad.convert_examples_to_features([ex], tokenizer, max_seq_length=64, doc_stride=0, max_query_length=16)
  with pytest.raises(ValueError, match="max_query_length=0"):
    squad.convert_examples_to_features([ex], tokenizer, max_seq_length=64, doc_stride=16, max_query_length=0)


@pytest.mark.parametrize("answer", ["\u200b", "\ufeff", "\x01"])
def test_an_answer_no_piece_covers_is_labelled_cls_never_minus_one(tokenizer, answer, caplog):
  """Before: (start, end, impossible) = (-1, -1, 0) in a training record (an InvalidArgumentError mid-training on
  CPU, a silent zero span loss on GPU). Now every window labels [CLS], as an answer outside the window."""
  ctx = "The invoice " + answer + " is wrong and it crashes on start."
  ex = squad.SquadExample("q0", "What is wrong?", ctx, answer, ctx.index(answer), False, [answer])
  with caplog.at_level("WARNING"):
    features, stats = squad.convert_examples_to_features([ex], tokenizer, 64, 32, 16)
  assert features and stats.answers_off_token_boundary == ["q0"] and "labelled [CLS]" in caplog.text
  assert {(f.start_position, f.end_position, f.is_impossible) for f in features} == {(0, 0, 1)}
  arrays = squad.features_to_arrays(features, is_training=True)
  assert arrays["start_positions"].min() >= 0 and arrays["end_positions"].min() >= 0


@pytest.mark.parametrize("dropped", ["\x01", "\u200b", "\ufeff"])
def test_one_dropped_character_in_a_long_paragraph_aligns_every_piece(tokenizer, dropped):
  """18k characters with one character SentencePiece drops: the pieces are those of the clean text and each maps to
  the same characters, shifted by one after the drop. Before: the whole paragraph went to `difflib` (seconds,
  quadratic) and on this repetitive text matched 51%, a MISMATCH with no features."""
  clean = "the invoice is wrong and it crashes on start. " * 400
  cut = 46 * 195  # (the start of a sentence: SentencePiece then splits both texts alike)
  text = clean[:cut] + dropped + clean[cut:]
  tokens = tokenizer.tokenize(text)
  assert tokens == tokenizer.tokenize(clean)
  expected = align_tokens(tokens, clean, lower=True)
  assert expected.matched_fraction == 1.0
  got = align_tokens(tokens, text, lower=True)
  shift = lambda offsets: [o + (o >= cut) for o in offsets]  # noqa: E731
  assert got.starts == shift(expected.starts) and got.ends == shift(expected.ends)
  assert got.matched_fraction > 0.999


@pytest.mark.parametrize("key, value", [("n_best_size", 0), ("max_answer_length", -1), ("start_n_top", 0),
                                        ("end_n_top", 0), ("doc_stride", 0), ("max_query_length", 0),
                                        ("n_best_size", 2.5)],
                         ids=["n_best", "max_answer", "start_n_top", "end_n_top", "doc_stride", "query", "float"])
def test_search_sizes_below_one_are_refused_at_start_up(key, value):
  """Before: n_best_size 0 or max_answer_length -1 ran, and every question got the fallback answer."""
  from official_albert.training.hyperparams import ConfigError
  squad.SquadTaskConfig().validate()
  with pytest.raises(ConfigError, match=rf"task\.{key} must be a whole number >= 1, got {value}"):
    squad.SquadTaskConfig(**{key: value}).validate()
