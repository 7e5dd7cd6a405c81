"""torch's in-place functions of the top level: ``staged.exp_(x)`` is ``x.exp_()``, the
Tensor method itself (the same write into ``x``, version bump and autograd checks), not a
copy of it. ``staged/__init__.py`` re-exports them (``torch.relu_``, ``celu_``, ``selu_``,
``rrelu_``, ``threshold_`` are ``nn.functional``'s, re-exported there).
"""

from ..tensor import Tensor

abs_ = Tensor.abs_
acos_ = Tensor.acos_
acosh_ = Tensor.acosh_
addmv_ = Tensor.addmv_
arccos_ = Tensor.arccos_
arccosh_ = Tensor.arccosh_
arcsin_ = Tensor.arcsin_
arcsinh_ = Tensor.arcsinh_
arctan_ = Tensor.arctan_
arctanh_ = Tensor.arctanh_
asin_ = Tensor.asin_
asinh_ = Tensor.asinh_
atan_ = Tensor.atan_
atanh_ = Tensor.atanh_
ceil_ = Tensor.ceil_
clamp_ = Tensor.clamp_
clamp_max_ = Tensor.clamp_max_
clamp_min_ = Tensor.clamp_min_
clip_ = Tensor.clip_
conj_physical_ = Tensor.conj_physical_
cos_ = Tensor.cos_
cosh_ = Tensor.cosh_
deg2rad_ = Tensor.deg2rad_
detach_ = Tensor.detach_
erf_ = Tensor.erf_
erfc_ = Tensor.erfc_
exp2_ = Tensor.exp2_
exp_ = Tensor.exp_
expm1_ = Tensor.expm1_
fill_ = Tensor.fill_
fix_ = Tensor.fix_
floor_ = Tensor.floor_
frac_ = Tensor.frac_
gcd_ = Tensor.gcd_
i0_ = Tensor.i0_
index_put_ = Tensor.index_put_
lcm_ = Tensor.lcm_
ldexp_ = Tensor.ldexp_
log10_ = Tensor.log10_
log1p_ = Tensor.log1p_
log2_ = Tensor.log2_
log_ = Tensor.log_
logit_ = Tensor.logit_
nan_to_num_ = Tensor.nan_to_num_
neg_ = Tensor.neg_
negative_ = Tensor.negative_
rad2deg_ = Tensor.rad2deg_
reciprocal_ = Tensor.reciprocal_
resize_as_ = Tensor.resize_as_
round_ = Tensor.round_
rsqrt_ = Tensor.rsqrt_
sigmoid_ = Tensor.sigmoid_
sin_ = Tensor.sin_
sinc_ = Tensor.sinc_
sinh_ = Tensor.sinh_
sqrt_ = Tensor.sqrt_
square_ = Tensor.square_
tan_ = Tensor.tan_
tanh_ = Tensor.tanh_
trunc_ = Tensor.trunc_
xlogy_ = Tensor.xlogy_
zero_ = Tensor.zero_
