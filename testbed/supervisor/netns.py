"""The network namespaces of one `backend: netns` run (DESIGN section 5): made, then removed.

Layout: a namespace `<prefix>-bridge` holding the bridge `br0`, and one namespace per node
and one for the workload's clients, each with `lo` and an `eth0` whose veth peer is a port of
the bridge. Every interface is made inside a namespace of the run (`ip link add ... netns`),
never in the host's, and the addresses (10.200.0.0/16) exist only on those interfaces: no
route leads from them to the host's interfaces, so no packet of a run leaves its namespaces.
Every run can use the same addresses because no two runs share a bridge.

Names start with `isrlab-<run id>-<digest of the run directory's path>`. Each is written to
the run's registry (`runs/.live/`) before it is made, so a supervisor killed halfway through
the setup still leaves a list the next run removes (`delete_namespaces`, called by
`reap_leftovers`). Deleting a namespace deletes its interfaces and the veth peers in the
bridge's namespace with them.

The network faults' cuts are nftables rules in the bridge's namespace, and slow links netem
qdiscs on its ports where the kernel has netem (`faults.kernel_rules`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from broker.wire.linkfilter import LinkRule
from faults import kernel_rules
from testbed.config.topology_spec import Topology

#: the run's own subnet, inside its namespaces only
SUBNET_PREFIX = "10.200"
PREFIX_LEN = 16
#: every node listens on this port at its own address
PORT = 9092
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class NetnsError(RuntimeError):
    """An ip or nft command failed; the message names the command and what it printed."""


def requirements_missing() -> list[str]:
    """What this machine lacks for `backend: netns` (empty: nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (namespaces, veth pairs and nftables rules need CAP_SYS_ADMIN and CAP_NET_ADMIN)")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            missing.append(f"the `{tool}` command (Debian package {package})")
    return missing


def refusal(topology: Topology) -> str | None:
    """The error for a topology asking for `backend: netns` on a machine that cannot make
    namespaces; None for any other topology, or where the machine can."""
    missing = requirements_missing() if topology.network.backend == "netns" else []
    if not missing:
        return None
    return (f"{topology.source}: network.backend: netns cannot run here: it needs {' and '.join(missing)} "
            f"(backend: userspace, the default, needs none of these)")


def _run(args: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _has_netem(namespace: str) -> bool:
    """Whether the kernel has the netem qdisc (and `tc` is here), tried on the bridge of a
    fresh namespace."""
    if shutil.which("tc") is None:
        return False
    tried = subprocess.run(["tc", "-n", namespace, "qdisc", "add", "dev", "br0", "root", "netem", "delay", "1ms"],
                           capture_output=True, text=True, check=False)
    if tried.returncode != 0:
        return False
    subprocess.run(["tc", "-n", namespace, "qdisc", "del", "dev", "br0", "root"], capture_output=True, check=False)
    return True


def delete_namespaces(names: Sequence[str]) -> None:
    """Remove these namespaces, those that exist (a leftover list may name some never made)."""
    if names:
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join(f"netns delete {n}\n" for n in names),
                       capture_output=True, text=True, check=False)


def existing_namespaces(prefix: str = "isrlab-") -> list[str]:
    """Namespaces whose name starts with `prefix` (for tests and leak checks)."""
    try:
        return sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
    except FileNotFoundError:
        return []


class NetnsNetwork:
    """The namespaces, addresses and kernel rules of one run."""

    def __init__(self, run_dir: Path, register: Callable[[list[str]], None]) -> None:
        """Named after the run directory's name (the run id), with a digest of its path: two
        runs at once never share a directory, though a test's may share a name."""
        digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:6]
        self.prefix = f"isrlab-{_UNSAFE.sub('_', run_dir.name)[:64]}-{digest}"
        self.bridge = f"{self.prefix}-bridge"
        self._register = register
        #: node name (or "clients") -> its address; the order of creation numbers the ports
        self.addresses: dict[str, str] = {}
        #: node name -> its veth peer, a port of the bridge (egress: packets towards the node)
        self.ports: dict[str, str] = {}
        #: whether the kernel has netem: then `slow` is carried out here too, else by the nodes
        self.netem = False
        self.drops: list[tuple[str, str]] = []
        #: the rules in force, one line each (faults.jsonl's `kernel_rules`)
        self.rules: list[str] = []
        #: packets dropped under rulesets already replaced (a replaced table's counters are gone)
        self._dropped_before: dict[str, int] = {}
        self._made: list[str] = []

    def namespace(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def endpoint(self, name: str) -> str:
        return f"tcp://{self.addresses[name]}:{PORT}"

    def create(self, names: Sequence[str]) -> None:
        """The bridge's namespace, then one namespace per name, each wired to the bridge."""
        self._register([self.bridge])
        self._made.append(self.bridge)
        _run(["ip", "netns", "add", self.bridge])
        _run(["ip", "-n", self.bridge, "-batch", "-"], "link add br0 type bridge\nlink set br0 up\nlink set lo up\n")
        self.netem = _has_netem(self.bridge)
        self.add(names)
        self.apply([])  # the empty ruleset: a kernel without nftables' bridge family fails here, not mid-run

    def add(self, names: Sequence[str]) -> None:
        """Namespaces for more names (a broker added online, R38)."""
        fresh = [n for n in names if n not in self.addresses]
        if not fresh:
            return
        self._register([self.namespace(n) for n in fresh])
        first = len(self.addresses)
        for i, name in enumerate(fresh, start=first):
            host = i + 10  # .10 onwards: the low addresses look like gateways, which none is
            self.addresses[name] = f"{SUBNET_PREFIX}.{host // 250}.{host % 250}"
        self._made += [self.namespace(n) for n in fresh]
        ports = {name: f"p{i}" for i, name in enumerate(fresh, start=first)}
        self.ports.update(ports)
        _run(["ip", "-batch", "-"], "".join(
            f"netns add {self.namespace(n)}\n"
            f"link add {ports[n]} netns {self.bridge} type veth peer name eth0 netns {self.namespace(n)}\n"
            for n in fresh))
        _run(["ip", "-n", self.bridge, "-batch", "-"],
             "".join(f"link set {p} master br0\nlink set {p} up\n" for p in ports.values()))
        for n in fresh:
            _run(["ip", "-n", self.namespace(n), "-batch", "-"],
                 f"addr add {self.addresses[n]}/{PREFIX_LEN} dev eth0\nlink set eth0 up\nlink set lo up\n")

    def apply(self, drops: Sequence[tuple[str, str]],
              slow: Mapping[tuple[str, str], LinkRule] | None = None) -> None:
        """Make these links (and only these) drop every packet and, where the kernel has netem,
        these be slow (delay, jitter, loss, duplication)."""
        if slow and not self.netem:
            raise NetnsError("this kernel has no netem qdisc: slow links stay with the nodes' filters")
        script = kernel_rules.nft_script(drops, self.addresses)
        for link, counts in self._current().items():
            self._dropped_before[link] = self._dropped_before.get(link, 0) + counts["dropped_packets"]
        _run(["ip", "netns", "exec", self.bridge, "nft", "-f", "-"], script)
        self.drops = list(drops)
        if self.netem:
            _run(["tc", "-n", self.bridge, "-force", "-batch", "-"],
                 kernel_rules.tc_script(slow or {}, self.addresses, self.ports))
        self.rules = [*kernel_rules.rules_text(drops, self.addresses),
                      *kernel_rules.slow_rules_text(slow or {}, self.addresses)]

    def counters(self) -> dict[str, dict[str, int]]:
        """Packets the kernel dropped per link during the run (as the nodes' filters count)."""
        total = dict(self._dropped_before)
        for link, counts in self._current().items():
            total[link] = total.get(link, 0) + counts["dropped_packets"]
        return {link: {"dropped_packets": n} for link, n in total.items()}

    def _current(self) -> dict[str, dict[str, int]]:
        if not self.drops:
            return {}
        listing = _run(["ip", "netns", "exec", self.bridge, "nft", "-j", "list", "table", "bridge",
                        kernel_rules.TABLE])
        return kernel_rules.counters(json.loads(listing))

    def remove(self) -> None:
        """Delete every namespace this run made (their interfaces and rules go with them)."""
        delete_namespaces(list(reversed(self._made)))
        self._made.clear()
