"""Keras layers of ALBERT: embeddings, attention and FFN sub-blocks, and output heads."""

from official_albert.modeling.layers.activations import gelu_new
from official_albert.modeling.layers.activations import get_activation
from official_albert.modeling.layers.attention import AlbertAttention
from official_albert.modeling.layers.attention import attention_bias_from_mask
from official_albert.modeling.layers.dropout import AlbertDropout
from official_albert.modeling.layers.embeddings import AlbertEmbeddings
from official_albert.modeling.layers.embeddings import layer_norm
from official_albert.modeling.layers.feedforward import AlbertFeedForward
from official_albert.modeling.layers.heads import gather_positions
from official_albert.modeling.layers.heads import MaskedLMHead
from official_albert.modeling.layers.heads import SquadV2Head
from official_albert.modeling.layers.heads import TransposedLogits
