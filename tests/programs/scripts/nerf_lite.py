# A tiny NeRF in the manner of bmild's "tiny_nerf" notebook and yenchenlin/nerf-pytorch
# (run_nerf.py / run_nerf_helpers.py; written for this suite, synthetic scene instead of the
# lego images): rays from get_rays (meshgrid, pinhole K, c2w), positional encoding with
# sin/cos at powers of 2, an MLP with a skip connection giving rgb+sigma, stratified
# samples along each ray (torch.linspace plus torch.rand jitter within each bin),
# raw2outputs' volume rendering (dists with a 1e10 last bin, raw noise, 1 - exp(-relu(sigma)
# * dist), an exclusive cumprod of transmittance by cat of ones), img2mse / mse2psnr, and
# Adam with nerf-pytorch's exponential lr decay written into the param groups. The target
# pixels are an analytic coloured sphere rendered with the same volume renderer. A test view
# is rendered in chunks by a torch.compile'd render function (no grad).
# compat: step=train_step loss="final loss: (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

H = W = 8
focal = 10.0
near, far = 2.0, 6.0
N_samples = 16
N_rand = 64
L_embed = 6
lrate, lrate_decay = 5e-3, 250

img2mse = lambda x, y: torch.mean((x - y) ** 2)
mse2psnr = lambda x: -10.0 * torch.log(x) / torch.log(torch.Tensor([10.0]))


class Embedder:
    """nerf-pytorch's Embedder: include_input, log-sampled frequency bands."""

    def __init__(self, multires):
        embed_fns = [lambda x: x]
        freq_bands = 2.0 ** torch.linspace(0.0, multires - 1, steps=multires)
        for freq in freq_bands:
            for p_fn in [torch.sin, torch.cos]:
                embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
        self.embed_fns = embed_fns
        self.out_dim = 3 + 3 * 2 * multires

    def embed(self, inputs):
        return torch.cat([fn(inputs) for fn in self.embed_fns], -1)


class NeRF(nn.Module):
    def __init__(self, D=4, W=64, input_ch=39, skips=(2,)):
        super().__init__()
        self.skips = skips
        self.pts_linears = nn.ModuleList(
            [nn.Linear(input_ch, W)]
            + [nn.Linear(W + input_ch, W) if i in skips else nn.Linear(W, W) for i in range(1, D)]
        )
        self.output_linear = nn.Linear(W, 4)

    def forward(self, x):
        h = x
        for i, l in enumerate(self.pts_linears):
            if i in self.skips:
                h = torch.cat([x, h], -1)
            h = F.relu(l(h))
        return self.output_linear(h)


def get_rays(H, W, K, c2w):
    i, j = torch.meshgrid(torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H))
    i = i.t()
    j = j.t()
    dirs = torch.stack([(i - K[0][2]) / K[0][0], -(j - K[1][2]) / K[1][1], -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    return rays_o, rays_d


def pose_spherical(theta, phi, radius):
    th, ph = np.deg2rad(theta), np.deg2rad(phi)
    c2w = np.eye(4)
    c2w[2, 3] = radius
    rot_phi = np.array(
        [
            [1, 0, 0, 0],
            [0, np.cos(ph), -np.sin(ph), 0],
            [0, np.sin(ph), np.cos(ph), 0],
            [0, 0, 0, 1],
        ]
    )
    rot_theta = np.array(
        [
            [np.cos(th), 0, -np.sin(th), 0],
            [0, 1, 0, 0],
            [np.sin(th), 0, np.cos(th), 0],
            [0, 0, 0, 1],
        ]
    )
    c2w = rot_theta @ rot_phi @ c2w
    return torch.Tensor(np.array([[-1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]) @ c2w)


def raw2outputs(raw, z_vals, rays_d, raw_noise_std=0.0):
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1.0 - torch.exp(-act_fn(raw) * dists)
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    noise = 0.0
    if raw_noise_std > 0.0:
        noise = torch.randn(raw[..., 3].shape) * raw_noise_std
    alpha = raw2alpha(raw[..., 3] + noise, dists)
    weights = (
        alpha
        * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)[
            :, :-1
        ]
    )
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    acc_map = torch.sum(weights, -1)
    return rgb_map, depth_map, acc_map, weights


def sample_points(rays_o, rays_d, n_samples, perturb):
    N_rays = rays_o.shape[0]
    t_vals = torch.linspace(0.0, 1.0, steps=n_samples)
    z_vals = near * (1.0 - t_vals) + far * (t_vals)
    z_vals = z_vals.expand([N_rays, n_samples])
    if perturb > 0.0:
        mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        t_rand = torch.rand(z_vals.shape)
        z_vals = lower + (upper - lower) * t_rand
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    return pts, z_vals


def true_field(pts):
    """An analytic scene: a soft sphere of radius 1 whose colour follows position."""
    r = pts.norm(dim=-1)
    sigma = 20.0 * torch.sigmoid(10.0 * (1.0 - r))
    rgb = 0.5 + 0.5 * torch.tanh(2.0 * pts)
    logit = torch.log(rgb / (1 - rgb))
    return torch.cat([logit, sigma[..., None]], -1)


embedder = Embedder(L_embed)
model = NeRF(input_ch=embedder.out_dim)
optimizer = torch.optim.Adam(model.parameters(), lr=lrate, betas=(0.9, 0.999))

K = np.array([[focal, 0, 0.5 * W], [0, focal, 0.5 * H], [0, 0, 1]])
poses = [pose_spherical(th, -30.0, 4.0) for th in (0.0, 90.0, 180.0, 270.0)]
test_pose = pose_spherical(45.0, -30.0, 4.0)

# the training set: every ray of the four views, with its target colour
with torch.no_grad():
    all_o, all_d, all_rgb = [], [], []
    for c2w in poses:
        o, d = get_rays(H, W, K, c2w)
        o, d = o.reshape(-1, 3), d.reshape(-1, 3)
        pts, z = sample_points(o, d, 64, 0.0)
        rgb, _, _, _ = raw2outputs(true_field(pts), z, d)
        all_o.append(o)
        all_d.append(d)
        all_rgb.append(rgb)
    rays_o_all, rays_d_all, target_all = torch.cat(all_o), torch.cat(all_d), torch.cat(all_rgb)


def run_network(pts):
    inputs_flat = torch.reshape(pts, [-1, pts.shape[-1]])
    embedded = embedder.embed(inputs_flat)
    outputs_flat = model(embedded)
    return torch.reshape(outputs_flat, list(pts.shape[:-1]) + [outputs_flat.shape[-1]])


def train_step(rays_o, rays_d, target_s):
    pts, z_vals = sample_points(rays_o, rays_d, N_samples, perturb=1.0)
    raw = run_network(pts)
    rgb, depth, acc, _ = raw2outputs(raw, z_vals, rays_d, raw_noise_std=0.1)
    optimizer.zero_grad()
    img_loss = img2mse(rgb, target_s)
    loss = img_loss
    psnr = mse2psnr(img_loss)
    loss.backward()
    optimizer.step()
    return loss, psnr


def render_full(rays_o, rays_d):
    pts, z_vals = sample_points(rays_o, rays_d, N_samples, perturb=0.0)
    raw = run_network(pts)
    rgb, depth, acc, _ = raw2outputs(raw, z_vals, rays_d)
    return rgb, depth, acc


render_compiled = torch.compile(render_full)

N_iters = 40
for i in range(N_iters):
    select_inds = torch.randperm(rays_o_all.shape[0])[:N_rand]
    loss, psnr = train_step(
        rays_o_all[select_inds], rays_d_all[select_inds], target_all[select_inds]
    )
    decay_rate = 0.1
    decay_steps = lrate_decay
    new_lrate = lrate * (decay_rate ** ((i + 1) / decay_steps))
    for param_group in optimizer.param_groups:
        param_group["lr"] = new_lrate
    if i % 10 == 0 or i == N_iters - 1:
        print(f"[TRAIN] Iter: {i} Loss: {loss.item():.6f}  PSNR: {psnr.item():.4f}")

with torch.no_grad():
    o, d = get_rays(H, W, K, test_pose)
    o, d = o.reshape(-1, 3), d.reshape(-1, 3)
    pts, z = sample_points(o, d, 64, 0.0)
    gt, _, _, _ = raw2outputs(true_field(pts), z, d)
    chunk = 24  # chunks of 24, 24, 16 rays: the last chunk is smaller
    rgbs, depths = [], []
    for k in range(0, o.shape[0], chunk):
        rgb, depth, acc = render_compiled(o[k : k + chunk], d[k : k + chunk])
        rgbs.append(rgb)
        depths.append(depth)
    rgb = torch.cat(rgbs)
    depth = torch.cat(depths)
    test_mse = img2mse(rgb, gt)
    print(
        f"[TEST] mse: {test_mse.item():.6f} psnr: {mse2psnr(test_mse).item():.4f} mean depth: {depth.mean().item():.4f}"
    )
print(f"final loss: {loss.item():.8f}")
