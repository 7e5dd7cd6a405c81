import sys

from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,  # noqa: F401
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    RReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .channelshuffle import ChannelShuffle  # noqa: F401
from .container import (  # noqa: F401
    Container,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .conv import (  # noqa: F401
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .dropout import (  # noqa: F401
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from .fold import Fold, Unfold  # noqa: F401
from .instancenorm import (  # noqa: F401
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)
from ..parameter import Buffer  # noqa: F401
from .lazy import UninitializedBuffer, UninitializedParameter  # noqa: F401
from .linear import Bilinear, Flatten, Identity, LazyLinear, Linear, Unflatten  # noqa: F401
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,  # noqa: F401
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .normalization import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    CrossMapLRN2d,
    GroupNorm,
    LayerNorm,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LocalResponseNorm,
    RMSNorm,
)
from .sync_batch_norm import SyncBatchNorm  # noqa: F401
from .padding import (  # noqa: F401
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from .pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .sparse import Embedding, EmbeddingBag  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,  # noqa: F401
    TransformerEncoder,
    TransformerEncoderLayer,
)
from . import batchnorm, flatten  # noqa: F401,E402  (torch's module paths: Note [module paths])
from .. import module  # noqa: F401,E402  (nn.modules.module.register_module_* as in PyTorch)
from ..module import Module  # noqa: F401,E402  (torch.nn.modules.Module: peft imports it so)

# Note [module paths]: torch.save of a whole model pickles each layer's class by its torch
# path (torch.nn.modules.linear.Linear, torch.nn.modules.batchnorm.BatchNorm1d, ...); the
# same dotted paths under staged.nn.modules name staged's classes (batchnorm.py and
# flatten.py re-export them where staged keeps them elsewhere), so staged.load finds them.
sys.modules.setdefault(__name__ + ".module", module)
