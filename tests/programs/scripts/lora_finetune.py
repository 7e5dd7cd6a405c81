# LoRA fine-tuning in the manner of microsoft/LoRA's loralib (lora.Linear, mark_only_lora_as_
# trainable, lora_state_dict) and HF PEFT: a small attention + MLP classifier is first
# "pretrained" for a few steps on one task, its base weights are frozen with
# requires_grad_(False), LoRA A/B adapters (A kaiming-uniform, B zeros, scaling alpha/r,
# dropout on the adapter input) are trained with AdamW in two parameter groups (weight
# decay on A/B, none on the head's bias), the state dict is filtered to the lora_ entries,
# and finally the adapters are merged into the base weights (W += B @ A * scaling) and the
# merged model's outputs are checked against the adapted ones.
# compat: step=train_step loss="loss (\S+)"
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALayer:
    def __init__(self, r, lora_alpha, lora_dropout, merge_weights):
        self.r = r
        self.lora_alpha = lora_alpha
        # Optional dropout
        if lora_dropout > 0.0:
            self.lora_dropout = nn.Dropout(p=lora_dropout)
        else:
            self.lora_dropout = lambda x: x
        # Mark the weight as unmerged
        self.merged = False
        self.merge_weights = merge_weights


class LoRALinear(nn.Linear, LoRALayer):
    """loralib's lora.Linear: a frozen Linear plus a low-rank update B @ A, merged into the
    weight in eval mode and taken out again in train mode (merge_weights)."""

    def __init__(
        self,
        in_features,
        out_features,
        r=0,
        lora_alpha=1,
        lora_dropout=0.0,
        fan_in_fan_out=False,
        merge_weights=True,
        **kwargs,
    ):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(
            self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, merge_weights=merge_weights
        )
        self.fan_in_fan_out = fan_in_fan_out
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
        self.reset_parameters()
        if fan_in_fan_out:
            self.weight.data = self.weight.data.transpose(0, 1)

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, "lora_A"):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode: bool = True):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w

        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0:
                    self.weight.data -= T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0:
                    self.weight.data += T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = True
        return self

    def forward(self, x):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w

        if self.r > 0 and not self.merged:
            result = F.linear(x, T(self.weight), bias=self.bias)
            result += (
                self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)
            ) * self.scaling
            return result
        else:
            return F.linear(x, T(self.weight), bias=self.bias)


class Block(nn.Module):
    def __init__(self, d, n_head, r=0, alpha=1, p=0.0):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = LoRALinear(d, 3 * d, r=r, lora_alpha=alpha, lora_dropout=p, fan_in_fan_out=True)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = LoRALinear(d, 4 * d, r=r, lora_alpha=alpha, lora_dropout=p)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        y = att.softmax(dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Classifier(nn.Module):
    def __init__(self, vocab=16, d=32, n_head=4, n_layer=2, n_cls=4, r=0, alpha=1, p=0.0):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, n_head, r, alpha, p) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_cls)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x).mean(1))


def mark_only_lora_as_trainable(model, bias="none"):
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad = False


def lora_state_dict(model, bias="none"):
    my_state_dict = model.state_dict()
    return {k: my_state_dict[k] for k in my_state_dict if "lora_" in k}


torch.manual_seed(0)
# pretraining task: the class is the most frequent token mod 4; fine-tuning: the first token's
pre_x = torch.randint(0, 16, (64, 8))
pre_y = pre_x.mode(dim=1).values % 4
ft_x = torch.randint(0, 16, (64, 8))
ft_y = ft_x[:, 0] // 4

# 1. pretrain the base model (all weights trainable)
base = Classifier()
opt = torch.optim.Adam(base.parameters(), lr=3e-3)
for _it in range(15):
    opt.zero_grad()
    loss = F.cross_entropy(base(pre_x), pre_y)
    loss.backward()
    opt.step()
print(f"pretrain loss {loss.item():.6f}")

# 2. a LoRA model from the pretrained weights (loralib: load with strict=False)
model = Classifier(r=4, alpha=8, p=0.1)
missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
print("missing", len(missing), "unexpected", len(unexpected))
mark_only_lora_as_trainable(model)
model.head.requires_grad_(True)  # a new task: the head trains too (PEFT's modules_to_save)
trainable = [n for n, p in model.named_parameters() if p.requires_grad]
print("trainable", trainable)
n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
n_all = sum(p.numel() for p in model.parameters())
print(f"trainable params: {n_train} || all params: {n_all} || {100 * n_train / n_all:.2f}%")

decay = [p for n, p in model.named_parameters() if p.requires_grad and not n.endswith("bias")]
no_decay = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("bias")]
optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
    lr=1e-2,
)
frozen_before = model.blocks[0].qkv.weight.clone()


def train_step(x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


model.train()
for epoch in range(25):
    for i in range(0, 64, 16):
        loss = train_step(ft_x[i : i + 16], ft_y[i : i + 16])
    if epoch % 5 == 4:
        print(f"epoch {epoch} loss {loss.item():.6f}")

print("frozen weight unchanged:", torch.equal(frozen_before, model.blocks[0].qkv.weight))
print("frozen grad:", model.blocks[0].qkv.weight.grad)
sd = lora_state_dict(model)
print("lora keys", sorted(sd))
print(f"lora_B norm {model.blocks[1].fc1.lora_B.norm().item():.6f}")

# 3. evaluate unmerged, then let loralib's eval() merge the adapters, and compare
lora_layers = [m for m in model.modules() if isinstance(m, LoRALinear) and m.r > 0]
for m in lora_layers:
    m.merge_weights = False
model.eval()
with torch.no_grad():
    adapted = model(ft_x)
    acc = (adapted.argmax(1) == ft_y).float().mean().item()
print("merged after eval without merge_weights:", [m.merged for m in lora_layers])
model.train()
for m in lora_layers:
    m.merge_weights = True
model.eval()  # merges: W += T(B @ A) * scaling
print("merged after eval:", [m.merged for m in lora_layers])
with torch.no_grad():
    merged = model(ft_x)
print(f"accuracy {acc:.4f}")
print(
    "merged equals adapted:",
    torch.allclose(merged, adapted, atol=1e-5),
    f"max diff {(merged - adapted).abs().max().item():.3e}",
)
print("weight moved by merge:", not torch.allclose(frozen_before, model.blocks[0].qkv.weight))
model.train()  # unmerges
print("merged after train:", [m.merged for m in lora_layers])
print(
    "unmerged weight restored:",
    torch.allclose(frozen_before, model.blocks[0].qkv.weight, atol=1e-6),
)
# a fresh model from the pretrained weights + the saved LoRA state dict
fresh = Classifier(r=4, alpha=8, p=0.1)
fresh.load_state_dict(base.state_dict(), strict=False)
fresh.load_state_dict(sd, strict=False)
fresh.head.load_state_dict(model.head.state_dict())
fresh.eval()
with torch.no_grad():
    print("reloaded equals adapted:", torch.allclose(fresh(ft_x), adapted, atol=1e-5))
print(f"final loss {loss.item():.6f}")
