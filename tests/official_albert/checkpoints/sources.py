"""One random pretrainer written in each format a pretrained model directory may hold (the tests of what loads it)."""

import keras
import numpy as np

from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints import hf
from official_albert.checkpoints import native
from official_albert.checkpoints import tf1


def pretrainer_in_every_format(root, config_fields, seed):
  """Builds an `AlbertPretrainer(AlbertConfig(**config_fields))` with `seed` and writes it as `root/native`,
  `root/hf` and `root/tf1` (the original release's layout); returns the model, whose weights the tests compare."""
  keras.utils.set_random_seed(seed)
  model = AlbertPretrainer(AlbertConfig(**config_fields))
  model({"input_word_ids": np.ones([1, 8], np.int32), "input_mask": np.ones([1, 8], np.int32),
         "input_type_ids": np.zeros([1, 8], np.int32), "masked_lm_positions": np.zeros([1, 2], np.int32)})
  native.save_pretrained(model, str(root / "native"))
  hf.write_hf(model, "pretrainer", str(root / "hf"))
  tf1.write_tf1(model, str(root / "tf1"))
  return model
