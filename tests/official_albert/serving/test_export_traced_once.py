"""A SavedModel holds the model's forward and the in-graph tokenizer once, whatever its number of signatures.

Every signature (from_ids, serve_examples, serve_text, serve_text_pair, embed) calls the one traced forward
(`from_ids`) and the one traced tokenizer: traced inline, each signature stored its own copy (4-5 forwards, 2-3
tokenizers), which cost export time, SavedModel size and load time (docs/serving.md "One model trace").
"""

import collections

import keras
from tensorflow.core.protobuf import saved_model_pb2

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.serving import export
from tests import tiny

MATRIX_PRODUCTS = {"MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"}


def _functions_doing(saved, is_op) -> list:
  """Names of the functions of the SavedModel's library with an op for which `is_op(op type)`."""
  ops = {fn.signature.name: collections.Counter(n.op for n in fn.node_def)
         for fn in saved.meta_graphs[0].graph_def.library.function}
  return sorted(name for name, counts in ops.items() if any(is_op(op) for op in counts))


def test_every_signature_calls_one_forward_and_one_tokenizer(tmp_path, spm_model_file):
  # An encoder with a sentence embedding cut shorter than seq_length: all five signatures, two preprocessors, and
  # two model calls in serve_text (the embedding's packing): the most places a forward or tokenizer was traced in.
  keras.utils.set_random_seed(0)
  model = AlbertEmbedder(encoder=build_model("encoder", AlbertConfig(**tiny.MODEL)))
  module = export.AlbertServingModule(model, "encoder", seq_length=16, spm_model_file=spm_model_file,
                                      embedding=EmbeddingSettings(max_seq_length=8))
  export.export_saved_model(module, str(tmp_path / "sm"))
  saved = saved_model_pb2.SavedModel()
  saved.ParseFromString((tmp_path / "sm" / "saved_model.pb").read_bytes())
  signatures = set(saved.meta_graphs[0].signature_def)
  assert {"from_ids", "serve_examples", "serve_text", "serve_text_pair", "embed"} <= signatures, signatures
  forwards = _functions_doing(saved, MATRIX_PRODUCTS.__contains__)
  assert len(forwards) == 1 and "from_ids" in forwards[0], forwards
  tokenizers = _functions_doing(saved, lambda op: "Sentencepiece" in op)
  assert len(tokenizers) == 1, tokenizers
