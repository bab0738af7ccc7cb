"""Tests for data_prep.train_sentencepiece and the special-id check (reference §2.4, §9 items 12 and 14)."""

import os
import pathlib

import pytest
import sentencepiece as spm

from data_prep import corpus
from data_prep import train_sentencepiece as tsp
from official_albert import tokenization

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("spm") / "train.txt"
  text = corpus.python_docs_corpus_text(max_bytes=60_000)
  path.write_text("Ünïcödé CAFÉ ``Quoted'' In 1990, 3,500 PEOPLE.\n\n" + text, encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def trained(train_file, tmp_path_factory):
  prefix = str(tmp_path_factory.mktemp("out") / "sub" / "30k-clean")
  return tsp.train_sentencepiece([train_file], prefix, vocab_size=400)


def test_special_ids_and_recipe(trained):
  sp = spm.SentencePieceProcessor(model_file=trained)
  assert [sp.IdToPiece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert all(sp.IsControl(i) for i in (2, 3, 4))
  assert sp.GetPieceSize() == 400
  # user_defined_symbols come right after the specials, including the '"' that spm's CSV flag parsing would eat.
  assert [sp.IdToPiece(i) for i in range(5, 13)] == list(tsp.DEFAULT_USER_DEFINED_SYMBOLS)
  assert os.path.exists(trained[:-len(".model")] + ".vocab")
  from sentencepiece import sentencepiece_model_pb2
  proto = sentencepiece_model_pb2.ModelProto.FromString(open(trained, "rb").read())
  spec = proto.trainer_spec
  assert (spec.model_type, spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id) == (1, 0, 1, -1, -1)  # 1 = UNIGRAM
  assert spec.character_coverage == pytest.approx(0.99995) and spec.shuffle_input_sentence
  assert list(spec.input) == ["train.txt"] and spec.model_prefix == "30k-clean"  # no temporary paths


def test_training_text_is_preprocessed(trained):
  sp = spm.SentencePieceProcessor(model_file=trained)
  pieces = [sp.IdToPiece(i) for i in range(5, sp.GetPieceSize())]
  text = "".join(pieces)
  assert text == text.lower()  # lower-cased like the tokenizer
  assert not any(c in text for c in "éÉüïö")  # accents stripped
  assert "``" not in text and "''" not in text  # HF quote normalisation (default mode)
  assert tokenization.FullTokenizer(trained).encode_ids("The quick brown fox.").count(1) == 0


def test_deterministic(train_file, trained, tmp_path):
  again = tsp.train_sentencepiece([train_file], str(tmp_path / "30k-clean"), vocab_size=400)
  assert open(again, "rb").read() == open(trained, "rb").read()


def test_model_without_special_tokens_raises(train_file, tmp_path):
  # A plain spm model (default <unk>=0, <s>=1, </s>=2) must be rejected with a message naming the file.
  prefix = str(tmp_path / "plain")
  spm.SentencePieceTrainer.train(input=train_file, model_prefix=prefix, vocab_size=300, minloglevel=2)
  with pytest.raises(ValueError, match=r"plain\.model.*<pad>"):
    tokenization.check_spm_model_file(prefix + ".model")
  with pytest.raises(ValueError, match=r"plain\.model"):
    tokenization.FullTokenizer(prefix + ".model")
  assert tokenization.FullTokenizer(prefix + ".model", check_special_ids=False).vocab_size == 300
  # Specials as user-defined symbols (never split by spm) are accepted too.
  prefix2 = str(tmp_path / "normal_mask")
  spm.SentencePieceTrainer.train(input=train_file, model_prefix=prefix2, vocab_size=300, minloglevel=2, pad_id=0,
                                 unk_id=1, bos_id=-1, eos_id=-1, user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"])
  tokenization.check_spm_model_file(prefix2 + ".model")  # user-defined symbols are never split: accepted


def test_input_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    tsp.train_sentencepiece([str(tmp_path / "missing.txt")], str(tmp_path / "m"), vocab_size=100)
  empty = tmp_path / "empty.txt"
  empty.write_text("\n  \n", encoding="utf-8")
  with pytest.raises(ValueError, match="no non-empty lines"):
    tsp.train_sentencepiece([str(empty)], str(tmp_path / "m"), vocab_size=100)
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"ok line\n\xff\xfe bad\n")
  with pytest.raises(ValueError, match=r"bad\.txt:2"):
    tsp.train_sentencepiece([str(bad)], str(tmp_path / "m"), vocab_size=100)


def test_committed_fixture_is_reproducible(tmp_path):
  import importlib.util
  spec = importlib.util.spec_from_file_location("make_test_spm", FIXTURES / "make_test_spm.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  path = module.make(str(tmp_path / "test_spm"))
  assert open(path, "rb").read() == (FIXTURES / "test_spm.model").read_bytes()
  tokenization.check_spm_model_file(str(FIXTURES / "test_spm.model"))


def test_special_token_as_normal_piece_raises(tmp_path, spm_model_file):
  from sentencepiece import sentencepiece_model_pb2
  proto = sentencepiece_model_pb2.ModelProto.FromString(open(spm_model_file, "rb").read())
  proto.pieces[4].type = sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL  # [MASK] would be splittable
  path = tmp_path / "normal_mask.model"
  path.write_bytes(proto.SerializeToString())
  with pytest.raises(ValueError, match=r"normal_mask\.model.*\[MASK\].*normal piece"):
    tokenization.check_spm_model_file(str(path))


def test_preprocess_corpus_drops_a_byte_order_mark_and_names_a_bad_line(tmp_path):
  path = tmp_path / "a.txt"
  path.write_bytes("\ufeffHello World\n\n".encode("utf-8") + b"caf\xe9\n")
  out = str(tmp_path / "out.txt")
  with pytest.raises(ValueError, match=r"a.txt:3: invalid UTF-8 \(byte 0xe9 at column 4\); fix the file \(re-encode"):
    tsp.preprocess_corpus([str(path)], out)
  path.write_bytes("\ufeffHello World\n\nsecond\n".encode("utf-8"))
  assert tsp.preprocess_corpus([str(path)], out) == {"lines_in": 3, "lines_out": 2, "empty_lines": 1}
  assert open(out, encoding="utf-8").read() == "hello world\nsecond\n"
