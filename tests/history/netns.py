#!/usr/bin/python3
"""netns.py — a private network for a fault campaign's partitions: each
etcd member and each onced replica in a network namespace of its own on
this machine, joined by veth pairs to three bridges in the root
namespace, and cuts made and healed with `ip link` (iproute2 only; no
iptables, no tc: netem is not in these machines' kernel).

The three networks (10.A.0.0/16, A picked free at start):

  peer    10.A.1.0/24  etcd member i at .1+i (its peer URL)
  etcd    10.A.2.0/24  etcd member i at .1+i (its client URL), replica j
                       at .11+j, the root namespace at .254 (etcdctl)
  service 10.A.3.0/24  replica j at .11+j (its --listen tcp://), the root
                       namespace at .254 (the campaign's clients)

so each path is its own link: cutting replica j's etcd link cuts it from
etcd only, its service link from its clients (and from the other
replicas' hints) only, an etcd member's peer link from the other members
only (its clients still reach it). A cut is `ip link set dev LINK down`
on the root end of that veth pair: the bridge drops what the namespace
sends and sends it nothing; nobody gets an error, calls time out. No
namespace has a default route, so nothing crosses between networks.

Names: namespaces `once-<pid>-e<i>` and `once-<pid>-r<j>`, root links
`o<pid>...` (bridges `o<pid>bp`, `o<pid>be`, `o<pid>bs`; veth root ends
`o<pid>e<i>p` ...), <pid> the campaign's. At start every `once-<pid>-*`
namespace and `o<pid>*` link of a pid that is no longer running is
removed (with the processes left in it): what a SIGKILLed run left.

Usage as a tool (as root; exit 77 otherwise): netns.py check (builds a
network of 2 etcd-like and 1 replica-like members with a listener on each
address, shows each cut path failing while cut, the other paths working,
and the path working again once healed, removes it all; exit 0 when all
held; ctest test_netns), netns.py sweep (removes what dead runs left).

Owns: the namespaces, bridges, veth pairs and addresses it created, and
their removal (close(), also from atexit and from SIGTERM/SIGINT/SIGHUP
through the campaign's handlers).
Invariant: every name it creates carries this process's pid; close() is
idempotent and removes all of it whatever failed before; cut() and heal()
touch only the root end of a pair it made.
Never: touches a namespace, link or address it did not create (the sweep
only names of dead pids in its own pattern); adds a default route; uses
an address outside the 10.A.0.0/16 it checked free.
"""
from __future__ import annotations

import atexit
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "/sbin/ip"
NETS = {"peer": 1, "etcd": 2, "service": 3}
BRIDGE_TAG = {"peer": "bp", "etcd": "be", "service": "bs"}


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([IP, *args], capture_output=True, text=True,
                       timeout=20)
    if check and r.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_ns(ns: str) -> None:
    """SIGKILL to every process in namespace ns, then the namespace (its
    veth ends go with it, and so their root ends)."""
    for p in ip("netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(p), 9)
        except (ProcessLookupError, ValueError):
            pass
    ip("netns", "del", ns, check=False)


def sweep(keep_pid: Optional[int] = None) -> List[str]:
    """Removes the namespaces (and the processes in them) and root links
    that runs no longer alive left; what it removed."""
    gone = []
    out = ip("netns", "list", check=False).stdout
    for line in out.splitlines():
        m = re.match(r"(once-(\d+)-[er]\d+)\b", line)
        if not m or int(m.group(2)) == keep_pid or \
                pid_alive(int(m.group(2))):
            continue
        remove_ns(m.group(1))
        gone.append(m.group(1))
    out = ip("-o", "link", "show", check=False).stdout
    for m in re.finditer(r"^\d+: (o(\d+)(?:b[pes]|[er]\d+[pes]))[@:]", out,
                         re.M):
        if int(m.group(2)) != keep_pid and not pid_alive(int(m.group(2))):
            ip("link", "del", m.group(1), check=False)
            gone.append(m.group(1))
    return gone


def free_prefix(pid: int) -> str:
    """A 10.A prefix no address or route of the root namespace uses."""
    used = ip("-o", "addr", "show", check=False).stdout + \
        ip("route", "show", "table", "all", check=False).stdout
    for k in range(200):
        a = 16 + (pid + k) % 224
        if not re.search(rf"\b10\.{a}\.", used):
            return f"10.{a}"
    raise OSError("no free 10.A.0.0/16 for the campaign's network")


class Net:
    """The network of one run: build() it, then ns(name) prefixes an argv
    to run inside a member's namespace, addr(name, net) gives an address,
    cut(name, net) / heal(name, net) cut and heal one link."""

    def __init__(self, etcd: int = 3, replicas: int = 3) -> None:
        self.pid = os.getpid()
        self.members = [f"e{i}" for i in range(etcd)] + \
            [f"r{j}" for j in range(replicas)]
        self.prefix = ""
        self.made_ns: List[str] = []
        self.made_links: List[str] = []
        self.down: Dict[str, bool] = {}
        atexit.register(self.close)

    # ---- names and addresses ------------------------------------------------

    def nsname(self, member: str) -> str:
        return f"once-{self.pid}-{member}"

    def link(self, member: str, net: str) -> str:
        """The root end of member's veth pair on net."""
        return f"o{self.pid}{member}{net[0]}"

    def nets_of(self, member: str) -> List[str]:
        return ["peer", "etcd"] if member[0] == "e" else ["etcd", "service"]

    def addr(self, member: str, net: str) -> str:
        host = 254 if member == "root" else \
            (1 if member[0] == "e" else 11) + int(member[1:])
        return f"{self.prefix}.{NETS[net]}.{host}"

    def ns(self, member: str) -> List[str]:
        """The argv prefix that runs a program in member's namespace (ip
        netns exec execs it: the pid is the program's own)."""
        return [IP, "netns", "exec", self.nsname(member)]

    # ---- build and remove ---------------------------------------------------

    def build(self) -> None:
        """Every namespace, bridge, pair and address; on an error what was
        made is removed and the error raised."""
        try:
            sweep(keep_pid=self.pid)
            self.prefix = free_prefix(self.pid)
            for net, tag in BRIDGE_TAG.items():
                br = f"o{self.pid}{tag}"
                ip("link", "add", br, "type", "bridge")
                self.made_links.append(br)
                ip("link", "set", br, "up")
                if net != "peer":
                    ip("addr", "add", f"{self.addr('root', net)}/24", "dev",
                       br)
            for m in self.members:
                self._member(m)
        except BaseException:
            self.close()
            raise

    def _member(self, m: str) -> None:
        ns = self.nsname(m)
        ip("netns", "add", ns)
        self.made_ns.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")
        for net in self.nets_of(m):
            root = self.link(m, net)
            ip("link", "add", root, "type", "veth", "peer", "name", net,
               "netns", ns)
            self.made_links.append(root)
            ip("link", "set", root, "master",
               f"o{self.pid}{BRIDGE_TAG[net]}", "up")
            ip("-n", ns, "addr", "add", f"{self.addr(m, net)}/24", "dev",
               net)
            ip("-n", ns, "link", "set", net, "up")

    def close(self) -> None:
        """Removes every namespace (after SIGKILL to what still runs in
        it) and root link this Net made. Idempotent."""
        for ns in self.made_ns:
            remove_ns(ns)
        for link in self.made_links:  # a veth goes with its namespace
            if ip("link", "show", link, check=False).returncode == 0:
                ip("link", "del", link, check=False)
        self.made_ns, self.made_links = [], []

    # ---- cuts ---------------------------------------------------------------

    def cut(self, member: str, net: str) -> None:
        ip("link", "set", "dev", self.link(member, net), "down")
        self.down[self.link(member, net)] = True

    def heal(self, member: str, net: str) -> None:
        ip("link", "set", "dev", self.link(member, net), "up")
        self.down.pop(self.link(member, net), None)

    def heal_all(self) -> None:
        for link in list(self.down):
            ip("link", "set", "dev", link, "up", check=False)
        self.down.clear()

    # ---- probes: does a path work now? --------------------------------------

    def reaches(self, src: str, dsts: List[Tuple[str, int]],
                timeout: float = 1.0) -> List[bool]:
        """For each of dsts, whether a TCP connection from src's namespace
        ("root": this one) is accepted within timeout (one process per
        call; the connections one after another)."""
        code = ("import socket,sys\nfor a,p in " + repr(dsts) + ":\n"
                " try:\n  socket.create_connection((a,p),timeout="
                f"{timeout}).close()\n  print(1)\n"
                " except OSError:\n  print(0)\n")
        argv = ([] if src == "root" else self.ns(src)) + \
            [sys.executable, "-c", code]
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout * len(dsts) + 15)
        got = r.stdout.split()
        if r.returncode != 0 or len(got) != len(dsts):
            raise OSError(f"probe from {src}: {r.stderr.strip()}")
        return [x == "1" for x in got]

    def connects(self, src: str, dst: Tuple[str, int],
                 timeout: float = 1.0) -> bool:
        return self.reaches(src, [dst], timeout)[0]


def check() -> int:
    """As root: a network for 1 etcd-like and 1 replica-like member,
    a listener in each, every path working, each cut path failing while
    cut and working again once healed, everything removed at the end."""
    net = Net(etcd=2, replicas=1)
    net.build()
    print(f"netns: built {len(net.made_ns)} namespaces, "
          f"{len(net.made_links)} links on {net.prefix}.0.0/16")
    servers = []
    ok = True
    try:
        for m, nets in (("e0", ["peer", "etcd"]), ("e1", ["peer"]),
                        ("r0", ["etcd", "service"])):
            for n in nets:
                code = ("import socket\ns=socket.socket()\n"
                        f"s.bind(({net.addr(m, n)!r},7000))\ns.listen()\n"
                        "while True: s.accept()[0].close()\n")
                servers.append(subprocess.Popen(
                    net.ns(m) + [sys.executable, "-c", code]))
        paths = [("r0", "etcd", "r0", ("e0", "etcd")),
                 ("r0", "service", "root", ("r0", "service")),
                 ("e1", "peer", "e1", ("e0", "peer"))]
        for member, n, src, (dm, dn) in paths:
            dst = (net.addr(dm, dn), 7000)
            for _ in range(50):  # the listener starting
                if net.connects(src, dst, 0.2):
                    break
            before = net.connects(src, dst)
            net.cut(member, n)
            during = net.connects(src, dst)
            other = net.connects("root", (net.addr("e0", "etcd"), 7000))
            net.heal(member, n)
            after = net.connects(src, dst, 3.0)
            good = before and not during and other and after
            ok &= good
            print(f"netns: {member} {n:<7} from {src:<4}: before "
                  f"{before}, cut {during}, etcd from root while cut "
                  f"{other}, healed {after} — {'ok' if good else 'WRONG'}")
    finally:
        for s in servers:
            s.kill()
            s.wait()
        net.close()
    left = [x for x in ip("netns", "list").stdout.split()
            if x.startswith(f"once-{net.pid}-")]
    print(f"netns: removed, namespaces left: {left or 'none'}")
    return 0 if ok and not left else 1


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("netns: network namespaces need root", file=sys.stderr)
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    cmd = sys.argv[1] if len(sys.argv) > 1 else "check"
    if cmd == "sweep":
        print("\n".join(sweep()) or "nothing to sweep")
        sys.exit(0)
    sys.exit(check())
