"""A real bandwidth-limited network on one machine: one network namespace per rank, joined by veth pairs to a bridge,
every link shaped with tc's token-bucket filter. Ranks enter their namespace before the process group starts, so
gloo's TCP traffic crosses the shaped links (not loopback).

    with ShapedNetwork(world_size=4, rate_gbit=1.0) as net:
        results = spawn(fn, 4, *args, rank_setup=net.rank_setup, master_addr=net.address(0))

Topology: namespace ``<prefix>hub`` holds the bridge; rank k's namespace ``<prefix>r<k>`` holds ``eth0`` with
``10.<subnet>.0.<k+1>/24``. Both ends of every veth pair carry a ``tbf`` qdisc at ``rate_gbit``: rank k's egress
(its ``eth0``) and its ingress (the bridge port towards it), i.e. a full-duplex NIC of ``rate_gbit`` per rank, as a
switch port would give. Latency is the kernel's (microseconds); ``delay_ms`` adds a netem delay on the egress.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's ``ip`` and ``tc``; :func:`shaped_network_available`
tells whether this machine permits it, and :class:`ShapedNetwork` raises a clear error where it does not.
Everything it creates is deleted on exit, also after an error.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import uuid

CLONE_NEWNET = 0x40000000
INTERFACE = "eth0"  # the rank's interface name inside its namespace (GLOO_SOCKET_IFNAME)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _tc(namespace: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, "tc", *args], check=True, capture_output=True, text=True)


def shaped_network_available() -> tuple[bool, str]:
    """(True, "") where namespaces, veth pairs and tc qdiscs can be created here; else (False, why)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False, "iproute2's `ip` and `tc` are not on PATH (apt install iproute2)"
    probe = f"shp{uuid.uuid4().hex[:8]}"
    try:
        _ip("netns", "add", probe)
        _tc(probe, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1gbit", "burst", "128kb", "latency", "10ms")
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return False, f"creating a network namespace with a tc qdisc failed ({detail.strip()}); run as root " \
                      "with CAP_NET_ADMIN and CAP_SYS_ADMIN"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return True, ""


def enter_namespace(name: str) -> None:
    """Move the calling process into network namespace ``name`` (setns(2) on /var/run/netns/<name>)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into network namespace {name!r} failed: {os.strerror(err)}")
    finally:
        os.close(fd)


class ShapedNetwork:
    """Context manager that builds the namespaces, bridge and shaped veth links for ``world_size`` ranks."""

    def __init__(self, world_size: int, rate_gbit: float, *, delay_ms: float = 0.0, subnet: int = 213,
                 burst_kb: int = 512) -> None:
        if world_size < 2:
            raise ValueError(f"ShapedNetwork: world_size={world_size}; a network needs >= 2 ranks")
        if world_size > 250:
            raise ValueError(f"ShapedNetwork: world_size={world_size} exceeds one /24 subnet (<= 250 ranks)")
        if not rate_gbit > 0:
            raise ValueError(f"ShapedNetwork: rate_gbit={rate_gbit}; give a positive link rate in Gbit/s")
        if delay_ms < 0 or not 0 < subnet < 255:
            raise ValueError(f"ShapedNetwork: delay_ms={delay_ms} must be >= 0 and subnet={subnet} in 1..254")
        self.world_size, self.rate_gbit, self.delay_ms = world_size, rate_gbit, delay_ms
        self.subnet, self.burst_kb = subnet, burst_kb
        self.prefix = f"shn{uuid.uuid4().hex[:6]}"
        self.hub = f"{self.prefix}hub"
        self.namespaces = [f"{self.prefix}r{k}" for k in range(world_size)]
        self._created: list[str] = []

    def address(self, rank: int) -> str:
        return f"10.{self.subnet}.0.{rank + 1}"

    def rank_setup(self, rank: int) -> None:
        """Run in rank ``rank``'s process before the process group starts (picklable bound method)."""
        enter_namespace(self.namespaces[rank])
        os.environ["GLOO_SOCKET_IFNAME"] = INTERFACE

    def _shape(self, namespace: str, dev: str, egress_delay: bool) -> None:
        tbf = ["tbf", "rate", f"{self.rate_gbit}gbit", "burst", f"{self.burst_kb}kb", "latency", "100ms"]
        if egress_delay and self.delay_ms > 0:
            _tc(namespace, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{self.delay_ms}ms")
            _tc(namespace, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf)
        else:
            _tc(namespace, "qdisc", "add", "dev", dev, "root", *tbf)

    def __enter__(self) -> ShapedNetwork:
        ok, why = shaped_network_available()
        if not ok:
            raise RuntimeError(f"ShapedNetwork: {why}. Use the emulated link instead (benchmarks/dist_time.py "
                               "--links loopback,emulated).")
        try:
            _ip("netns", "add", self.hub)
            self._created.append(self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for k, ns in enumerate(self.namespaces):
                _ip("netns", "add", ns)
                self._created.append(ns)
                port, nic = f"{self.prefix}p{k}", f"{self.prefix}n{k}"
                _ip("link", "add", port, "type", "veth", "peer", "name", nic)
                _ip("link", "set", port, "netns", self.hub)
                _ip("link", "set", nic, "netns", ns)
                _ip("-n", ns, "link", "set", nic, "name", INTERFACE)
                _ip("-n", ns, "addr", "add", f"{self.address(k)}/24", "dev", INTERFACE)
                _ip("-n", ns, "link", "set", INTERFACE, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", self.hub, "link", "set", port, "master", "br0")
                _ip("-n", self.hub, "link", "set", port, "up")
                self._shape(ns, INTERFACE, egress_delay=True)  # rank k's egress
                self._shape(self.hub, port, egress_delay=False)  # rank k's ingress
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for ns in reversed(self._created):  # deleting a namespace deletes its veth ends and qdiscs
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._created.clear()

    def describe(self) -> str:
        delay = f", +{self.delay_ms:g} ms netem delay" if self.delay_ms else ""
        return (f"{self.rate_gbit:g} Gbit/s tc-shaped veth (tbf on both ends of each rank's link to a bridge, one "
                f"network namespace per rank{delay})")
