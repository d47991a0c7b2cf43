"""A tiny DCGAN trained as pytorch/examples' ``dcgan/main.py`` trains one: a generator of
``ConvTranspose2d`` + ``BatchNorm2d`` + ``ReLU`` ending in ``Tanh``, a discriminator of
``Conv2d`` + ``LeakyReLU`` ending in ``Sigmoid``, weights set by a ``weights_init``
applied with ``model.apply`` (dispatching on ``m.__class__.__name__``), ``BCELoss``
with labels from ``torch.full``, ``detach()`` for the discriminator step, and two
``Adam`` optimizers with ``betas``; with ``--ngpu`` above 1 both nets run through
``nn.parallel.data_parallel(self.main, input, range(ngpu))``.

Real images are random 8x8 tensors in [-1, 1].  Prints one ``RESULT {json}`` line with
the discriminator's outputs on the last fake batch and the generator loss on them.
"""

import argparse
import json
import random

import kernbench.torch.nn.parallel  # noqa: F401

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim
import kernbench.torch.utils.data  # noqa: F401 - as torch.utils.data

parser = argparse.ArgumentParser()
parser.add_argument("--nz", type=int, default=8)
parser.add_argument("--ngf", type=int, default=4)
parser.add_argument("--ndf", type=int, default=4)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--ngpu", type=int, default=1)
parser.add_argument("--manualSeed", type=int, default=None)
opt = parser.parse_args()
if opt.manualSeed is None:
    opt.manualSeed = 999
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
nz, ngf, ndf, nc, ngpu = opt.nz, opt.ngf, opt.ndf, 1, opt.ngpu


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            return nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output.view(-1, 1).squeeze(1)


netG = Generator(ngpu).to(device)
netG.apply(weights_init)
netD = Discriminator(ngpu).to(device)
netD.apply(weights_init)
criterion = nn.BCELoss()
fixed_noise = torch.randn(4, nz, 1, 1, device=device)
real_label, fake_label = 1, 0
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_images = torch.rand(16, nc, 8, 8) * 2 - 1
dataloader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(real_images), batch_size=8, shuffle=True, drop_last=True
)
history = []
for _epoch in range(opt.steps):
    for _, data in enumerate(dataloader, 0):
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        history.append([errD.item(), errG.item(), D_x, D_G_z1, D_G_z2])

with torch.no_grad():
    fake = netG(fixed_noise).detach()
torch.save(netG.state_dict(), f"netG_epoch_{opt.steps - 1}.pth")
print("RESULT " + json.dumps({
    "d_fake": output.tolist(), "err_g": errG.item(), "fake_shape": list(fake.shape),
    "fake_range": [fake.min().item(), fake.max().item()], "history": history,
    "bn_mean": netG.main[1].running_mean.tolist(),
}))  # fmt: skip
