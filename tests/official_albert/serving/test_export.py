"""SavedModel export: text-in signatures equal the Python tokenizer + from_ids, examples-in equals from_ids, outputs
equal the Keras model; the SavedModel is read back in a fresh process that imports only tensorflow(+_text)."""

import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import types

from absl import flags
import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import export_saved_model
from official_albert import fill_mask
from official_albert.checkpoints.loading import build_model
from official_albert.serving import export
from official_albert.serving import openvino_export
from official_albert.serving import pipelines
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import load_for_export
from official_albert.serving.saved_model_runtime import saved_model_tokenizer
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids
from official_albert.tokenization.choices import pack_choices
from official_albert.tokenization.choices import qa_text
from tests import tiny
from tests.official_albert.serving import export_harness

SEQ = export_harness.SEQ
MAX_PRED = 20  # (the export's default)
TINY = dict(tiny.MODEL)
TEXTS = ["Hello I'm a [MASK] model.", "", "Naïve café — 日本語 Straße ✓ déjà vu, 1990, " * 6,
         "The [MASK] sat on the [MASK], ``quoted''."]
TEXTS_B = ["a short one", "", "another long segment " * 8, "B"]
VENV_BIN = pathlib.Path(sys.executable).parent

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    assert "official_albert" not in sys.modules
    inp = dict(np.load(sys.argv[1], allow_pickle=False))
    out = {}
    def run(prefix, fn, **kwargs):
      for k, v in fn(**kwargs).items():
        out[prefix + k] = v.numpy()
    def examples(ids, extra):
      feats = {k: ids[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
      feats.update(extra)
      rows = []
      for b in range(len(ids["input_word_ids"])):
        f = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v[b]]))
             for k, v in feats.items()}
        rows.append(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
      return tf.constant(rows)
    texts = tf.constant([t.encode("utf-8") for t in inp["texts"]])
    texts_b = tf.constant([t.encode("utf-8") for t in inp["texts_b"]])
    names = ("input_word_ids", "input_mask", "input_type_ids")

    mlm = tf.saved_model.load(sys.argv[2])
    run("mlm/text/", mlm.signatures["serving_default"], text=texts)
    ids = {k: inp["mlm_" + k] for k in names}
    run("mlm/ids/", mlm.signatures["from_ids"], masked_lm_positions=tf.constant(inp["mlm_positions"]),
        **{k: tf.constant(v) for k, v in ids.items()})
    run("mlm/examples/", mlm.signatures["serve_examples"],
        examples=examples(ids, {"masked_lm_positions": inp["mlm_positions"]}))
    run("mlm/info/", mlm.signatures["tokenization_info"])

    cls = tf.saved_model.load(sys.argv[3])
    run("cls/text/", cls.signatures["serving_default"], text=texts, text_b=texts_b)
    run("cls/single/", cls.signatures["serve_text"], text=texts)
    ids = {k: inp["cls_" + k] for k in names}
    run("cls/ids/", cls.signatures["from_ids"], **{k: tf.constant(v) for k, v in ids.items()})
    run("cls/examples/", cls.signatures["serve_examples"], examples=examples(ids, {}))
    np.savez(sys.argv[4], **out)
    """)


def _python_features(tokenizer, texts, texts_b=None):
  # A second text without pieces (TEXTS_B[1]) packs one segment, as the pipelines and GLUE's records.
  rows = [pack_ids(tokenizer.encode_ids(a), None if texts_b is None else (tokenizer.encode_ids(b) or None), SEQ)
          for a, b in zip(texts, texts_b or texts)]
  return {k: np.asarray([r[k] for r in rows], np.int32) for k in rows[0]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, spm_model_file, tiny_exports):
  """The export harness's SavedModels of its pretrainer and 3-way classifier (a pair classifier: written once per
  run, shared with test_export_harness.py); runs the fresh-process reader."""
  root = tmp_path_factory.mktemp("export")
  models = {head: tiny_exports.models.model(head) for head in ("pretrainer", "classifier")}
  folders = {head: tiny_exports.folder("saved_model", head) for head in ("pretrainer", "classifier")}
  tokenizer = FullTokenizer(spm_model_file)
  mlm_ids = _python_features(tokenizer, TEXTS)
  positions = np.zeros((len(TEXTS), MAX_PRED), np.int32)
  for b, row in enumerate(mlm_ids["input_word_ids"]):
    found = [i for i, x in enumerate(row) if x == 4 and mlm_ids["input_mask"][b, i]]
    positions[b, :len(found)] = found
  cls_ids = _python_features(tokenizer, TEXTS, TEXTS_B)
  inputs = {"texts": np.array(TEXTS), "texts_b": np.array(TEXTS_B), "mlm_positions": positions,
            **{f"mlm_{k}": v for k, v in mlm_ids.items()}, **{f"cls_{k}": v for k, v in cls_ids.items()}}
  np.savez(root / "inputs.npz", **inputs)
  (root / "child.py").write_text(CHILD)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  # The fresh reader and saved_model_cli run side by side.
  cli = subprocess.Popen([str(VENV_BIN / "saved_model_cli"), "show", "--dir", folders["pretrainer"], "--all"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)
  child = subprocess.run([sys.executable, str(root / "child.py"), str(root / "inputs.npz"), folders["pretrainer"],
                          folders["classifier"], str(root / "outputs.npz")], capture_output=True, text=True, env=env,
                         cwd=root)
  cli_out, cli_err = cli.communicate()
  assert child.returncode == 0, child.stderr[-3000:]
  assert cli.returncode == 0, cli_err[-3000:]
  # (allow_pickle: the classifier's directory has label names, and its `labels` output is strings)
  outputs = dict(np.load(root / "outputs.npz", allow_pickle=True))
  return {"models": models, "inputs": inputs, "outputs": outputs, "cli": cli_out, "folders": folders,
          "pretrainer_dir": tiny_exports.models.dir("pretrainer")}


@pytest.mark.slow
def test_saved_model_cli_lists_the_signatures(exported):
  for name in ("serving_default", "serve_text", "serve_text_pair", "from_ids", "serve_examples",
               "tokenization_info"):
    assert f"signature_def['{name}']" in exported["cli"]


def test_text_signature_tokenizes_like_the_python_tokenizer(exported):
  out, inp = exported["outputs"], exported["inputs"]
  for k in ("input_word_ids", "input_mask", "input_type_ids"):
    np.testing.assert_array_equal(out[f"mlm/text/{k}"], inp[f"mlm_{k}"])
    np.testing.assert_array_equal(out[f"cls/text/{k}"], inp[f"cls_{k}"])
  assert inp["mlm_input_mask"][1].sum() == 2  # empty text: [CLS] [SEP]
  assert inp["mlm_input_mask"][2].sum() == SEQ  # over-long text: truncated to the sequence length
  np.testing.assert_array_equal(out["mlm/text/masked_lm_positions"], inp["mlm_positions"])
  np.testing.assert_array_equal(out["mlm/text/masked_lm_weights"].sum(1), [1, 0, 0, 2])


def test_text_and_examples_equal_from_ids_and_keras(exported):
  out, inp = exported["outputs"], exported["inputs"]
  mlm, cls = exported["models"]["pretrainer"], exported["models"]["classifier"]
  names = ("input_word_ids", "input_mask", "input_type_ids")
  keras_mlm = mlm({**{k: inp[f"mlm_{k}"] for k in names}, "masked_lm_positions": inp["mlm_positions"]})
  keras_cls = cls({k: inp[f"cls_{k}"] for k in names})
  for key in ("mlm_logits", "sop_logits", "pooled_output", "sequence_output"):
    np.testing.assert_allclose(out[f"mlm/text/{key}"], out[f"mlm/ids/{key}"], atol=1e-6, err_msg=key)
    np.testing.assert_allclose(out[f"mlm/examples/{key}"], out[f"mlm/ids/{key}"], atol=1e-6, err_msg=key)
    np.testing.assert_allclose(out[f"mlm/ids/{key}"], keras_mlm[key].numpy(), atol=1e-5, err_msg=key)
  for prefix in ("cls/text/", "cls/examples/", "cls/ids/"):
    np.testing.assert_allclose(out[prefix + "logits"], keras_cls["logits"].numpy(), atol=1e-5, err_msg=prefix)
  probs = out["cls/text/probabilities"]
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
  np.testing.assert_array_equal(out["cls/text/predictions"], probs.argmax(-1))
  # The single-text signature packs without the second segment.
  assert (out["cls/single/input_type_ids"] == 0).all() and (out["cls/text/input_type_ids"][0] == 1).any()


def test_pretrainer_top_k_outputs(exported):
  out = exported["outputs"]
  probs, ids = out["mlm/text/mlm_top_k_probabilities"], out["mlm/text/mlm_top_k_ids"]
  assert probs.shape == (len(TEXTS), MAX_PRED, 5)
  assert (np.diff(probs, axis=-1) <= 0).all()
  np.testing.assert_array_equal(ids[..., 0], out["mlm/text/mlm_logits"].argmax(-1))
  info = {k[len("mlm/info/"):]: v for k, v in out.items() if k.startswith("mlm/info/")}
  assert info["spm_model_file"].item().decode().endswith(os.path.join("assets", "spiece.model"))
  assert info["do_lower_case"].item() is True and info["seq_length"].item() == SEQ
  assert info["tokenizer_mode"].item() == b"hf"


@pytest.mark.slow
def test_fill_mask_from_the_saved_model_equals_the_checkpoint_path(exported, capsys):
  """The demo's serving stage: the fill-mask binary answered by the SavedModel, as by the checkpoint."""
  folders = exported["folders"]
  fv = flags.FlagValues()
  fill_mask.define_flags(fv)
  fv(["fill_mask", f"--saved_model_dir={folders['pretrainer']}", f"--text={TEXTS[0]}", f"--text={TEXTS[3]}",
      "--top_k=3"])
  fill_mask.main([], fv)
  served = [json.loads(line) for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
  direct = pipelines.fill_mask(exported["pretrainer_dir"], [TEXTS[0], TEXTS[3]], top_k=3)
  direct = direct[0] + direct[1][0] + direct[1][1]
  assert [(p["token"], p["token_str"], p["sequence"]) for p in served] == [
      (p["token"], p["token_str"], p["sequence"]) for p in direct]
  np.testing.assert_allclose([p["score"] for p in served], [p["score"] for p in direct], atol=1e-5)
  with pytest.raises(ValueError, match="exported with --top_k=5"):
    pipelines.fill_mask_saved_model(folders["pretrainer"], TEXTS[0], top_k=6)


def test_export_argument_errors(tmp_path, spm_model_file):
  model = build_model("encoder", AlbertConfig(**TINY))
  with pytest.raises(ValueError, match="exceeds the model's max_position_embeddings"):
    export.AlbertServingModule(model, "encoder", seq_length=65)
  with pytest.raises(ValueError, match="head='mlm' is not one of"):
    export.AlbertServingModule(model, "mlm")
  with pytest.raises(FileExistsError, match="--overwrite"):
    export.export_saved_model(export.AlbertServingModule(model, "encoder", seq_length=32), str(tmp_path))
  with pytest.raises(ValueError, match="1000 pieces but the model's vocab_size is 999"):
    export.AlbertServingModule(build_model("encoder", AlbertConfig(**dict(TINY, vocab_size=999))), "encoder",
                               seq_length=32, spm_model_file=spm_model_file)


def _example_bytes(features):
  import tensorflow as tf
  rows = []
  for b in range(len(features["input_word_ids"])):
    feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(v[b]).reshape(-1).tolist()))
             for k, v in features.items()}
    rows.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
  return rows


@pytest.mark.parametrize("head", ["encoder", "token_classifier", "span", "squad_v2", "multiple_choice"])
def test_every_head_from_ids_and_examples_equal_keras(head):
  """Signatures of the other heads, traced in-process (no text signatures: no spm model given)."""
  import tensorflow as tf
  keras.utils.set_random_seed(22)
  model = build_model(head, AlbertConfig(**TINY), num_labels=3, num_choices=2)
  module = export.AlbertServingModule(model, head, seq_length=12)
  sigs = module.signatures()
  assert set(sigs) == {"from_ids", "serve_examples", "tokenization_info", "serving_default"}
  rng = np.random.default_rng(3)
  shape = (2, 2, 12) if head == "multiple_choice" else (2, 12)
  feats = {"input_word_ids": rng.integers(5, 1000, shape).astype(np.int32),
           "input_mask": np.ones(shape, np.int32), "input_type_ids": np.zeros(shape, np.int32)}
  feats["input_mask"][..., 9:] = 0
  if head == "squad_v2":
    feats["p_mask"] = np.zeros((2, 12), np.int32)
    feats["p_mask"][:, 1:4] = 1
  expected = model(feats)
  from_ids = sigs["from_ids"](**{k: tf.constant(v) for k, v in feats.items()})
  served = sigs["serve_examples"](examples=tf.constant(_example_bytes(feats)))
  for key, value in from_ids.items():
    # (multiple choice and classifier also say how many iterations each row ran: all of them)
    want = np.full(2, TINY["num_hidden_layers"]) if key == "exit_iteration" else expected[key].numpy()
    np.testing.assert_allclose(value.numpy(), want, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(served[key].numpy(), want, atol=1e-5, err_msg=key)
  if head == "multiple_choice":
    np.testing.assert_allclose(served["probabilities"].numpy().sum(-1), 1.0, atol=1e-6)
  # Multiple choice records its rows' question+option cap (RACE's 128 fitted to 12 positions), the others do not.
  info = sigs["tokenization_info"]()
  if head == "multiple_choice":
    assert int(info["max_qa_length"]) == 3
  else:
    assert "max_qa_length" not in info


def test_text_features_for_choices_and_squad(spm_model_file):
  """Eager check of the text path of multiple choice ([B, C] strings) and the SQuAD p_mask. A multiple-choice row is
  RACE's (`pack_choices`, the records' and the pipelines'): the question+option keeps its LAST max_qa_length pieces
  (the option), the article is cut; longest-first cut a long question from its end, so every option's row was the
  same. The max_qa_length is the spec's, else RACE's 128 fitted to seq_length (16 -> 4), as the pipelines pick it."""
  import tensorflow as tf
  tokenizer = FullTokenizer(spm_model_file)
  model = build_model("multiple_choice", AlbertConfig(**TINY), num_choices=4)
  article = " ".join(f"w{i}" for i in range(40))
  questions = ["which of these words is the one", "Tom has a _ ball."]
  options = [["alpha", "beta", "gamma", "delta"], ["red", "blue", "green", ""]]
  texts_b = [[qa_text(q, o) for o in opts] for q, opts in zip(questions, options)]
  assert len(tokenizer.encode_ids(texts_b[0][0])) > 16 // 2  # (longer than half the row and than max_qa_length)
  for max_qa_length, want_qa in ((None, 4), (9, 9)):
    module = export.AlbertServingModule(model, "multiple_choice", seq_length=16, spm_model_file=spm_model_file,
                                        max_qa_length=max_qa_length)
    assert module.max_qa_length == want_qa
    out = module._text_outputs(tf.constant([[article] * 4] * 2), tf.constant(texts_b))  # pylint: disable=W0212
    assert out["logits"].shape == (2, 4)
    for b, (question, opts) in enumerate(zip(questions, options)):
      want = pack_choices(tokenizer, article, question, opts, 16, want_qa)
      for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(out[key][b], [row[key] for row in want], err_msg=f"{key} {max_qa_length}")
    assert len({tuple(row) for row in out["input_word_ids"][0].numpy().tolist()}) == 4  # the options differ
  with pytest.raises(ValueError, match="max_qa_length=13 must be between 1 and seq_length - 4 = 12"):
    export.AlbertServingModule(model, "multiple_choice", seq_length=16, max_qa_length=13)
  with pytest.raises(tf.errors.InvalidArgumentError, match="text and text_b must have the same shape"):
    module._text_outputs(tf.constant([[article] * 4] * 2), tf.constant(texts_b[:1]))  # pylint: disable=W0212
  packed = pack_ids([10, 11], [12, 13, 14], 9)
  p_mask = export.squad_p_mask(*(tf.constant([packed[k]]) for k in ("input_mask", "input_type_ids",
                                                                     "input_word_ids")))
  # [CLS] q q [SEP] c c c [SEP] pad: 0 for [CLS] and the context, 1 for the question, both [SEP]s and padding.
  np.testing.assert_array_equal(p_mask.numpy()[0], [0, 1, 1, 1, 0, 0, 0, 1, 1])


def test_serve_text_pair_refuses_text_and_text_b_of_different_batches(spm_model_file):
  """`text` [3] with `text_b` [1] paired every text with the one text_b (the packer broadcast it), and [1] with [3]
  answered 3 rows for 1 text: both are refused, naming the two inputs, in the traced signature as in eager."""
  import tensorflow as tf
  model = build_model("classifier", AlbertConfig(**TINY), num_labels=2)
  module = export.AlbertServingModule(model, "classifier", seq_length=16, spm_model_file=spm_model_file)
  spec = tf.TensorSpec([None], tf.string)
  serve_text_pair = tf.function(module._text_outputs, input_signature=[spec, spec])  # pylint: disable=W0212
  for texts, texts_b in ((["a b", "c d", "e f"], ["x y"]), (["a b"], ["x y", "z w", "q"])):
    with pytest.raises(tf.errors.InvalidArgumentError, match="text and text_b must have the same shape"):
      serve_text_pair(tf.constant(texts), tf.constant(texts_b))
  assert serve_text_pair(tf.constant(["a b"]), tf.constant(["x y"]))["logits"].shape == (1, 2)


@pytest.mark.parametrize("head", ["classifier", "multiple_choice"])
def test_dynamic_padding_cuts_requests_to_their_longest_sequence(head):
  """classifier / multiple_choice serving runs the model on the batch's longest sequence (rounded up), same outputs."""
  import tensorflow as tf
  keras.utils.set_random_seed(5)
  model = build_model(head, AlbertConfig(**TINY), num_labels=3, num_choices=2)
  seen = []

  class Recorder:
    def __call__(self, inputs, training=False):
      seen.append(tuple(inputs["input_word_ids"].shape))
      return model(inputs, training=training)

  shape = (2, 2, 24) if head == "multiple_choice" else (2, 24)
  rng = np.random.default_rng(1)
  feats = {"input_word_ids": rng.integers(5, 1000, shape).astype(np.int32), "input_mask": np.ones(shape, np.int32),
           "input_type_ids": np.zeros(shape, np.int32)}
  feats["input_mask"][..., 6:] = 0
  feats["input_mask"][0, ..., 6:9] = 1  # Longest row: 9 real tokens → cut to 12 with a multiple of 4.
  want = model(feats)["logits"].numpy()
  for multiple, length in ((4, 12), (0, 24)):
    module = export.AlbertServingModule(model, head, seq_length=24, pad_to_multiple_of=multiple)
    module.model = Recorder()
    got = module._call_model({k: tf.constant(v) for k, v in feats.items()})  # pylint: disable=protected-access
    assert seen[-1][-1] == length
    np.testing.assert_allclose(got["logits"].numpy(), want, atol=1e-5)
  assert export.AlbertServingModule(model, "encoder" if head == "classifier" else head, seq_length=24,
                                    pad_to_multiple_of=4).pad_to_multiple_of == (0 if head == "classifier" else 4)
  with pytest.raises(ValueError, match="pad_to_multiple_of"):
    export.AlbertServingModule(model, head, seq_length=24, pad_to_multiple_of=-1)


@pytest.mark.parametrize("head", ["classifier", "multiple_choice"])
def test_dynamic_padding_keeps_the_real_tokens_of_left_padded_rows(head):
  """Rows padded on the left (a client's ids, HF's padding_side="left") or with a hole in their mask are cut after
  their last real token, not after as many positions as they have real tokens: the same outputs as the model."""
  import tensorflow as tf
  keras.utils.set_random_seed(6)
  model = build_model(head, AlbertConfig(**TINY), num_labels=3, num_choices=2)
  shape = (2, 2, 24) if head == "multiple_choice" else (2, 24)
  rng = np.random.default_rng(2)
  feats = {"input_word_ids": rng.integers(5, 1000, shape).astype(np.int32), "input_mask": np.zeros(shape, np.int32),
           "input_type_ids": np.zeros(shape, np.int32)}
  feats["input_mask"][0, ..., 14:] = 1  # left padding: 10 real tokens at the end
  feats["input_mask"][1, ..., :4] = 1  # a hole: real tokens at 0-3 and 18-19
  feats["input_mask"][1, ..., 18:20] = 1
  want = model(feats)["logits"].numpy()
  module = export.AlbertServingModule(model, head, seq_length=24, pad_to_multiple_of=4)
  got = module._call_model({k: tf.constant(v) for k, v in feats.items()})  # pylint: disable=protected-access
  np.testing.assert_allclose(got["logits"].numpy(), want, atol=1e-5)


def _tokenizer_settings(tokenizer):
  return tokenizer.do_lower_case, tokenizer.keep_accents, tokenizer.remove_space


def test_export_tokenizes_as_the_directory_records(tmp_path, tiny_model_dirs, spm_model_file):
  """keep_accents / remove_space of the directory's tokenizer_config.json (what embed and HF's AlbertTokenizer read)
  reach the in-graph tokenizer, tokenization_info and its reader; do_lower_case of a GLUE / SQuAD / RACE run, which
  records it only in params.yaml, too."""
  import tensorflow as tf
  model_dir = tmp_path / "encoder"
  shutil.copytree(tiny_model_dirs["encoder"], model_dir)
  (model_dir / "tokenizer_config.json").write_text(json.dumps({"keep_accents": True, "remove_space": False}))
  (model_dir / "params.yaml").write_text("task:\n  do_lower_case: false\n")
  spec = ExportSpec(str(model_dir), str(tmp_path / "export"), "encoder", seq_length=24)
  assert spec.tokenizer_options() == {"do_lower_case": False, "keep_accents": True, "remove_space": False}
  module = export.AlbertServingModule(spec, load_for_export(spec))
  text = "Café crème, déjà vu"
  recorded = FullTokenizer(spm_model_file, do_lower_case=False, keep_accents=True, remove_space=False)
  assert recorded.encode_ids(text) != FullTokenizer(spm_model_file).encode_ids(text)  # (the text tells them apart)
  out = module._text_outputs(tf.constant([text]), None)  # pylint: disable=protected-access
  np.testing.assert_array_equal(out["input_word_ids"][0],
                                pack_ids(recorded.encode_ids(text), None, 24)["input_word_ids"])
  reader, settings = saved_model_tokenizer(module.signatures())
  assert _tokenizer_settings(reader) == (False, True, False)
  assert (settings["keep_accents"], settings["remove_space"]) == (True, False)
  # The spec's own settings win over the records.
  assert ExportSpec(str(model_dir), "", "encoder", do_lower_case=True, keep_accents=False).tokenizer_options() == {
      "do_lower_case": True, "keep_accents": False, "remove_space": False}


def test_export_reads_an_old_sentence_transformers_folders_records_in_its_transformer_folder(tmp_path):
  """An old-layout folder keeps the encoder's files, tokenizer_config.json included, in 0_Transformer/: the export
  reads the tokenizer settings there, where it reads the weights (and where embed reads them)."""
  folder = tmp_path / "legacy"
  (folder / "0_Transformer").mkdir(parents=True)
  (folder / "1_Pooling").mkdir()
  (folder / "modules.json").write_text(json.dumps([
      {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
  (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
  (folder / "0_Transformer" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  spec = ExportSpec(str(folder), str(tmp_path / "export"), "encoder")
  assert spec.weights_dir() == str(folder / "0_Transformer")
  assert spec.lower_case() is False


def test_a_model_in_hand_reads_no_folder(tmp_path, monkeypatch, spm_model_file):
  """`AlbertServingModule(model, head, ...)` has no model directory: the current directory's tokenizer_config.json
  and params.yaml (a notebook run inside some model folder) are not its records."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "keep_accents": True}))
  (tmp_path / "params.yaml").write_text("task:\n  do_lower_case: false\n")
  module = export.AlbertServingModule(build_model("encoder", AlbertConfig(**TINY)), "encoder", seq_length=16,
                                      spm_model_file=spm_model_file)
  assert _tokenizer_settings(module.preprocessor.tokenizer) == (True, False, True)
  assert module._tokenizer_options["do_lower_case"] is True  # pylint: disable=protected-access


def test_an_interrupted_export_leaves_no_temporary_folder(tmp_path, monkeypatch):
  """The SavedModel is written under a temporary name: a failure or an interrupt (Ctrl-C) removes it, as the OpenVINO
  and LiteRT writers do, instead of leaving `<export_dir>.tmp-<pid>` beside the export."""
  import tensorflow as tf

  def interrupted(module, path, signatures):
    del module, signatures
    os.makedirs(path)
    pathlib.Path(path, "saved_model.pb").write_bytes(b"partial")
    raise KeyboardInterrupt

  monkeypatch.setattr(tf.saved_model, "save", interrupted)
  module = type("Module", (), {"signatures": lambda self: {}})()
  with pytest.raises(KeyboardInterrupt):
    export.export_saved_model(module, str(tmp_path / "out"))
  assert os.listdir(tmp_path) == []


def test_a_killed_exports_temporary_folder_is_removed_by_the_next_export(tmp_path, monkeypatch):
  """A killed export (kill -9: no `except` runs) left `<export_dir>.tmp-<pid>`, a whole model, forever; the next
  SavedModel or OpenVINO export to the same folder removes it when its process is gone (a live one's is kept)."""
  import tensorflow as tf
  dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                            check=True).stdout)
  child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # (not getppid: 0 under PID 1)
  live = child.pid
  for name in (f"out.tmp-{dead}-export", f"out.tmp-{live}-export", f"ov.tmp-{dead}-export", "out.tmp-20241130"):
    os.makedirs(tmp_path / name / "variables")

  def save(module, path, signatures):
    del module, signatures
    os.makedirs(path)
    pathlib.Path(path, "saved_model.pb").write_bytes(b"model")

  monkeypatch.setattr(tf.saved_model, "save", save)
  export.export_saved_model(type("Module", (), {"signatures": lambda self: {}})(), str(tmp_path / "out"))
  loaded = types.SimpleNamespace(spm_model_file=None, export_label_file=lambda: None,
                                 model=types.SimpleNamespace(config=types.SimpleNamespace(
                                         to_json_file=lambda path: pathlib.Path(path).write_text("{}"))))
  spec = types.SimpleNamespace(export_dir=str(tmp_path / "ov"), model_dir=str(tmp_path), head="classifier")
  openvino_export.write_folder(spec, loaded, lambda tmp: pathlib.Path(tmp, "model.xml").write_text("ir"), {})
  child.kill()
  child.wait()
  assert sorted(os.listdir(tmp_path)) == sorted(["out", f"out.tmp-{live}-export", "out.tmp-20241130", "ov"])


def _export_binary(*args):
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["x", *args])
  export_saved_model.main([], fv)


def test_without_seq_length_the_export_packs_to_the_models_positions(tmp_path, tiny_model_dirs, caplog):
  """The documented export commands name no --seq_length: its default 128 was refused for a model of fewer positions
  (the demo's 32, the tiny model's 64); it is now 128 cut to max_position_embeddings (logged). An explicit value
  beyond them is still refused, naming the fix, before anything is written."""
  import tensorflow as tf
  positions = TINY["max_position_embeddings"]
  assert positions < 128
  model_dir = tiny_model_dirs["encoder"]
  with caplog.at_level(logging.INFO):
    _export_binary(f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'sm'}", "--head=encoder")
  info = tf.saved_model.load(str(tmp_path / "sm")).signatures["tokenization_info"]()
  assert int(info["seq_length"]) == positions
  assert f"seq_length 128 -> {positions}: the model has max_position_embeddings {positions}" in caplog.text
  with pytest.raises(ValueError, match=f"seq_length={positions + 1} exceeds the model's max_position_embeddings "
                     rf"\({positions}\): pass --seq_length={positions} or less"):
    _export_binary(f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'long'}", "--head=encoder",
                   f"--seq_length={positions + 1}")
  assert not (tmp_path / "long").exists()
  # A model in hand, too.
  assert export.AlbertServingModule(build_model("encoder", AlbertConfig(**TINY)), "encoder").seq_length == positions


@pytest.mark.parametrize("bad", ["model_dir", "export_dir"])
def test_glob_characters_in_a_checkpoint_path_are_refused_before_the_export(tmp_path, tiny_model_dirs, bad):
  """TensorFlow globs checkpoint prefixes: a native model directory named `v[1]` cannot be loaded, and a SavedModel
  written to `v[1]` cannot be loaded back (its variables are a checkpoint). Both are refused at start-up, naming the
  characters and the fix."""
  model_dir, export_dir = tiny_model_dirs["encoder"], tmp_path / "sm"
  if bad == "model_dir":
    model_dir = tmp_path / "enc [v1]"
    shutil.copytree(tiny_model_dirs["encoder"], model_dir)
  else:
    export_dir = tmp_path / "sm [v1]"
  with pytest.raises(ValueError, match=rf"--{bad}=.* contains the glob character\(s\) \[ \]: .*rename the folder"):
    _export_binary(f"--model_dir={model_dir}", f"--export_dir={export_dir}", "--head=encoder")
  assert not export_dir.exists()


@pytest.mark.parametrize("where", ["same", "parent", "symlink"])
def test_an_export_dir_holding_the_model_dir_is_refused_before_anything_is_replaced(tmp_path, where):
  """Review s51: `--export_dir=runs --overwrite` of `--model_dir=runs/mrpc` (or the model_dir itself) replaced the
  folder whole: the checkpoint and everything beside it were deleted, for every format."""
  from official_albert.serving import litert_export  # noqa: PLC0415
  model_dir = tmp_path / "runs" / "mrpc"
  model_dir.mkdir(parents=True)
  (model_dir / "model.ckpt.index").write_bytes(b"checkpoint")
  (tmp_path / "runs" / "precious.txt").write_text("keep", encoding="utf-8")
  export_dir = {"same": model_dir, "parent": tmp_path / "runs", "symlink": tmp_path / "link"}[where]
  if where == "symlink":
    export_dir.symlink_to(tmp_path / "runs", target_is_directory=True)
  for call in (export.export_from_model_dir, litert_export.export_litert, openvino_export.export_openvino):
    with pytest.raises(ValueError, match=r"export_dir=.* holds model_dir=.*replaces that folder whole"):
      call(str(model_dir), str(export_dir), "classifier", overwrite=True)
  assert (model_dir / "model.ckpt.index").read_bytes() == b"checkpoint"
  assert (tmp_path / "runs" / "precious.txt").exists()
  # (a sibling whose name starts like the model's is no parent: runs/mrpc-export is fine)
  ExportSpec(str(model_dir), str(tmp_path / "runs" / "mrpc-export"), "classifier").check()
