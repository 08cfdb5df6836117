"""torchvision.models stand-in: a small seeded resnet18() (no weights are downloaded)."""

import torch


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=4, padding=1), torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, stride=4, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 1000),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def resnet18(pretrained: bool = False, **kwargs: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return _Net()
