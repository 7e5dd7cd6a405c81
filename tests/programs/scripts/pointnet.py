# PointNet classification and segmentation of synthetic point clouds, in float64: input
# and feature transform nets (Conv1d of kernel 1, BatchNorm1d, max over points, an identity
# added to a regressed matrix, bmm), the orthogonality regulariser ||A A^T - I|| by
# torch.norm over dims (1, 2), dropout, log_softmax + nll_loss, Adam and StepLR, in the
# manner of fxia22/pointnet.pytorch (MIT; written for this suite). In float32 torch itself
# ends 3 % apart on one thread and two (batch-8 BatchNorm, Adam's sign-like first steps).
# compat: step=train_step loss="loss (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)


class TNet(nn.Module):
    """Regresses a k x k transform of the points (the identity plus a learned offset)."""

    def __init__(self, k):
        super().__init__()
        self.k = k
        self.convs = nn.ModuleList([nn.Conv1d(k, 32, 1), nn.Conv1d(32, 128, 1)])  # edit: size
        self.bns = nn.ModuleList([nn.BatchNorm1d(c) for c in (32, 128)])  # edit: size
        self.fc3 = nn.Linear(128, k * k)  # edit: size

    def forward(self, x):
        for conv, bn in zip(self.convs, self.bns):
            x = F.relu(bn(conv(x)))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 128)
        iden = torch.from_numpy(np.eye(self.k).flatten()).view(1, -1).repeat(x.size(0), 1)
        return (self.fc3(x) + iden).view(-1, self.k, self.k)


class PointNetFeat(nn.Module):
    def __init__(self, global_feat=True):
        super().__init__()
        self.stn, self.fstn = TNet(3), TNet(32)
        self.conv1, self.conv3 = nn.Conv1d(3, 32, 1), nn.Conv1d(32, 128, 1)  # edit: size
        self.bn1, self.bn3 = nn.BatchNorm1d(32), nn.BatchNorm1d(128)  # edit: size
        self.global_feat = global_feat

    def forward(self, x):
        n_pts = x.size(2)
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        trans_feat = self.fstn(x)
        x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        pointfeat = x
        x = self.bn3(self.conv3(x))  # edit: size
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 128)
        if self.global_feat:
            return x, trans, trans_feat
        return torch.cat([x.view(-1, 128, 1).repeat(1, 1, n_pts), pointfeat], 1), trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.feat = PointNetFeat(global_feat=True)
        self.fc2, self.fc3 = nn.Linear(128, 32), nn.Linear(32, k)  # edit: size
        self.dropout = nn.Dropout(p=0.3)
        self.bn2 = nn.BatchNorm1d(32)  # edit: size

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))  # edit: size
        return F.log_softmax(self.fc3(x), dim=1), trans, trans_feat


class PointNetSeg(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.feat = PointNetFeat(global_feat=False)
        self.conv1, self.conv3 = nn.Conv1d(160, 32, 1), nn.Conv1d(32, k, 1)  # edit: size
        self.bn1 = nn.BatchNorm1d(32)  # edit: size

    def forward(self, x):
        b, _, n = x.size()
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.conv3(x).transpose(2, 1).contiguous()  # edit: size
        return F.log_softmax(x.view(-1, self.k), dim=-1).view(b, n, self.k), trans, trans_feat


def feature_transform_regularizer(trans):
    eye = torch.eye(trans.size(1))[None, :, :]
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))


B, N = 8, 64
pts = torch.rand(64, N, 3) * 2 - 1
labels = (pts[:, :, 0].mean(1) > 0).long() + 2 * (pts[:, :, 1].mean(1) > 0).long()
seg = (pts[:, :, 2] > 0).long()
cls, segm = PointNetCls(k=4), PointNetSeg(k=2)
opt = torch.optim.Adam(
    list(cls.parameters()) + list(segm.parameters()), lr=1e-3, betas=(0.9, 0.999)
)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)


def train_step(points, target, seg_target):
    opt.zero_grad()
    pred, _, trans_feat = cls(points)
    loss = F.nll_loss(pred, target) + feature_transform_regularizer(trans_feat) * 0.001
    spred, _, trans_feat = segm(points)
    loss = loss + F.nll_loss(spred.view(-1, 2), seg_target.view(-1))
    loss = loss + feature_transform_regularizer(trans_feat) * 0.001
    loss.backward()
    opt.step()
    return loss


for epoch in range(2):
    cls.train()
    segm.train()
    for i in range(0, 64, B):
        loss = train_step(pts[i : i + B].transpose(2, 1), labels[i : i + B], seg[i : i + B])
    sched.step()
    print(f"epoch {epoch} loss {loss.item():.10f} lr {sched.get_last_lr()[0]}")
cls.eval()
segm.eval()
with torch.no_grad():
    pred, _, _ = cls(pts.transpose(2, 1))
    spred, _, _ = segm(pts.transpose(2, 1))
    acc = pred.data.max(1)[1].eq(labels.data).cpu().sum().item() / 64.0
    seg_acc = spred.argmax(2).eq(seg).double().mean().item()
print(f"test accuracy {acc} segmentation accuracy {seg_acc:.6f}")
