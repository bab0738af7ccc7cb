"""Tokenization: the Python `FullTokenizer` (tokenizer.py) and the in-graph tokenizer and packer (in_graph.py).

Both give the same ids. The Python side never imports TensorFlow (data-prep and Beam workers need only
`FullTokenizer`); the in-graph classes `AlbertTextTokenizer`, `AlbertPacker` and `AlbertPreprocessor` are loaded from
`in_graph` on first access as attributes of this package.
"""

from official_albert.tokenization.tokenizer import (CLS, LSTRIP_TOKENS, MASK, MODES, PAD, SEP, SPECIAL_TOKEN_IDS,
                                                    SPECIAL_TOKENS, SPIECE_UNDERLINE, UNK, FullTokenizer,
                                                    check_special_tokens, check_spm_model_file, encode_ids,
                                                    encode_pieces, load_sp_model, lower_per_char, pack_ids,
                                                    preprocess_text, truncate_seq_pair, truncated_lengths)

_IN_GRAPH_EXPORTS = frozenset({"AlbertTextTokenizer", "AlbertPacker", "AlbertPreprocessor"})


def __getattr__(name):
  # The in-graph classes subclass tf.Module: importing them imports TensorFlow, so only on first use.
  if name in _IN_GRAPH_EXPORTS:
    from official_albert.tokenization import in_graph  # pylint: disable=g-import-not-at-top
    return getattr(in_graph, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | _IN_GRAPH_EXPORTS)
