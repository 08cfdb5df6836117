"""Issue 27 item 14: a local Ray cluster (no address) listens on loopback only (every port:
GCS, raylet, object manager, workers, agents), with no dashboard; if Ray gives it another node
address it is shut down and refused; an address given is used as given."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from rknnrt.evaluation import ray_backend


class _FakeRay:
    def __init__(self, node_ip: str = "127.0.0.1") -> None:
        self.calls: list[dict[str, Any]] = []
        self.util = SimpleNamespace(get_node_ip_address=lambda: node_ip)
        self.constants = SimpleNamespace(ENABLE_RAY_CLUSTER=True)

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        seen = {"env": os.environ.get(ray_backend.LOCAL_ONLY_ENV),
                "flag": self.constants.ENABLE_RAY_CLUSTER}  # fmt: skip
        self.calls.append({**kwargs, "seen": seen})

    def shutdown(self) -> None:
        self.calls.append({"shutdown": True})


@pytest.fixture
def fake(monkeypatch) -> _FakeRay:
    ray = _FakeRay()
    monkeypatch.setattr(ray_backend, "_ray", lambda: ray)
    monkeypatch.setattr(ray_backend, "_ray_constants", lambda: ray.constants)
    monkeypatch.delenv(ray_backend.LOCAL_ONLY_ENV, raising=False)
    return ray


def test_local_cluster_is_started_local_only(fake) -> None:
    with ray_backend._Session(None, 2):
        pass
    init = fake.calls[0]
    assert init["_node_ip_address"] == "127.0.0.1" and init["num_cpus"] == 2
    assert init["include_dashboard"] is False
    # Ray's clusters-off switch, for the daemons (environment) and the driver (constant) ...
    assert init["seen"] == {"env": "0", "flag": False}
    # ... only while the cluster starts: the caller's environment and Ray are left as they were
    assert ray_backend.LOCAL_ONLY_ENV not in os.environ and fake.constants.ENABLE_RAY_CLUSTER
    assert fake.calls[1] == {"shutdown": True}


def test_a_cluster_not_on_loopback_is_shut_down_and_refused(monkeypatch) -> None:
    ray = _FakeRay(node_ip="192.0.2.7")
    monkeypatch.setattr(ray_backend, "_ray", lambda: ray)
    monkeypatch.setattr(ray_backend, "_ray_constants", lambda: ray.constants)
    monkeypatch.setenv(ray_backend.LOCAL_ONLY_ENV, "1")
    with pytest.raises(RuntimeError, match="came up on 192.0.2.7, not on loopback"):
        with ray_backend._Session(None, 1):
            pass
    assert ray.calls[-1] == {"shutdown": True}
    assert os.environ[ray_backend.LOCAL_ONLY_ENV] == "1"  # restored


def test_given_address_is_used_as_is(fake) -> None:
    with ray_backend._Session("ray://10.0.0.5:10001", 2):
        pass
    assert fake.calls[0]["address"] == "ray://10.0.0.5:10001"
    assert "_node_ip_address" not in fake.calls[0] and fake.calls[0]["seen"]["env"] is None


def test_the_ray_floor_has_token_authentication() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"ray[data]>=2.52"' in text and ">=2.40" not in text


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = {root}, {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier and p not in found}
        found |= frontier
    return found


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(local address, port) of every listening TCP socket the processes `pids` hold."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # TCP_LISTEN
                    address, port = cols[1].split(":")
                    out.append((address[:width], int(port, 16)))
    return out


_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.mark.slow
def test_a_real_local_cluster_listens_on_loopback_only() -> None:
    pytest.importorskip("ray", reason="the listening-socket check needs Ray (the cluster extra)")
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("the listening-socket check reads /proc/net/tcp (Linux)")
    with ray_backend._Session(None, 1) as ray:
        assert ray.util.get_node_ip_address() == "127.0.0.1"
        assert ray.get(ray.remote(lambda: os.getpid()).remote()) > 0  # a worker is up
        sockets = _listening(_descendants(os.getpid()))
    assert len(sockets) >= 3, sockets  # GCS, raylet (node and object manager), workers
    exposed = [s for s in sockets if s[0] not in _LOOPBACK]
    assert not exposed, f"listening beyond loopback: {exposed}"
