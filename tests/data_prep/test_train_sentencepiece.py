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


def _small_corpus(tmp_path, extra_lines=()):
  words = "the module returns a value when the function is called with arguments and the result is cached".split()
  lines = [" ".join(words[i % 7:i % 7 + 6]).capitalize() + "." for i in range(120)] + list(extra_lines)
  path = tmp_path / "small.txt"
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_lines_longer_than_max_sentence_length_are_counted_and_warned(tmp_path, caplog):
  """SentencePiece skips such lines silently (its log is off): their text would become <unk> without a word."""
  path = _small_corpus(tmp_path, ["Visit [URL] today, " * 5])
  assert tsp.preprocess_corpus([path], str(tmp_path / "n.txt"), max_sentence_length=60)["lines_too_long"] == 1
  caplog.set_level("WARNING")
  tsp.train_sentencepiece([path], str(tmp_path / "m"), vocab_size=60, hard_vocab_limit=False, max_sentence_length=60)
  assert "1 of 121 lines are longer than --max_sentence_length=60 bytes" in caplog.text


def test_a_corpus_of_only_too_long_lines_is_a_clear_error(tmp_path):
  """Instead of SentencePiece's "INTERNAL: ... [!sentences_.empty()]" (its explanation is in the silenced log)."""
  path = tmp_path / "long.txt"
  path.write_text(("word " * 1000 + "\n") * 2, encoding="utf-8")
  with pytest.raises(ValueError, match=r"every one of the 2 non-empty lines .* longer than "
                                       r"--max_sentence_length=4192 bytes.*raise --max_sentence_length"):
    tsp.train_sentencepiece([str(path)], str(tmp_path / "m"), vocab_size=60)


def test_user_defined_symbols_are_normalised_like_the_text(tmp_path):
  """"[URL]" and "Café" reach SentencePiece as "[url]" and "cafe"; pieces spelt otherwise could never be produced."""
  path = _small_corpus(tmp_path, ["Visit [URL] and Café [URL] today."] * 20)
  model = tsp.train_sentencepiece([path], str(tmp_path / "m"), vocab_size=60, hard_vocab_limit=False,
                                  user_defined_symbols=list(tsp.DEFAULT_USER_DEFINED_SYMBOLS) + ["[URL]", "Café"])
  tokenizer = tokenization.FullTokenizer(model)
  assert [tokenizer.inv_vocab[i] for i in (13, 14)] == ["[url]", "cafe"]
  assert {"[url]", "cafe"} <= set(tokenizer.tokenize("Visit [URL] Café"))
  with pytest.raises(ValueError, match=r"--user_defined_symbols: 'new york' .* contains whitespace"):
    tsp.train_sentencepiece([path], str(tmp_path / "m2"), vocab_size=60, user_defined_symbols=["new york"])


def test_input_glob_patterns_are_expanded_like_the_data_tools(tmp_path):
  """Recipe §2 gives the data tools `--input_file='corpus/*.txt'`; the vocabulary step took the same pattern for a
  missing file. An existing path is read as written (`[v1]` is no character class), a pattern matching nothing is
  an error naming it."""
  folder = tmp_path / "corpus"
  folder.mkdir()
  for i in (1, 2):
    _small_corpus(folder, [f"Document {i} line {j} about cats and dogs." for j in range(60)])
    (folder / "small.txt").rename(folder / f"part{i}.txt")
  literal = folder / "notes [v1].txt"
  literal.write_text("A literal file name.\n", encoding="utf-8")
  pattern = str(folder / "part*.txt")
  model = tsp.train_sentencepiece([pattern], str(tmp_path / "m"), vocab_size=60, hard_vocab_limit=False)
  from sentencepiece import sentencepiece_model_pb2
  proto = sentencepiece_model_pb2.ModelProto.FromString(open(model, "rb").read())
  assert list(proto.trainer_spec.input) == ["part1.txt", "part2.txt"]
  # Sorted, whatever order they are named in: the pieces depend on the order of the lines (209 of 2,000 ids apart).
  assert tsp.expand_input_files([pattern, str(literal), str(folder / "part1.txt")]) == [
      str(literal), str(folder / "part1.txt"), str(folder / "part2.txt")]
  assert tsp.expand_input_files([str(folder / "part2.txt"), str(literal), str(folder / "part1.txt")]) == [
      str(literal), str(folder / "part1.txt"), str(folder / "part2.txt")]
  with pytest.raises(FileNotFoundError, match=r"nothing\*\.txt does not exist and matches no file"):
    tsp.train_sentencepiece([str(folder / "nothing*.txt")], str(tmp_path / "m2"), vocab_size=60)


def test_input_named_twice_or_a_folder(tmp_path, monkeypatch):
  """A file named in two spellings weighed double in the vocabulary; a folder among the matches was a raw
  IsADirectoryError (the data tools refuse it by name)."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "corpus" / "sub").mkdir(parents=True)
  (tmp_path / "corpus" / "a.txt").write_text("a line\n")
  assert tsp.expand_input_files(["corpus/a.txt", "./corpus/a.txt", str(tmp_path / "corpus" / "a.txt")]) == [
      "corpus/a.txt"]
  with pytest.raises(ValueError, match=r"corpus/sub is a directory, not a text file"):
    tsp.expand_input_files(["corpus/*"])


def test_the_reference_symbols_pass_the_flag():
  """The flag was a CSV list: the reference's '(,),",-,.,–,£,€' failed with "unexpected end of data" (the `"`)."""
  from absl import flags  # noqa: PLC0415
  fv = flags.FlagValues()
  tsp.define_flags(fv)
  fv(["prog", "--input=a.txt", "--model_prefix=m", '--user_defined_symbols=(,),",-,.,\u2013,\u00a3,\u20ac,[URL]'])
  assert tsp.user_defined_symbols_of(fv.user_defined_symbols) == list(tsp.DEFAULT_USER_DEFINED_SYMBOLS) + ["[URL]"]
  fv2 = flags.FlagValues()
  tsp.define_flags(fv2)
  fv2(["prog", "--input=a.txt", "--model_prefix=m"])
  assert tsp.user_defined_symbols_of(fv2.user_defined_symbols) == list(tsp.DEFAULT_USER_DEFINED_SYMBOLS)
  assert tsp.user_defined_symbols_of("(, ), -,") == ["(", ")", "-"]  # (spaces after commas, as DEFINE_list took them)
