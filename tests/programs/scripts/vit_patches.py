# A small Vision Transformer in the manner of lucidrains/vit-pytorch and timm's ViT training
# recipe: patch embedding by a strided Conv2d, a learned CLS token and position embedding
# (trunc_normal_ init), pre-norm nn.TransformerEncoder layers with GELU, a LayerNorm'd CLS
# head, label-smoothed cross entropy, AdamW with timm's two parameter groups (no weight
# decay for biases, norms and the embeddings), OneCycleLR stepped per batch and
# clip_grad_norm_ (written for this suite; synthetic 16x16 images, one oriented bar per class,
# instead of CIFAR).
# compat: step=train_step loss="loss: (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

IMG, PATCH, CHANNELS, NUM_CLASSES = 16, 4, 3, 4
DIM, DEPTH, HEADS, MLP_DIM = 32, 2, 4, 64
EPOCHS, BATCH, LR, WD = 3, 64, 3e-3, 0.05


def make_images(n):
    """Noisy images with one bar per class: horizontal, vertical, diagonal, anti-diagonal."""
    y = torch.randint(0, NUM_CLASSES, (n,))
    x = 0.5 * torch.randn(n, CHANNELS, IMG, IMG)
    r = torch.arange(IMG)
    masks = torch.zeros(NUM_CLASSES, IMG, IMG)
    masks[0, IMG // 2, :] = 1
    masks[1, :, IMG // 2] = 1
    masks[2, r, r] = 1
    masks[3, r, IMG - 1 - r] = 1
    shift = torch.randint(-3, 4, (n,))
    for i in range(n):
        m = masks[y[i]]
        m = torch.roll(m, shifts=int(shift[i]), dims=0 if y[i] == 0 else 1)
        x[i] += m.unsqueeze(0) * torch.rand(CHANNELS, 1, 1).add(1.0)
    return x, y


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        num_patches = (IMG // PATCH) ** 2
        self.patch_embed = nn.Conv2d(CHANNELS, DIM, kernel_size=PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, DIM))
        self.pos_drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(
            d_model=DIM,
            nhead=HEADS,
            dim_feedforward=MLP_DIM,
            dropout=0.1,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=DEPTH, norm=nn.LayerNorm(DIM))
        self.head = nn.Linear(DIM, NUM_CLASSES)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, img):
        x = self.patch_embed(img).flatten(2).transpose(1, 2)  # B, N, D
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        x = self.pos_drop(x)
        x = self.encoder(x)
        return self.head(x[:, 0])


def param_groups_weight_decay(model, weight_decay, no_weight_decay_list=("pos_embed", "cls_token")):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": no_decay, "weight_decay": 0.0},
        {"params": decay, "weight_decay": weight_decay},
    ]


x_train, y_train = make_images(384)
x_val, y_val = make_images(128)
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH, shuffle=True)

model = ViT()
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.AdamW(param_groups_weight_decay(model, WD), lr=LR, betas=(0.9, 0.999))
scheduler = torch.optim.lr_scheduler.OneCycleLR(
    optimizer, max_lr=LR, epochs=EPOCHS, steps_per_epoch=len(loader), pct_start=0.3
)


def train_step(images, labels):
    optimizer.zero_grad()
    logits = model(images)
    loss = criterion(logits, labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss, logits


for epoch in range(EPOCHS):
    model.train()
    total, correct, seen = 0.0, 0, 0
    for images, labels in loader:
        loss, logits = train_step(images, labels)
        scheduler.step()
        total += loss.item() * images.size(0)
        correct += (logits.argmax(dim=-1) == labels).sum().item()
        seen += images.size(0)
    model.eval()
    with torch.no_grad():
        val_logits = model(x_val)
        val_loss = F.cross_entropy(val_logits, y_val)
        val_acc = (val_logits.argmax(-1) == y_val).float().mean()
    print(
        f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.6f} train loss: {total / seen:.6f} "
        f"acc {correct / seen:.3f} val_loss {val_loss.item():.6f} val_acc {val_acc.item():.3f}"
    )
print(f"final loss: {total / seen:.6f}")
