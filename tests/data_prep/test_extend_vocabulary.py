"""extend_vocabulary: new SentencePiece pieces at new ids (Python and in-graph), a grown embedding table whose old rows
are bit-identical and whose new rows follow the reference initializer, the HF round trip, and named bad inputs."""

import json
import os

from absl import flags
import numpy as np
import pytest

from data_prep import extend_vocabulary as ev
from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.checkpoints import native
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.tokenization import FullTokenizer

SPM = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "test_spm.model")
OLD_SIZE = 1000
TINY = dict(vocab_size=OLD_SIZE, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_hidden_groups=1,
            inner_group_num=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
            initializer_range=0.05)
OLD_TEXTS = ["The function returns a list of values.", "In 1990, the library had 3,500 modules.",
             "Attributes (and methods) are looked up on the class - \"quoted\" text."]
WORDS = ["zebrafish", "Covid", "", "the", "zebrafish", "defined"]  # blank, present ("▁the"), repeated


def _words_file(tmp_path, lines, name="words.txt"):
  path = tmp_path / name
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("ext")
  out = str(tmp / "new.model")
  return ev.extend_vocabulary(SPM, _words_file(tmp, WORDS), out), out


def test_new_pieces_are_appended_and_skips_counted(extended):
  result, out = extended
  assert result["added"] == {"\u2581zebrafish": 1000, "\u2581covid": 1001, "\u2581defined": 1002}
  assert result["skipped_present"] == ["\u2581the"]
  assert (result["skipped_blank"], result["skipped_repeated"]) == (1, 1)
  old, new = FullTokenizer(SPM), FullTokenizer(out)
  assert new.vocab_size == OLD_SIZE + 3
  assert [new.inv_vocab[i] for i in range(OLD_SIZE)] == [old.inv_vocab[i] for i in range(OLD_SIZE)]


def test_old_ids_unchanged_for_text_without_new_words(extended):
  _, out = extended
  old, new = FullTokenizer(SPM), FullTokenizer(out)
  for text in OLD_TEXTS:
    assert new.encode_ids(text) == old.encode_ids(text), text


def test_new_words_get_their_new_ids_in_python_and_in_graph(extended):
  from official_albert.tokenization import AlbertTextTokenizer
  _, out = extended
  new = FullTokenizer(out)
  texts = ["A zebrafish with COVID was defined.", "zebrafish", "the covid, defined"]
  python_ids = [new.encode_ids(t) for t in texts]
  assert 1000 in python_ids[0] and 1001 in python_ids[0] and 1002 in python_ids[0]
  assert python_ids[1] == [1000]
  assert AlbertTextTokenizer(out)(texts).to_list() == python_ids


def test_normal_piece_type_loses_to_a_better_old_split(tmp_path):
  """Why USER_DEFINED is the default: "defined" is "▁" + "defined" (score -9.8), better than any NORMAL piece
  scored below the existing ones, so the NORMAL "▁defined" would never be produced (and its row never trained)."""
  out = str(tmp_path / "normal.model")
  result = ev.extend_vocabulary(SPM, _words_file(tmp_path, ["defined"]), out, piece_type="normal")
  assert result["added"] == {"\u2581defined": 1000}
  assert 1000 not in FullTokenizer(out).encode_ids("it is defined")


def test_byte_order_mark_and_crlf_stay_out_of_the_pieces(tmp_path):
  """Windows editors save "UTF-8" with a BOM and CRLF; the BOM must not become part of the first piece."""
  path = tmp_path / "bom.txt"
  path.write_bytes(b"\xef\xbb\xbfzebrafish\r\ncovid\r\n")
  out = str(tmp_path / "bom.model")
  result = ev.extend_vocabulary(SPM, str(path), out)
  assert result["added"] == {"\u2581zebrafish": 1000, "\u2581covid": 1001}
  assert FullTokenizer(out).encode_ids_batch(["zebrafish", "covid"]) == [[1000], [1001]]


def test_pieces_are_stored_as_the_model_normalises_text(tmp_path):
  """The preprocessing's NFKD splits a Hangul syllable into jamo; the model's nmt_nfkc joins them again before the
  pieces are matched, so the piece must be the composed form to be produced."""
  out = str(tmp_path / "hangul.model")
  result = ev.extend_vocabulary(SPM, _words_file(tmp_path, ["\ud55c\uad6d\uc5b4", "Ｆｕｌｌwidth"]), out)
  assert result["added"] == {"\u2581\ud55c\uad6d\uc5b4": 1000, "\u2581fullwidth": 1001}
  assert FullTokenizer(out).encode_ids_batch(["\ud55c\uad6d\uc5b4", "Ｆｕｌｌwidth"]) == [[1000], [1001]]


def test_a_new_word_the_model_would_not_produce_is_refused(tmp_path):
  """The promise (a new word is produced as its new id) is checked on the extended model before it is written: a
  piece ending in digit + "," is split again by the tokenizer (the reference's digit-comma rule), so "▁covid19,"
  would be a row that is never trained."""
  out = str(tmp_path / "bad.model")
  with pytest.raises(ValueError, match=r"words.txt: 1 new word\(s\) would never be produced as their new id: "
                                       r"'covid19,' -> .*id 1001.*Remove them"):
    ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish", "covid19,"]), out)
  assert os.listdir(tmp_path) == ["words.txt"]  # no model, no temporary


def _tiny_native(tmp_path, rows=OLD_SIZE, spm_model_file=SPM, name="native_in"):
  model = AlbertPretrainer(AlbertConfig(**dict(TINY, vocab_size=rows)))
  # A non-zero MLM bias, so "old entries copied" is a real check.
  model.mlm_head.output_bias.assign(np.random.default_rng(0).normal(size=rows).astype("float32"))
  directory = str(tmp_path / name)
  native.save_pretrained(model, directory, spm_model_file=spm_model_file)
  with open(os.path.join(directory, "labels.json"), "w", encoding="utf-8") as f:
    json.dump(["neg", "pos"], f)
  return model, directory


def test_grown_model_keeps_old_rows_bit_identical_and_draws_new_rows(tmp_path):
  old_model, model_dir = _tiny_native(tmp_path)
  letters = "bcdfghjklmnpqrstvwxz"
  words = [f"q{a}{b}x" for a in letters for b in letters[:10]]  # 200 new words
  out_dir = str(tmp_path / "grown")
  result = ev.extend_vocabulary(SPM, _words_file(tmp_path, words), str(tmp_path / "new.model"), model_dir=model_dir,
                                output_model_dir=out_dir, seed=7)
  new_size = result["new_vocab_size"]
  assert new_size == OLD_SIZE + 200 and result["model"]["grown"] == {
      "bert/embeddings/word_embeddings": 200, "cls/predictions/output_bias": 200}
  assert AlbertConfig.from_json_file(os.path.join(out_dir, "config.json")).vocab_size == new_size
  assert FullTokenizer(os.path.join(out_dir, "spiece.model")).vocab_size == new_size
  assert json.load(open(os.path.join(out_dir, "labels.json"), encoding="utf-8")) == ["neg", "pos"]
  assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
  grown, _ = loading.load_model(out_dir, "pretrainer")
  old_vars, new_vars = tf1_variable_map(old_model), tf1_variable_map(grown)
  for name, variable in old_vars.items():
    value = new_vars[name].numpy()
    old_value = variable.numpy()
    assert value[:old_value.shape[0]].tobytes() == old_value.tobytes(), name
  new_rows = new_vars["bert/embeddings/word_embeddings"].numpy()[OLD_SIZE:]
  # Truncated at 2 stddev (as tf.truncated_normal): the std of the draws is 0.8796 * initializer_range.
  assert abs(new_rows.std() / (0.8796 * TINY["initializer_range"]) - 1) < 0.05
  assert abs(new_rows.mean()) < 0.005 and np.abs(new_rows).max() <= 2 * TINY["initializer_range"]
  assert not new_vars["cls/predictions/output_bias"].numpy()[OLD_SIZE:].any()
  # Seeded: the same seed draws the same rows.
  again = ev.grow_model(model_dir, str(tmp_path / "again"), new_size, str(tmp_path / "new.model"), seed=7)
  assert again["grown"] == result["model"]["grown"]
  regrown, _ = loading.load_model(str(tmp_path / "again"), "pretrainer")
  assert (tf1_variable_map(regrown)["bert/embeddings/word_embeddings"].numpy()[OLD_SIZE:].tobytes()
          == new_rows.tobytes())
  # A new id goes through the model.
  ids = np.array([[2, OLD_SIZE + 199, 3, 0]], "int32")
  outputs = grown({"input_word_ids": ids, "input_mask": np.array([[1, 1, 1, 0]], "int32"),
                   "input_type_ids": np.zeros_like(ids), "masked_lm_positions": np.array([[1]], "int32")})
  assert outputs["mlm_logits"].shape[-1] == new_size


def test_a_table_with_unused_rows_takes_the_new_pieces_in_them(tmp_path, caplog):
  """A preset's vocab_size over a small vocabulary (training only warns) leaves rows no piece ever used: the new
  pieces take ids from the pieces' count up, those rows are drawn afresh as new rows are, and the table grows only
  past its size."""
  from official_albert.modeling.layers.initializers import kernel_initializer
  rows = OLD_SIZE + 5
  old_model, model_dir = _tiny_native(tmp_path, rows=rows)
  old_vars = {n: v.numpy() for n, v in tf1_variable_map(old_model).items()}
  for words, table in ((["zebrafish", "covid"], rows), ([f"q{c}x" for c in "bcdfghjk"], OLD_SIZE + 8)):
    out_dir = str(tmp_path / f"out{len(words)}")
    caplog.clear()
    result = ev.extend_vocabulary(SPM, _words_file(tmp_path, words), str(tmp_path / f"new{len(words)}.model"),
                                  model_dir=model_dir, output_model_dir=out_dir, seed=7)
    assert list(result["added"].values()) == list(range(OLD_SIZE, OLD_SIZE + len(words)))
    reused = min(len(words), 5)
    assert result["model"]["reinitialised"] == {"bert/embeddings/word_embeddings": reused,
                                                "cls/predictions/output_bias": reused}
    assert result["model"]["grown"] == ({} if table == rows else {"bert/embeddings/word_embeddings": 3,
                                                                    "cls/predictions/output_bias": 3})
    assert f"{reused} existing rows among them were never trained on any piece: re-initialised" in caplog.text
    assert AlbertConfig.from_json_file(os.path.join(out_dir, "config.json")).vocab_size == table
    new_vars = tf1_variable_map(loading.load_model(out_dir, "pretrainer")[0])
    for name, old_value in old_vars.items():
      value = new_vars[name].numpy()
      if name not in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        assert value.tobytes() == old_value.tobytes(), name
        continue
      assert value.shape[0] == table
      # Rows of old pieces, and unused rows past the new ids, are kept bit for bit.
      assert value[:OLD_SIZE].tobytes() == old_value[:OLD_SIZE].tobytes(), name
      assert value[OLD_SIZE + len(words):].tobytes() == old_value[OLD_SIZE + len(words):].tobytes(), name
    fresh = np.asarray(kernel_initializer(TINY["initializer_range"], seed=7)(shape=(len(words), 16), dtype="float32"))
    embeddings = new_vars["bert/embeddings/word_embeddings"].numpy()
    assert embeddings[OLD_SIZE:OLD_SIZE + len(words)].tobytes() == fresh.tobytes()
    assert not new_vars["cls/predictions/output_bias"].numpy()[OLD_SIZE:OLD_SIZE + len(words)].any()
    summary = ev.format_summary(result)
    assert f"vocab_size {table}" in summary and "re-initialised rows (in the table, never trained" in summary


def test_a_vocabulary_other_than_the_recorded_one_is_refused(tmp_path):
  """With more rows than pieces the count cannot vouch for the vocabulary: the model directory's recorded
  spiece.model does. Here the model was trained with one more piece than --spm_model_file has, so the "new" id 1000
  would overwrite a trained row."""
  recorded = str(tmp_path / "recorded.model")
  ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish"], "one.txt"), recorded)
  _, model_dir = _tiny_native(tmp_path, rows=OLD_SIZE + 5, spm_model_file=recorded)
  out = str(tmp_path / "new.model")
  with pytest.raises(ValueError, match=r"--spm_model_file=.*test_spm.model \(1000 pieces\) is not the SentencePiece "
                                       r"model of --model_dir=.*native_in: its recorded .*spiece.model \(1001 pieces\) "
                                       r"differs from id 1000 on. Pass --spm_model_file=.*spiece.model"):
    ev.extend_vocabulary(SPM, _words_file(tmp_path, ["covid"]), out, model_dir=model_dir,
                         output_model_dir=str(tmp_path / "o"))
  assert not os.path.exists(out)


def test_hf_round_trip_keeps_the_grown_table(tmp_path):
  _, model_dir = _tiny_native(tmp_path)
  out_dir = str(tmp_path / "grown")
  ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish", "covid"]), str(tmp_path / "new.model"),
                       model_dir=model_dir, output_model_dir=out_dir)
  convert_lib.convert("native", out_dir, "hf", str(tmp_path / "hf"))
  convert_lib.convert("hf", str(tmp_path / "hf"), "native", str(tmp_path / "back"))
  assert json.load(open(tmp_path / "hf" / "config.json", encoding="utf-8"))["vocab_size"] == OLD_SIZE + 2
  assert FullTokenizer(str(tmp_path / "back" / "spiece.model")).encode_ids("zebrafish") == [OLD_SIZE]
  grown, _ = loading.load_model(out_dir, "pretrainer")
  back, _ = loading.load_model(str(tmp_path / "back"), "pretrainer")
  for name, variable in tf1_variable_map(grown).items():
    assert tf1_variable_map(back)[name].numpy().tobytes() == variable.numpy().tobytes(), name


def test_bad_inputs_are_named(tmp_path):
  words = _words_file(tmp_path, ["zebrafish"])
  out = str(tmp_path / "new.model")
  with pytest.raises(FileNotFoundError, match="--spm_model_file=.*missing.model does not exist"):
    ev.extend_vocabulary(str(tmp_path / "missing.model"), words, out)
  with pytest.raises(FileNotFoundError, match="--new_pieces_file=.*nope.txt does not exist"):
    ev.extend_vocabulary(SPM, str(tmp_path / "nope.txt"), out)
  with pytest.raises(ValueError, match="empty.txt holds no pieces"):
    ev.extend_vocabulary(SPM, _words_file(tmp_path, ["", "  "], "empty.txt"), out)
  with pytest.raises(ValueError, match=r"two.txt:2: 'new york' contains whitespace"):
    ev.extend_vocabulary(SPM, _words_file(tmp_path, ["ok", "new york"], "two.txt"), out)
  with pytest.raises(ValueError, match="--model_dir and --output_model_dir go together"):
    ev.extend_vocabulary(SPM, words, out, model_dir=str(tmp_path))
  assert not os.path.exists(out)
  # A model whose vocabulary is not this SentencePiece model's: refused before anything is written.
  model_dir = str(tmp_path / "other_vocab")
  native.save_pretrained(AlbertPretrainer(AlbertConfig(**dict(TINY, vocab_size=97))), model_dir)
  with pytest.raises(ValueError, match=r"--spm_model_file=.* has 1000 pieces but --model_dir=.*other_vocab's "
                                       r"word-embedding table has 97 rows \(config vocab_size=97\): ids 97..999 have "
                                       r"no row.*Pass the model's own spiece.model"):
    ev.extend_vocabulary(SPM, words, out, model_dir=model_dir, output_model_dir=str(tmp_path / "o"))
  assert not os.path.exists(out)


def test_binary_prints_the_summary(tmp_path, capsys):
  fv = flags.FlagValues()
  ev.define_flags(fv)
  fv([__file__, f"--spm_model_file={SPM}", f"--new_pieces_file={_words_file(tmp_path, ['zebrafish', 'the'])}",
      f"--output_model_file={tmp_path / 'new.model'}"])
  ev.main([], fv)
  printed = capsys.readouterr().out
  assert "vocabulary: 1000 -> 1001 pieces (1 added as user_defined)" in printed
  assert "skipped: 1 already in the model" in printed and "\u2581zebrafish -> id 1000" in printed


def test_a_cased_accented_model_is_grown_as_it_records_and_keeps_the_record(tmp_path, caplog):
  """Review s51: the grown directory lost tokenizer_config.json (read lower-cased and accent-stripped afterwards), the
  pieces were normalised lower-cased whatever --model_dir recorded, and a keep_accents model could not get accented
  pieces at all (stored as `▁Cafe`, which its tokenizer never produces)."""
  _, model_dir = _tiny_native(tmp_path)
  with open(os.path.join(model_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"do_lower_case": False, "keep_accents": True, "remove_space": True}, f)
  out_dir = str(tmp_path / "grown")
  result = ev.extend_vocabulary(SPM, _words_file(tmp_path, ["Café", "Naïveté"]), str(tmp_path / "new.model"),
                                model_dir=model_dir, output_model_dir=out_dir)
  assert list(result["added"]) == ["\u2581Café", "\u2581Naïveté"]
  assert result["tokenizer_options"] == {"do_lower_case": False, "keep_accents": True, "remove_space": True}
  with open(os.path.join(out_dir, "tokenizer_config.json"), encoding="utf-8") as f:
    assert json.load(f) == result["tokenizer_options"]
  tokenizer = FullTokenizer(os.path.join(out_dir, "spiece.model"), do_lower_case=False, keep_accents=True)
  assert tokenizer.encode_ids_batch(["Café", "Naïveté"]) == [[OLD_SIZE], [OLD_SIZE + 1]]
  # A flag that contradicts the record wins, with a warning naming the record.
  with caplog.at_level("WARNING"):
    lowered = ev.extend_vocabulary(SPM, _words_file(tmp_path, ["Café"]), str(tmp_path / "lower.model"),
                                   model_dir=model_dir, output_model_dir=str(tmp_path / "lower"), do_lower_case=True)
  assert list(lowered["added"]) == ["\u2581café"] and "--do_lower_case=True, but" in caplog.text
  with open(os.path.join(tmp_path / "lower", "tokenizer_config.json"), encoding="utf-8") as f:
    assert json.load(f)["do_lower_case"] is True  # (the options used, not the input's record)
  # grow_model called on its own copies the input's record.
  ev.grow_model(model_dir, str(tmp_path / "alone"), result["new_vocab_size"], str(tmp_path / "new.model"))
  with open(os.path.join(tmp_path / "alone", "tokenizer_config.json"), encoding="utf-8") as f:
    assert json.load(f) == {"do_lower_case": False, "keep_accents": True, "remove_space": True}


def test_outputs_that_would_replace_the_input_are_refused_before_anything_is_written(tmp_path):
  _, model_dir = _tiny_native(tmp_path, name="runs/m")
  before = sorted(os.listdir(model_dir))
  words = _words_file(tmp_path, ["zebrafish"])
  with pytest.raises(ValueError, match=r"--output_model_file=.*spiece.model is inside --model_dir"):
    ev.extend_vocabulary(SPM, words, os.path.join(model_dir, "spiece.model"), model_dir=model_dir,
                         output_model_dir=str(tmp_path / "grown"))
  with pytest.raises(ValueError, match=r"--output_model_dir=.*runs holds --model_dir=.*runs/m"):
    ev.extend_vocabulary(SPM, words, str(tmp_path / "new.model"), model_dir=model_dir,
                         output_model_dir=str(tmp_path / "runs"))
  assert sorted(os.listdir(model_dir)) == before and not os.path.exists(tmp_path / "new.model")


def test_a_classifier_grows_with_its_exit_heads_side_files_and_recorded_head(tmp_path):
  """The head is the folder's (every folder was read as a pretrainer: a fine-tuned classifier failed after the
  vocabulary was written, which stayed behind); exit heads and labels.txt are kept (both were dropped silently)."""
  from official_albert import model_directory as md  # noqa: PLC0415
  model = loading.build_model("classifier", AlbertConfig(**dict(TINY, num_hidden_layers=3)), num_labels=3,
                              exit_heads=True)
  model_dir = str(tmp_path / "cls")
  native.save_pretrained(model, model_dir, spm_model_file=SPM)
  md.write_label_file(model_dir, md.LabelFile(["billing", "bug", "praise"], task="text_classification"))
  with open(os.path.join(model_dir, "labels.txt"), "w", encoding="utf-8") as f:
    f.write("billing\nbug\npraise\n")
  out_dir = str(tmp_path / "grown")
  result = ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish"]), str(tmp_path / "new.model"),
                                model_dir=model_dir, output_model_dir=out_dir)
  assert result["model"]["grown"] == {"bert/embeddings/word_embeddings": 1}
  assert os.path.exists(os.path.join(out_dir, "labels.txt"))
  grown, _ = loading.load_model(out_dir, "classifier")
  names = sorted(n for n in tf1_variable_map(grown) if n.startswith("exit_heads/"))
  assert names and all(tf1_variable_map(grown)[n].numpy().tobytes() == tf1_variable_map(model)[n].numpy().tobytes()
                       for n in names)
  # A failed grow leaves no extended vocabulary behind.
  with pytest.raises(ValueError):
    ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish"]), str(tmp_path / "again.model"),
                         model_dir=model_dir, output_model_dir=str(tmp_path / "g2"), model_type="pretrainer")
  assert not os.path.exists(tmp_path / "again.model")


def test_an_output_folder_of_a_training_run_is_refused(tmp_path):
  """A run's folder has a config.json too: it was replaced whole (checkpoints, records and results deleted)."""
  model_dir, run = tmp_path / "model", tmp_path / "run"
  model_dir.mkdir()
  run.mkdir()
  for name in ("config.json", "ckpt-4.index", "params.yaml"):
    (run / name).write_text("{}")
  with pytest.raises(ValueError, match=r"run holds files this tool does not write \(\['ckpt-4\.index', 'params"):
    ev.check_output_model_dir(str(model_dir), str(run))
  for name in ("ckpt-4.index", "params.yaml"):
    (run / name).unlink()
  for name in ("model.ckpt.index", "spiece.model", "labels.json", "tokenizer_config.json"):
    (run / name).write_text("{}")
  ev.check_output_model_dir(str(model_dir), str(run))  # an earlier grown model: replaced


def test_an_hf_classifier_keeps_its_label_names_and_multi_label_flag(tmp_path):
  """transformers' save_pretrained keeps them in config.json (id2label, problem_type), which the native output does
  not: the grown classifier answered LABEL_i with a softmax."""
  from official_albert import model_directory as md  # noqa: PLC0415
  model = loading.build_model("classifier", AlbertConfig(**TINY), num_labels=3)
  native_dir = str(tmp_path / "cls")
  native.save_pretrained(model, native_dir, spm_model_file=SPM)
  md.write_label_file(native_dir, md.LabelFile(["billing", "bug", "praise"], multi_label=True,
                                               task="text_classification"))
  hf_dir = tmp_path / "hf"
  convert_lib.convert("native", native_dir, "hf", str(hf_dir), model_type="classifier")
  os.remove(hf_dir / md.LABELS_FILE)  # (as transformers writes the folder: the names in config.json only)
  out_dir = str(tmp_path / "grown")
  ev.extend_vocabulary(SPM, _words_file(tmp_path, ["zebrafish"]), str(tmp_path / "new.model"), model_dir=str(hf_dir),
                       output_model_dir=out_dir)
  labels = md.read_label_file(out_dir)
  assert labels is not None and labels.labels == ["billing", "bug", "praise"] and labels.multi_label
