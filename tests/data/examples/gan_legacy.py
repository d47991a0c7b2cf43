"""A fully connected GAN written in the older style many GAN collections use: ``Tensor =
torch.cuda.FloatTensor if cuda else torch.FloatTensor``, ``Variable(Tensor(n, 1)
.fill_(1.0), requires_grad=False)`` labels, noise from
``Variable(Tensor(np.random.normal(0, 1, (n, latent_dim))))``, blocks of ``Linear``,
``BatchNorm1d(out_feat, 0.8)`` (eps given positionally) and ``LeakyReLU(0.2,
inplace=True)``, ``img.view(img.size(0), *img_shape)``, ``BCELoss`` and two ``Adam``s.

Prints one ``RESULT {json}`` line with the discriminator's scores on the last real and
fake batches and the three losses of that step (recomputed by the test).
"""

import json

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.torch.autograd import Variable

img_shape, latent_dim = (1, 4, 4), 6
cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super().__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(latent_dim, 16, normalize=False),
            *block(16, 32),
            nn.Linear(32, int(np.prod(img_shape))),
            nn.Tanh(),
        )

    def forward(self, z):
        img = self.model(z)
        return img.view(img.size(0), *img_shape)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 16),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(16, 1),
            nn.Sigmoid(),
        )

    def forward(self, img):
        return self.model(img.view(img.size(0), -1))


np.random.seed(0)
torch.manual_seed(0)
adversarial_loss = torch.nn.BCELoss()
generator, discriminator = Generator(), Discriminator()
if cuda:
    generator.cuda()
    discriminator.cuda()
    adversarial_loss.cuda()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
data = np.random.uniform(-1, 1, (3, 8, *img_shape)).astype(np.float32)
for imgs_np in data:
    imgs = torch.from_numpy(imgs_np)
    valid = Variable(Tensor(imgs.size(0), 1).fill_(1.0), requires_grad=False)
    fake = Variable(Tensor(imgs.size(0), 1).fill_(0.0), requires_grad=False)
    real_imgs = Variable(imgs.type(Tensor))
    optimizer_G.zero_grad()
    z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim))))
    gen_imgs = generator(z)
    g_scores = discriminator(gen_imgs)
    g_loss = adversarial_loss(g_scores, valid)
    g_loss.backward()
    optimizer_G.step()
    optimizer_D.zero_grad()
    real_scores = discriminator(real_imgs)
    fake_scores = discriminator(gen_imgs.detach())
    real_loss = adversarial_loss(real_scores, valid)
    fake_loss = adversarial_loss(fake_scores, fake)
    d_loss = (real_loss + fake_loss) / 2
    d_loss.backward()
    optimizer_D.step()
print("RESULT " + json.dumps({
    "g_scores": g_scores.view(-1).tolist(), "real_scores": real_scores.view(-1).tolist(),
    "fake_scores": fake_scores.view(-1).tolist(), "g_loss": g_loss.item(),
    "d_loss": d_loss.item(), "gen_shape": list(gen_imgs.shape),
    "bn_eps": generator.model[3].eps,
}))  # fmt: skip
