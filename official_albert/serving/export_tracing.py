"""The in-graph tokenizer traced once for all of a SavedModel's text signatures.

Why: a `tf.function` called inside several signatures is stored once in the SavedModel (one function of its library,
which each signature calls), where code called inline is traced, optimised at load and stored once per signature —
the tokenizer twice or three times (serve_text, serve_text_pair, embed). `AlbertServingModule.signatures` shares the
model's forward the same way (as `from_ids`); docs/serving.md "One model trace" has the numbers.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import tensorflow as tf

from official_albert.tokenization import AlbertPreprocessor


class SharedTokenizer:
  """An `AlbertPreprocessor`'s call (its own code: same packing) with its tokenizer replaced by a traced function."""

  def __init__(self, preprocessor: AlbertPreprocessor, tokenize: Callable):
    self.tokenizer, self.packer = tokenize, preprocessor.packer

  __call__ = AlbertPreprocessor.__call__


def shared_preprocessors(preprocessor: AlbertPreprocessor, embed_preprocessor: Optional[AlbertPreprocessor] = None
                         ) -> Tuple[SharedTokenizer, Optional[SharedTokenizer]]:
  """(preprocessor, embed_preprocessor) as `SharedTokenizer`s over one traced tokenizer (the embed one None when
  None). Both preprocessors are built from the same `FullTokenizer` (they differ only in their packer's length), so
  `preprocessor.tokenizer` tokenizes for both."""
  tokenize = tf.function(preprocessor.tokenizer.__call__, autograph=False,
                         input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
  shared = {id(p): SharedTokenizer(p, tokenize) for p in (preprocessor, embed_preprocessor) if p is not None}
  return shared[id(preprocessor)], shared.get(id(embed_preprocessor))
