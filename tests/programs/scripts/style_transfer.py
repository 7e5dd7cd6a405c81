# Neural style transfer in the manner of PyTorch's neural_style_tutorial (Gatys et al.):
# a frozen feature extractor (requires_grad_(False), eval()), a Normalization module,
# ContentLoss and StyleLoss modules (gram matrices by view and mm) inserted into a new
# nn.Sequential after chosen conv layers, the model trimmed after the last loss, and the
# input image itself optimized by LBFGS with a closure that clamps it in place under
# no_grad (written for this suite; a small randomly initialised conv stack stands in for
# VGG19's features and random 32x32 images for the photographs; the step compiled is the
# closure LBFGS calls, a module-level function here so it can be named). LBFGS as the
# tutorial makes it (no line search) for 9 evaluations in steps of 3: this loss is
# chaotic in its input (Gram matrices at a style weight of 10^4), and a change of 1e-7 in
# the second evaluation's loss moved the final loss by 2e-5 after 9 evaluations, 3e-4
# after 12, 5 % after 40 (the tutorial's 300 steps), and by 15 % after 6 with the
# strong-Wolfe line search, which extrapolates from nearly equal slopes.
# compat: step=closure loss="loss: (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)
device = torch.device("cpu")
torch.set_default_device(device)

imsize = 32


def image_loader(kind):
    # stands in for PIL + transforms.ToTensor(): a 1x3xHxW image in [0, 1]
    if kind == "style":
        xs = torch.linspace(0, 6.28, imsize)
        stripes = 0.5 + 0.5 * torch.sin(3 * xs[None, :] + 2 * xs[:, None])
        img = torch.stack([stripes, stripes.flip(0), 1 - stripes]) * 0.8 + 0.2 * torch.rand(
            3, imsize, imsize
        )
    else:
        img = F.interpolate(torch.rand(1, 3, 8, 8), size=(imsize, imsize), mode="bilinear")[0]
    return img.unsqueeze(0).to(device, torch.float)


style_img = image_loader("style")
content_img = image_loader("content")
assert style_img.size() == content_img.size(), (
    "we need to import style and content images of the same size"
)


class ContentLoss(nn.Module):
    def __init__(self, target):
        super(ContentLoss, self).__init__()
        # we 'detach' the target content from the tree used to dynamically compute the
        # gradient: this is a stated value, not a variable
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


def gram_matrix(input):
    a, b, c, d = input.size()  # a=batch size(=1), b=number of feature maps, (c,d)=dimensions
    features = input.view(a * b, c * d)
    G = torch.mm(features, features.t())
    return G.div(a * b * c * d)


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super(StyleLoss, self).__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, input):
        G = gram_matrix(input)
        self.loss = F.mse_loss(G, self.target)
        return input


# stands in for models.vgg19(weights=...).features.eval(): VGG's layer pattern, small
cnn = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.ReLU(inplace=True),
    nn.Conv2d(8, 8, 3, padding=1),
    nn.ReLU(inplace=True),
    nn.MaxPool2d(2, 2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.ReLU(inplace=True),
    nn.Conv2d(16, 16, 3, padding=1),
    nn.ReLU(inplace=True),
    nn.MaxPool2d(2, 2),
    nn.Conv2d(16, 16, 3, padding=1),
    nn.ReLU(inplace=True),
).eval()
cnn.requires_grad_(False)

cnn_normalization_mean = torch.tensor([0.485, 0.456, 0.406])
cnn_normalization_std = torch.tensor([0.229, 0.224, 0.225])


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super(Normalization, self).__init__()
        # .view the mean and std to make them [C x 1 x 1] so that they can directly work
        # with image Tensor of shape [B x C x H x W]
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def forward(self, img):
        return (img - self.mean) / self.std


content_layers_default = ["conv_4"]
style_layers_default = ["conv_1", "conv_2", "conv_3", "conv_4", "conv_5"]


def get_style_model_and_losses(
    cnn,
    normalization_mean,
    normalization_std,
    style_img,
    content_img,
    content_layers=content_layers_default,
    style_layers=style_layers_default,
):
    normalization = Normalization(normalization_mean, normalization_std)
    content_losses = []
    style_losses = []
    model = nn.Sequential(normalization)

    i = 0  # increment every time we see a conv
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = "conv_{}".format(i)
        elif isinstance(layer, nn.ReLU):
            name = "relu_{}".format(i)
            # the in-place version doesn't play very nicely with the ContentLoss and
            # StyleLoss we insert below, so we replace it with an out-of-place one
            layer = nn.ReLU(inplace=False)
        elif isinstance(layer, nn.MaxPool2d):
            name = "pool_{}".format(i)
        elif isinstance(layer, nn.BatchNorm2d):
            name = "bn_{}".format(i)
        else:
            raise RuntimeError("Unrecognized layer: {}".format(layer.__class__.__name__))

        model.add_module(name, layer)

        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module("content_loss_{}".format(i), content_loss)
            content_losses.append(content_loss)

        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module("style_loss_{}".format(i), style_loss)
            style_losses.append(style_loss)

    # now we trim off the layers after the last content and style losses
    for i in range(len(model) - 1, -1, -1):
        if isinstance(model[i], ContentLoss) or isinstance(model[i], StyleLoss):
            break

    model = model[: (i + 1)]
    return model, style_losses, content_losses


def get_input_optimizer(input_img):
    # this line to show that input is a parameter that requires a gradient
    optimizer = optim.LBFGS([input_img], max_iter=3)
    return optimizer


input_img = content_img.clone()
num_steps, style_weight, content_weight = 6, 10000, 1

print("Building the style transfer model..")
model, style_losses, content_losses = get_style_model_and_losses(
    cnn, cnn_normalization_mean, cnn_normalization_std, style_img, content_img
)
# we want to optimize the input and not the model parameters so we update all the
# requires_grad fields accordingly
input_img.requires_grad_(True)
model.eval()
model.requires_grad_(False)
optimizer = get_input_optimizer(input_img)
run = [0]


def closure():
    # correct the values of updated input image
    with torch.no_grad():
        input_img.clamp_(0, 1)

    optimizer.zero_grad()
    model(input_img)
    style_score = 0
    content_score = 0

    for sl in style_losses:
        style_score += sl.loss
    for cl in content_losses:
        content_score += cl.loss

    style_score *= style_weight
    content_score *= content_weight

    loss = style_score + content_score
    loss.backward()

    run[0] += 1
    if run[0] % 10 == 0:
        print("run {}:".format(run))
        print(
            "Style Loss : {:4f} Content Loss: {:4f}".format(
                style_score.item(), content_score.item()
            )
        )
        print()

    return style_score + content_score


print("Optimizing..")
while run[0] <= num_steps:
    optimizer.step(closure)

# a last correction...
with torch.no_grad():
    input_img.clamp_(0, 1)

with torch.no_grad():
    model(input_img)
    final = (
        sum(sl.loss for sl in style_losses) * style_weight
        + sum(cl.loss for cl in content_losses) * content_weight
    )
print(
    "final loss: {:.8f} after {} evaluations, image mean {:.6f}".format(
        final.item(), run[0], input_img.mean().item()
    )
)
