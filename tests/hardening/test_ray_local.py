"""Issue 27 item 14: a local Ray cluster (no address) is started on the loopback address, with
no dashboard; an address given is used as given."""

from __future__ import annotations

from typing import Any

from rknnrt.evaluation import ray_backend


class _FakeRay:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)

    def shutdown(self) -> None:
        self.calls.append({"shutdown": True})


def test_local_cluster_listens_on_loopback(monkeypatch) -> None:
    fake = _FakeRay()
    monkeypatch.setattr(ray_backend, "_ray", lambda: fake)
    with ray_backend._Session(None, 2):
        pass
    init = fake.calls[0]
    assert init["_node_ip_address"] == "127.0.0.1" and init["num_cpus"] == 2
    assert init["include_dashboard"] is False
    assert fake.calls[1] == {"shutdown": True}


def test_given_address_is_used_as_is(monkeypatch) -> None:
    fake = _FakeRay()
    monkeypatch.setattr(ray_backend, "_ray", lambda: fake)
    with ray_backend._Session("ray://10.0.0.5:10001", 2):
        pass
    assert fake.calls[0]["address"] == "ray://10.0.0.5:10001"
    assert "_node_ip_address" not in fake.calls[0]


def test_the_ray_floor_has_token_authentication() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"ray[data]>=2.52"' in text and ">=2.40" not in text
