"""A style-transfer network trained as pytorch/examples' ``fast_neural_style`` trains one:
convolutions behind ``ReflectionPad2d``, ``InstanceNorm2d(affine=True)``, residual
blocks, upsampling with ``F.interpolate(mode="nearest", scale_factor=2)``; the batch
normalised with ``batch.div_(255.0)`` and ``batch.new_tensor([...]).view(-1, 1, 1)``;
a content loss (``MSELoss``) plus a style loss between Gram matrices made with
``features.bmm(features.transpose(1, 2)) / (ch * h * w)``; ``Adam``.

The "loss network" is a fixed random convolution (there is no VGG here).  Prints one
``RESULT {json}`` line with the output's shape and range, a Gram matrix and the
features it came from, and the losses.
"""

import json

import kernbench.torch as torch
from kernbench.torch.optim import Adam


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x_in))


class TransformerNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = ConvLayer(3, 4, kernel_size=5, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(4, affine=True)
        self.conv2 = ConvLayer(4, 8, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(8, affine=True)
        self.res1 = ResidualBlock(8)
        self.deconv1 = UpsampleConvLayer(8, 4, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(4, affine=True)
        self.deconv3 = ConvLayer(4, 3, kernel_size=5, stride=1)
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res1(y)
        y = self.relu(self.in4(self.deconv1(y)))
        return self.deconv3(y)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


torch.manual_seed(42)
loss_net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU())
for p in loss_net.parameters():
    p.requires_grad_(False)
style = torch.rand(1, 3, 8, 8) * 255
gram_style = gram_matrix(loss_net(normalize_batch(style.clone())))
transformer = TransformerNet()
optimizer = Adam(transformer.parameters(), 1e-3)
mse_loss = torch.nn.MSELoss()
content_weight, style_weight = 1e5, 1e10
images = torch.rand(4, 3, 8, 8) * 255
history = []
for step in range(3):
    x = images[2 * (step % 2) : 2 * (step % 2) + 2].clone()
    n_batch = len(x)
    optimizer.zero_grad()
    y = transformer(x)
    y = normalize_batch(y)
    x = normalize_batch(x)
    features_y, features_x = loss_net(y), loss_net(x)
    content_loss = content_weight * mse_loss(features_y, features_x)
    gram_y = gram_matrix(features_y)
    style_loss = style_weight * mse_loss(gram_y, gram_style[:n_batch, :, :].expand_as(gram_y))
    total_loss = content_loss + style_loss
    total_loss.backward()
    optimizer.step()
    history.append([content_loss.item(), style_loss.item()])
with torch.no_grad():
    output = transformer(images[:1]).cpu()
    features = loss_net(normalize_batch(images[:1].clone()))
    gram = gram_matrix(features)
img = output[0].clone().clamp(0, 255).numpy()
img = img.transpose(1, 2, 0).astype("uint8")
print("RESULT " + json.dumps({
    "shape": list(output.shape), "image": list(img.shape), "features": features.tolist(),
    "gram": gram.tolist(), "history": history, "style_shape": list(gram_style.shape),
}))  # fmt: skip
