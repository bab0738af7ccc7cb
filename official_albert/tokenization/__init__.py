"""Tokenization: the Python `FullTokenizer` (tokenizer.py) and the in-graph tokenizer and packer (in_graph.py).

Both give the same ids. The Python side never imports TensorFlow (data-prep and Beam workers need only
`FullTokenizer`); the in-graph classes `AlbertTextTokenizer`, `AlbertPacker` and `AlbertPreprocessor` are loaded from
`in_graph` on first access as attributes of this package.
"""

from official_albert.tokenization.tokenizer import check_special_tokens
from official_albert.tokenization.tokenizer import check_spm_model_file
from official_albert.tokenization.tokenizer import CLS
from official_albert.tokenization.tokenizer import encode_ids
from official_albert.tokenization.tokenizer import encode_pieces
from official_albert.tokenization.tokenizer import FullTokenizer
from official_albert.tokenization.tokenizer import load_sp_model
from official_albert.tokenization.tokenizer import lower_per_char
from official_albert.tokenization.tokenizer import LSTRIP_TOKENS
from official_albert.tokenization.tokenizer import MASK
from official_albert.tokenization.tokenizer import MODES
from official_albert.tokenization.tokenizer import pack_ids
from official_albert.tokenization.tokenizer import PAD
from official_albert.tokenization.tokenizer import preprocess_text
from official_albert.tokenization.tokenizer import SEP
from official_albert.tokenization.tokenizer import SPECIAL_TOKEN_IDS
from official_albert.tokenization.tokenizer import SPECIAL_TOKENS
from official_albert.tokenization.tokenizer import SPIECE_UNDERLINE
from official_albert.tokenization.tokenizer import truncate_seq_pair
from official_albert.tokenization.tokenizer import truncated_lengths
from official_albert.tokenization.tokenizer import UNK

_IN_GRAPH_EXPORTS = frozenset({"AlbertTextTokenizer", "AlbertPacker", "AlbertPreprocessor"})


def __getattr__(name):
  # The in-graph classes subclass tf.Module: importing them imports TensorFlow, so only on first use.
  if name in _IN_GRAPH_EXPORTS:
    from official_albert.tokenization import in_graph  # noqa: PLC0415 (TF-free module)
    return getattr(in_graph, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | _IN_GRAPH_EXPORTS)
