"""Tests for official_albert.tokenization: HF parity, in-graph parity, special tokens, digit-comma rule, packing."""

import csv
import itertools
import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep import corpus
from official_albert import tokenization
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import spm_model
from official_albert.tokenization import tokenizer as tokenizer_module

# Hand-picked inputs for every preprocessing step; each is also checked in-graph.
EDGE_CASES = [
    "", " ", "   \t\n ", "Hello I'm a [MASK] model.", "The quick brown fox.", "[MASK]", "x [MASK]", "a\u3000[MASK]",
    "  a [MASK]  b ", "[CLS] a [SEP] b [SEP]", "[CLS][SEP][MASK]<pad><unk>", "<PAD> <Pad> <UNK>x[SEP]y", "[mask] [Cls]",
    "``quoted'' text and '''triple''' ``", "Café naïve İstanbul Ærø façade", "ΟΔΟΣ ΣΟΦΟΣ σ Σ.", "ǅ ß ẞ Ϊ ﬃ ㎁ ① ½",
    "tab\there\u3000and\xa0nbsp\u2009thin\u200bzw", "line\nbreak\r\nand\x1cfs\x85nel", "9,9 and 1,000,000 and x3, y",
    "In 1990, 3,500 people (or 3.0, 4.5,) came.", "٣, ۴, ४, 2,", "a1990, b²,", "日本語のテキスト、中文，한국어 텍스트",
    "emoji 😀👍🏽 and \U0001F600,", "\u0301\u0308 leading combining", "e\u0301 vs \u00e9", "a  b   c", "   lead and trail   ",  # noqa: E501 (wide emoji)
    "£5, €10, – dash — em", "\u0130\u0131 I i", "\u2c2f\u2c5f \U00010570", "x" * 300,
    "<UN\u212a> <uNk> <P\u0410D>",  # Kelvin sign lower-cases to "k" (a special); Cyrillic A does not to "a"
    "Α\U0001d6ba ab\U0001d6ba ΑΣ' ΑΣ\u0301Β ΌΣΟΣ. Σ \u0345Σ Α\u0345Σ",  # final-sigma contexts (ς vs σ)
]


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
  return FullTokenizer(spm_model_file)


@pytest.fixture(scope="module")
def graph_tokenizer(tokenizer):
  return tokenization.AlbertTextTokenizer(full_tokenizer=tokenizer)


@pytest.fixture(scope="module")
def docs_lines():
  text = corpus.python_docs_corpus_text(max_bytes=600_000)
  lines = [line for line in text.split("\n") if line]
  assert len(lines) >= 5000, len(lines)
  return lines


@pytest.fixture(scope="module")
def hf_dir(spm_model_file, tmp_path_factory):
  directory = tmp_path_factory.mktemp("hf_albert")
  shutil.copyfile(spm_model_file, directory / "spiece.model")  # HF looks for this exact file name
  return str(directory)


def _hf_tokenizer(hf_dir, **kwargs):
  transformers = pytest.importorskip("transformers")
  return transformers.AlbertTokenizer.from_pretrained(hf_dir, local_files_only=True, use_fast=False, **kwargs)


def _assert_same_ids(lines, want, got, tokenizer, label):
  bad = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
  if bad:
    i = bad[0]
    pytest.fail(f"{label}: {len(bad)}/{len(lines)} lines differ; first {lines[i]!r}: "
                f"want {tokenizer.convert_ids_to_tokens(want[i])} got {tokenizer.convert_ids_to_tokens(got[i])}")


# ------------------------------------------------------------------------------------------------ preprocess_text
def test_preprocess_text_reference_semantics():
  assert tokenization.preprocess_text("  a \t\n b  ") == "a b"
  assert tokenization.preprocess_text("  a  b ", remove_space=False) == "  a  b "
  # Accents are stripped even without lower-casing (reference §2.1); quotes are kept by default.
  assert tokenization.preprocess_text("Café ``x''") == "Cafe ``x''"
  assert tokenization.preprocess_text("Café ``x''", lower=True, normalize_quotes=True) == 'cafe "x"'
  assert tokenization.preprocess_text("Café", keep_accents=True) == "Café"
  assert tokenization.preprocess_text("ＡＢＣ ﬁ", lower=True) == "abc fi"  # NFKD compatibility forms
  assert tokenization.preprocess_text("ΟΔΟΣ", lower=True) == "οδος"  # whole-string lower: final sigma
  assert tokenization.lower_per_char("ΟΔΟΣ") == "οδοσ"  # HF's per-character lower


# ------------------------------------------------------------------------------------------------ HF parity
def test_ids_match_hf_on_python_docs(tokenizer, hf_dir, docs_lines):
  hf = _hf_tokenizer(hf_dir)
  lines = EDGE_CASES + docs_lines[:5000]
  want = [hf.encode(line, add_special_tokens=False) for line in lines]
  got = tokenizer.encode_ids_batch(lines)
  _assert_same_ids(lines, want, got, tokenizer, "HF vs FullTokenizer")
  # Pieces too (str, as HF returns; unknown pieces keep their surface text, so they show normalisation details that
  # the <unk> id hides), and the per-line API agrees with the batch API.
  assert tokenizer.tokenize_batch(EDGE_CASES) == [hf.tokenize(x) for x in EDGE_CASES]
  assert [tokenizer.encode_ids(line) for line in lines[:200]] == got[:200]


@pytest.mark.parametrize("kwargs", [dict(do_lower_case=False), dict(keep_accents=True), dict(remove_space=False)])
def test_ids_match_hf_with_options(spm_model_file, hf_dir, docs_lines, kwargs):
  hf = _hf_tokenizer(hf_dir, **kwargs)
  ours = FullTokenizer(spm_model_file, **kwargs)
  lines = EDGE_CASES + docs_lines[:1000]
  _assert_same_ids(lines, [hf.encode(x, add_special_tokens=False) for x in lines], ours.encode_ids_batch(lines),
                   ours, f"HF vs FullTokenizer {kwargs}")


def _glue_sentences(data_dir):
  sentences = []
  for path in sorted((data_dir / "glue").glob("*/*.tsv")):
    with open(path, encoding="utf-8", newline="") as f:
      rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    for row in rows:
      sentences.extend(cell for cell in row if len(cell.split()) >= 2)  # text columns (headers/ids are 1 word)
  return sentences


def test_ids_match_hf_on_glue(tokenizer, hf_dir, shared_data_dir):
  hf = _hf_tokenizer(hf_dir)
  lines = _glue_sentences(shared_data_dir)[:8000]
  assert len(lines) >= 1000
  want = [hf.encode(line, add_special_tokens=False) for line in lines]
  _assert_same_ids(lines, want, tokenizer.encode_ids_batch(lines), tokenizer, "HF vs FullTokenizer on GLUE")


# ------------------------------------------------------------------------------------------------ rules
def test_special_tokens_in_text(tokenizer):
  ids = tokenizer.encode_ids("Hello I'm a [MASK] model.")
  assert ids.count(4) == 1
  pieces = tokenizer.tokenize("Hello I'm a [MASK] model.")
  assert pieces[pieces.index("[MASK]") - 1] == "▁a"  # [MASK] strips the space on its left (HF lstrip)
  assert tokenizer.encode_ids("[CLS]x[SEP]<pad><unk>") == [2, 13, 64, 3, 0, 1]
  assert tokenizer.encode_ids("<PAD>") == [0]  # lower-cased first, then recognised, as HF does
  assert 4 not in tokenizer.encode_ids("[mask]")
  # The reference modes do not recognise special tokens in the text.
  reference = FullTokenizer(tokenizer.spm_model_file, mode="reference")
  assert 4 not in reference.encode_ids("Hello I'm a [MASK] model.")


def test_special_ids_and_vocab(tokenizer):
  assert tokenizer.convert_tokens_to_ids(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]) == [0, 1, 2, 3, 4]
  assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert len(tokenizer.vocab) == tokenizer.sp_model.GetPieceSize() == 1000
  assert all(tokenizer.inv_vocab[i] == p for p, i in tokenizer.vocab.items())
  assert tokenizer.convert_tokens_to_ids(["no-such-piece"]) == [1]
  with pytest.raises(IndexError, match="outside the vocabulary"):
    tokenizer.convert_ids_to_tokens([5000])


def test_uncased_quick_brown_fox_has_no_unk(tokenizer, spm_model_file):
  ids = tokenizer.encode_ids("The quick brown fox.")
  assert ids and 1 not in ids
  # Without lower-casing, the capital T of an uncased vocabulary is unknown (the KerasHub bug, reference §9 #13).
  assert 1 in FullTokenizer(spm_model_file, do_lower_case=False).encode_ids("The quick brown fox.")


def test_empty_strings(tokenizer, graph_tokenizer):
  for text in ("", " ", "\t\n"):
    assert tokenizer.tokenize(text) == []
  assert graph_tokenizer(tf.constant(["", " "])).to_list() == [[], []]
  assert graph_tokenizer(tf.constant([], tf.string)).to_list() == []
  assert tokenization.pack_ids([], [], 6)["input_word_ids"] == [2, 3, 3, 0, 0, 0]


def test_digit_comma_rule(tokenizer, spm_model_file, docs_lines):
  sp = tokenizer.sp_model
  raw = sp.EncodeAsPieces(tokenizer.preprocess("In 1990, 3.0, ok"))
  assert "0," in raw  # the raw model glues the comma to the number...
  pieces = tokenizer.tokenize("In 1990, 3.0, ok")
  assert "0," not in pieces and pieces.count(",") == 2  # ...ALBERT splits it off (reference §2.2)
  assert all(isinstance(p, str) for p in pieces)
  assert tokenizer.tokenize("9,9") == ["▁", "9", ",", "9"]
  # Upstream py3 compat keeps the leading "▁" of the re-encoded number: different ids.
  compat = FullTokenizer(spm_model_file, mode="upstream_py3")
  assert compat.tokenize("x3, y") == ["▁", "x", "▁3", ",", "▁", "y"]
  assert tokenizer.tokenize("x3, y") == ["▁", "x", "3", ",", "▁", "y"]
  # The rule fires on real test data.
  fired = [line for line in docs_lines[:6000]
           if any(tokenizer_module.is_digit_comma_piece(p) for p in sp.EncodeAsPieces(tokenizer.preprocess(line)))]
  assert len(fired) >= 10, len(fired)


def _upstream_py3_ids(sp, line):
  """google-research/albert `preprocess_text` + `encode_pieces` + `convert_tokens_to_ids` as they run on Python 3.

  The re-encode is fed bytes and the "▁" tests compare str with bytes (or an int), so the strip never fires.
  """
  underline = "▁".encode("utf-8")
  text = tokenization.preprocess_text(line, lower=True)
  new_pieces = []
  for piece in sp.EncodeAsPieces(text):
    if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
      cur = sp.EncodeAsPieces(piece[:-1].encode("utf-8").replace(underline, b""))
      cur = [p.encode("utf-8") if isinstance(p, str) else p for p in cur]  # spm < 0.2 returned bytes here
      if piece[0] != underline and cur[0][0] == underline:  # always False on Python 3
        cur = cur[1:] if len(cur[0]) == 1 else [cur[0][1:]] + cur[1:]
      new_pieces.extend(cur + [piece[-1]])
    else:
      new_pieces.append(piece)
  return [sp.PieceToId(p.decode("utf-8") if isinstance(p, bytes) else p) for p in new_pieces]


def test_upstream_py3_mode_matches_upstream_emulation(spm_model_file, docs_lines):
  compat = FullTokenizer(spm_model_file, mode="upstream_py3")
  lines = [x for x in EDGE_CASES if "[" not in x and "<" not in x] + docs_lines[:3000]
  want = [_upstream_py3_ids(compat.sp_model, line) for line in lines]
  _assert_same_ids(lines, want, compat.encode_ids_batch(lines), compat, "upstream py3 emulation vs compat mode")
  hf_mode = FullTokenizer(spm_model_file).encode_ids_batch(lines)
  assert sum(w != h for w, h in zip(want, hf_mode)) >= 10  # the modes really differ on this text


def test_bad_model_file_raises(tmp_path):
  bad = tmp_path / "junk.model"
  bad.write_bytes(b"not a model")
  with pytest.raises(ValueError, match="junk.model"):
    FullTokenizer(str(bad))
  with pytest.raises(ValueError, match="mode"):
    FullTokenizer(str(bad), mode="nope")
  with pytest.raises(FileNotFoundError, match="missing.model"):
    FullTokenizer(str(tmp_path / "missing.model"))


# ------------------------------------------------------------------------------------------------ imports, model checks
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# official_albert/__init__.py imports the models (and so TensorFlow); a bare package object stands in for it so that
# only official_albert.tokenization's own imports are measured.
_BARE_PACKAGE = ("import sys, types; pkg = types.ModuleType('official_albert'); "
                 "pkg.__path__ = [sys.argv[1] + '/official_albert']; sys.modules['official_albert'] = pkg\n")


def _run_python(code, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, "-c", code, REPO_ROOT, *args], capture_output=True, text=True,
                        check=False, cwd=REPO_ROOT, env=env)


def test_full_tokenizer_does_not_import_tensorflow(spm_model_file, tokenizer):
  code = _BARE_PACKAGE + (
      "import official_albert.tokenization as t\n"
      "tok = t.FullTokenizer(sys.argv[2])\n"
      "print(tok.encode_ids('In 1990, [MASK] x'))\n"
      "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n")
  result = _run_python(code, spm_model_file)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == str(tokenizer.encode_ids("In 1990, [MASK] x"))
  # Also through the real package __init__ (its exports load lazily).
  result = _run_python("import sys; sys.path.insert(0, sys.argv[1]); import official_albert.tokenization as t; "
                       "t.FullTokenizer(sys.argv[2]).tokenize('x'); "
                       "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'", spm_model_file)
  assert result.returncode == 0, result.stderr[-3000:]
  # The in-graph classes still come from this module, loaded on first access.
  from official_albert.tokenization import in_graph as tokenization_tf
  assert tokenization.AlbertPreprocessor is tokenization_tf.AlbertPreprocessor
  assert {"AlbertTextTokenizer", "AlbertPacker", "AlbertPreprocessor"} <= set(dir(tokenization))
  with pytest.raises(AttributeError, match="NoSuchThing"):
    tokenization.NoSuchThing  # pylint: disable=pointless-statement


def _model_with_type(spm_model_file, path, index, piece_type):
  from sentencepiece import sentencepiece_model_pb2
  proto = sentencepiece_model_pb2.ModelProto.FromString(open(spm_model_file, "rb").read())
  proto.pieces[index].type = piece_type
  path.write_bytes(proto.SerializeToString())
  return str(path)


def test_piece_types_read_without_protobuf(spm_model_file):
  from sentencepiece import sentencepiece_model_pb2
  data = open(spm_model_file, "rb").read()
  pieces = sentencepiece_model_pb2.ModelProto.FromString(data).pieces
  assert [spm_model._piece_type(data, i) for i in range(len(pieces))] == [p.type for p in pieces]
  assert {p.type for p in pieces} >= {1, 2, 3}  # normal, unknown, control: the defaulted field is exercised
  with pytest.raises(IndexError, match="no piece 1000"):
    spm_model._piece_type(data, 1000)
  with pytest.raises(ValueError, match="truncated"):
    spm_model._piece_type(data[:3], 0)


def test_check_special_tokens_without_protobuf(spm_model_file, tmp_path):
  # Under protobuf < 7 (Apache Beam) sentencepiece_model_pb2 raises on import; here it cannot be imported at all.
  normal = _model_with_type(spm_model_file, tmp_path / "normal_mask.model", 4, 1)
  user_defined = _model_with_type(spm_model_file, tmp_path / "user_mask.model", 4, 4)
  code = _BARE_PACKAGE + (
      "sys.modules['sentencepiece.sentencepiece_model_pb2'] = None; sys.modules['google.protobuf'] = None\n"
      "import official_albert.tokenization as t\n"
      "t.check_spm_model_file(sys.argv[2]); t.check_spm_model_file(sys.argv[3])\n"
      "t.check_spm_model_file(sys.argv[4])\n")
  result = _run_python(code, spm_model_file, user_defined, normal)
  assert result.returncode != 0
  assert "ValueError: " + normal in result.stderr and "'[MASK]' (id 4) is a normal piece" in result.stderr, (
      result.stderr[-3000:])
  assert "ModuleNotFoundError" not in result.stderr and "ImportError" not in result.stderr


def test_graph_has_no_ragged_validation_asserts(tokenizer):
  # Validation asserts (and their conditionals) in ragged constructors made up ~25% of the traced graph. A pair's
  # one Assert is the check that text and text_b have the same shape.
  pre = tokenization.AlbertPreprocessor(full_tokenizer=tokenizer, seq_length=16)
  spec = tf.TensorSpec([None], tf.string)
  for args, asserts in (((spec,), 0), ((spec, spec), 1)):
    graph_def = tf.function(pre).get_concrete_function(*args).graph.as_graph_def()
    ops = [n.op for n in graph_def.node] + [n.op for f in graph_def.library.function for n in f.node_def]
    assert "RegexSplitWithOffsets" in ops and ops.count("Assert") == asserts


# ------------------------------------------------------------------------------------------------ packing
def _pop_loop(len_a, len_b, budget):
  while len_a + len_b > budget:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return len_a, len_b


def test_truncation_matches_reference_loop():
  for len_a, len_b, budget in itertools.product(range(9), range(9), range(12)):
    assert tokenization.truncated_lengths(len_a, len_b, budget) == _pop_loop(len_a, len_b, budget)


def test_pack_ids_layout():
  out = tokenization.pack_ids([10, 11, 12, 13], [20, 21], max_seq_length=8)
  assert out["input_word_ids"] == [2, 10, 11, 12, 3, 20, 21, 3]  # a truncated (longer), b kept
  assert out["input_type_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
  assert out["input_mask"] == [1] * 8
  out = tokenization.pack_ids([10, 11], None, max_seq_length=6)
  assert out == {"input_word_ids": [2, 10, 11, 3, 0, 0], "input_mask": [1, 1, 1, 1, 0, 0],
                 "input_type_ids": [0, 0, 0, 0, 0, 0]}
  with pytest.raises(ValueError, match="max_seq_length"):
    tokenization.pack_ids([1], [2], max_seq_length=2)


def test_encode_pair(tokenizer):
  out = tokenizer.encode_pair("Hello world.", "In 1990, it rained.", max_seq_length=64)
  n_a = len(tokenizer.encode_ids("Hello world."))
  assert out["input_word_ids"][0] == 2 and out["input_word_ids"][n_a + 1] == 3
  assert sum(out["input_mask"]) == 3 + n_a + len(tokenizer.encode_ids("In 1990, it rained."))
  # A second text without pieces: one segment, as GLUE's records and the pipelines.
  assert tokenizer.encode_pair("Hello world.", " ", 64) == tokenizer.encode_pair("Hello world.", None, 64)


def test_graph_packer_matches_python():
  rng = random.Random(7)
  packer = tokenization.AlbertPacker(seq_length=12)
  rows_a = [[rng.randrange(5, 100) for _ in range(rng.randrange(0, 15))] for _ in range(40)]
  rows_b = [[rng.randrange(5, 100) for _ in range(rng.randrange(0, 15))] for _ in range(40)]
  rows_b[:3] = [], [], []  # a second text without pieces: one segment, as the pipelines pack it (`b or None`)
  rows_a[1] = list(range(5, 20))  # ... and with the first truncated to seq_length - 2, not - 3
  out = packer(tf.ragged.constant(rows_a, tf.int32, row_splits_dtype=tf.int64), tf.ragged.constant(rows_b, tf.int32))
  single = packer(tf.ragged.constant(rows_a, tf.int32))
  for i, (a, b) in enumerate(zip(rows_a, rows_b)):
    want = tokenization.pack_ids(a, b or None, 12)
    want_single = tokenization.pack_ids(a, None, 12)
    for key in want:
      assert out[key].dtype == tf.int32 and out[key].shape == (40, 12)
      assert out[key][i].numpy().tolist() == want[key], (key, a, b)
      assert single[key][i].numpy().tolist() == want_single[key], (key, a)


def test_graph_packer_packs_multiple_choice_as_race():
  """qa_cap: B (question+option) keeps its LAST qa_cap ids, A is cut to seq_length - 3 - len(B), both segments always
  (`choices.pack_choices`); longest-first would cut a long B from its end, where the option sits."""
  rng = random.Random(8)
  packer = tokenization.AlbertPacker(seq_length=12)
  rows_a = [[rng.randrange(5, 100) for _ in range(rng.randrange(0, 15))] for _ in range(40)]
  rows_b = [[rng.randrange(5, 100) for _ in range(rng.randrange(0, 15))] for _ in range(40)]
  rows_b[0] = []
  for cap in (1, 3, 8):
    out = packer(tf.ragged.constant(rows_a, tf.int32), tf.ragged.constant(rows_b, tf.int32), qa_cap=cap)
    for i, (a, b) in enumerate(zip(rows_a, rows_b)):
      qa = b[-cap:] if b else []
      want = tokenization.pack_ids(a[:12 - len(qa) - 3], qa, 12)
      for key in want:
        assert out[key][i].numpy().tolist() == want[key], (key, cap, a, b)
  for bad in (0, 9):
    with pytest.raises(ValueError, match=f"qa_cap={bad} needs a second segment and 1 <= qa_cap <= seq_length - 4"):
      packer(tf.ragged.constant(rows_a, tf.int32), tf.ragged.constant(rows_b, tf.int32), qa_cap=bad)


def test_preprocessor_packs_choices_as_pack_choices(tokenizer):
  from official_albert.tokenization.choices import pack_choices
  from official_albert.tokenization.choices import qa_text
  pre = tokenization.AlbertPreprocessor(full_tokenizer=tokenizer, seq_length=16)
  article, question = " ".join(f"w{i}" for i in range(40)), "which of these words is the one we want"
  options = ["alpha", "beta", "gamma", ""]
  got = pre([article] * 4, [qa_text(question, o) for o in options], qa_cap=5)
  want = pack_choices(tokenizer, article, question, options, 16, 5)
  for key in want[0]:
    assert got[key].numpy().tolist() == [row[key] for row in want]


def test_text_and_text_b_of_different_shapes_are_refused(tokenizer):
  """text [3] with text_b [1] paired every text with the one text_b (broadcast), [1] with [3] gave 3 rows: refused,
  naming both inputs, eagerly and in a traced signature of unknown batch."""
  pre = tokenization.AlbertPreprocessor(full_tokenizer=tokenizer, seq_length=8)
  spec = tf.TensorSpec([None], tf.string)
  traced = tf.function(pre, input_signature=[spec, spec])
  for call in (pre, traced):
    for texts, texts_b in ((["a b", "c d", "e f"], ["x y"]), (["a b"], ["x y", "z w", "q"])):
      with pytest.raises(tf.errors.InvalidArgumentError, match="text and text_b must have the same shape"):
        call(tf.constant(texts), tf.constant(texts_b))
  with pytest.raises(ValueError, match="text and text_b must have the same shape"):
    pre(tf.constant(["a b"]), tf.constant([["x y"]]))


# ------------------------------------------------------------------------------------------------ in-graph
def test_graph_ids_match_full_tokenizer(tokenizer, graph_tokenizer, docs_lines):
  lines = EDGE_CASES + docs_lines
  got = graph_tokenizer(tf.constant(lines))
  assert got.dtype == tf.int32
  _assert_same_ids(lines, tokenizer.encode_ids_batch(lines), got.to_list(), tokenizer, "in-graph vs FullTokenizer")
  assert graph_tokenizer(tf.constant(lines[3])).numpy().tolist() == tokenizer.encode_ids(lines[3])  # scalar input


def _unicode_sweep_lines():
  """Every BMP code point (and the Unicode-14 additions beyond it), in lines with cased neighbours."""
  cps = [c for c in itertools.chain(range(1, 0x10000), range(0x10570, 0x105C0), range(0x1D400, 0x1D7FF))
         if not 0xD800 <= c <= 0xDFFF]
  lines = []
  for start in range(0, len(cps), 48):
    chunk = "".join(chr(c) for c in cps[start:start + 48])
    lines.append(chunk)
    lines.append("A" + " ".join(chunk) + " Σ9,")
  return lines


def test_graph_unicode_sweep(tokenizer, graph_tokenizer):
  # Python's str.lower()/NFKD and TF's tf.strings.lower/ICU NFKD differ on some code points; the reference is Python.
  probe = ["\u0130", "\u2c2f", "\U00010570"]
  tf_lower = tf.strings.lower(tf.constant(probe), encoding="utf-8").numpy().tolist()
  assert [p.lower().encode() for p in probe] != tf_lower  # would pass trivially if TF agreed everywhere
  lines = _unicode_sweep_lines()
  # Strings, not only ids: most exotic characters are <unk> in a 1000-piece vocabulary, which would hide errors.
  got = [x.decode("utf-8") for x in graph_tokenizer.preprocess(tf.constant(lines)).numpy()]
  want = [tokenizer.preprocess(line) for line in lines]
  bad = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
  assert not bad, f"{len(bad)} lines differ; first {lines[bad[0]]!r}: {want[bad[0]]!r} vs {got[bad[0]]!r}"
  _assert_same_ids(lines, tokenizer.encode_ids_batch(lines), graph_tokenizer(tf.constant(lines)).to_list(),
                   tokenizer, "in-graph vs FullTokenizer (Unicode sweep)")


def test_final_sigma_context(tokenizer, graph_tokenizer, spm_model_file):
  cases = {"ΟΔΟΣ": "οδοσ", "ΑΣ' x": "ασ' x", "Α\U0001d6ba": "ας", "ab\U0001d6ba c": "abς c", "ΑΣ\u0301Β": "ασβ"}
  for text, want in cases.items():  # "hf": per-character lower first, so only NFKD-made capital sigmas can be final
    assert tokenizer.preprocess(text) == want
    assert graph_tokenizer.preprocess(tf.constant([text])).numpy()[0].decode() == want
  reference = FullTokenizer(spm_model_file, mode="reference")
  graph_reference = tokenization.AlbertTextTokenizer(full_tokenizer=reference)
  for text, want in {"ΟΔΟΣ": "οδος", "ΑΣ' x": "ας' x", "ΣΑ": "σα", "Σ": "σ", "ΑΣΑ ΑΣ": "ασα ας"}.items():
    assert reference.preprocess(text) == want
    assert graph_reference.preprocess(tf.constant([text])).numpy()[0].decode() == want


@pytest.mark.parametrize("kwargs", [dict(mode="reference"), dict(mode="upstream_py3"), dict(do_lower_case=False),
                                    dict(keep_accents=True), dict(remove_space=False)])
def test_graph_matches_other_settings(spm_model_file, docs_lines, kwargs):
  ours = FullTokenizer(spm_model_file, **kwargs)
  graph = tokenization.AlbertTextTokenizer(full_tokenizer=ours)
  lines = EDGE_CASES + docs_lines[:1500]
  _assert_same_ids(lines, ours.encode_ids_batch(lines), graph(tf.constant(lines)).to_list(), ours,
                   f"in-graph vs FullTokenizer {kwargs}")
  sweep = _unicode_sweep_lines()[::3] + [x for x in EDGE_CASES if "[" not in x and "<" not in x]
  got = [x.decode("utf-8") for x in graph.preprocess(tf.constant(sweep)).numpy()]
  assert got == [ours.preprocess(line) for line in sweep]


def test_graph_in_tf_function_and_dataset(spm_model_file, tokenizer, docs_lines):
  pre = tokenization.AlbertPreprocessor(full_tokenizer=tokenizer, seq_length=32)
  texts_a, texts_b = docs_lines[:24], docs_lines[24:48]
  want = [tokenizer.encode_pair(a, b, 32) for a, b in zip(texts_a, texts_b)]
  ds = tf.data.Dataset.from_tensor_slices((texts_a, texts_b)).batch(5).map(pre)
  got = {k: np.concatenate([batch[k].numpy() for batch in ds]) for k in want[0]}
  fn = tf.function(pre, input_signature=[tf.TensorSpec([None], tf.string)] * 2)
  got_fn = fn(tf.constant(texts_a), tf.constant(texts_b))
  for key in want[0]:
    assert got[key].tolist() == [w[key] for w in want]
    assert got_fn[key].numpy().tolist() == [w[key] for w in want]
  single = pre(tf.constant(["The quick brown fox."]))
  assert single["input_word_ids"].numpy().tolist()[0] == tokenizer.encode_pair("The quick brown fox.", None, 32)[
      "input_word_ids"]


@pytest.mark.slow
def test_preprocessor_saved_model_round_trip(spm_model_file, tokenizer, tmp_path):
  pre = tokenization.AlbertPreprocessor(full_tokenizer=tokenizer, seq_length=16)
  module = tf.Module()
  module.preprocessor = pre
  module.serve = tf.function(lambda a, b: pre(a, b), input_signature=[tf.TensorSpec([None], tf.string)] * 2)
  a = tf.constant(["Hello I'm a [MASK] model.", "", "Café, 1990, ΟΔΟΣ"])
  b = tf.constant(["In 1990, 3,500 people.", "x", ""])
  before = module.serve(a, b)
  path = str(tmp_path / "preprocessor")
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  assert os.path.exists(os.path.join(path, "assets", os.path.basename(spm_model_file)))
  import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the reloaded graph uses)
  reloaded = tf.saved_model.load(path)
  after = reloaded.signatures["serving_default"](a=a, b=b)
  for key in ("input_word_ids", "input_mask", "input_type_ids"):
    assert after[key].numpy().tolist() == before[key].numpy().tolist()
    assert after[key].numpy().tolist() == [tokenizer.encode_pair(x.decode(), y.decode(), 16)[key]
                                           for x, y in zip(a.numpy(), b.numpy())]
  # A fresh process that imports only tensorflow + tensorflow_text (not this project) can serve it.
  code = ("import json, sys, tensorflow as tf, tensorflow_text; m = tf.saved_model.load(sys.argv[1]); "
          "out = m.signatures['serving_default'](a=tf.constant(json.loads(sys.argv[2])), "
          "b=tf.constant(json.loads(sys.argv[3]))); print(json.dumps(out['input_word_ids'].numpy().tolist()))")
  texts_a = [x.decode() for x in a.numpy()]
  texts_b = [x.decode() for x in b.numpy()]
  result = subprocess.run([sys.executable, "-c", code, path, json.dumps(texts_a), json.dumps(texts_b)],
                          capture_output=True, text=True, check=False, cwd=str(tmp_path))
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads(result.stdout.strip().splitlines()[-1]) == before["input_word_ids"].numpy().tolist()
