"""A Ray cluster of several nodes on this one machine, for the tests and the benchmark of ``airpatrol batch --ray``.

Each node is a ``ray start --block`` process (the head first, then ``ray start --address HEAD``), with its own CPU
count, its own ports and one private temporary folder. ``--block`` keeps the ``ray start`` process in the foreground
as the parent of the node's processes (GCS, raylet, agents, workers): stopping it with SIGTERM shuts its node down.
``stop`` does that, then kills whatever of the processes this cluster started is still alive - never ``ray stop``,
which would also stop every other Ray instance on the machine (other test runs, other users).

Nodes on one machine share its cores and memory: a cluster made here shows that the work is spread over several
raylets and that the results are the same, not what a cluster of separate machines would gain.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil  # installed with ultralytics

START_TIMEOUT_S = 90.0
STARTED = "block forever"  # what `ray start --block` prints once its node is up


class ClusterError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def ray_executable() -> str:
    """The ``ray`` command of this Python's installation (not whatever ``ray`` is first on PATH)."""
    beside = Path(sys.executable).with_name("ray")
    if beside.is_file():
        return str(beside)
    found = shutil.which("ray")
    if found is None:
        raise ClusterError("the `ray` command is not installed (pip install 'airpatrol[cluster]')")
    return found


class LocalRayCluster:
    """``with LocalRayCluster(nodes=2, cpus_per_node=1) as cluster: ... cluster.address ...``"""

    def __init__(self, nodes: int = 2, cpus_per_node: int = 1, object_store_bytes: int = 100 * 1024 * 1024):
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.n_nodes, self.cpus, self.object_store_bytes = nodes, cpus_per_node, object_store_bytes
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"  # give it to `airpatrol batch --ray` or ray.init(address=...)
        # short: Ray's Unix sockets live under it, and a socket path may not exceed 107 bytes
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ap-ray-"))
        # Ray >= 2.5x turns token authentication on for a head when ~/.ray/auth_token exists (a local ray.init makes
        # one) but not for a node joining it; the cluster's own token, given to every node and driver, works alike
        # whatever is in ~/.ray
        self._token = secrets.token_hex(32)
        self._procs: list[subprocess.Popen] = []
        self._logs: list[Path] = []
        # every process of the cluster seen so far (node processes, workers); psutil.Process checks a pid's start time
        # before it signals it, so a pid reused after one of them ended is never signalled
        self._known: dict[int, psutil.Process] = {}

    def __enter__(self) -> LocalRayCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def client_env(self) -> dict[str, str]:
        """What a driver (``airpatrol batch --ray ADDRESS``, ``ray.init``) needs in its environment to connect."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self._token}

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.client_env, "RAY_USAGE_STATS_ENABLED": "0", "YOLO_OFFLINE": "1"}

    def start(self) -> LocalRayCluster:
        ray = ray_executable()
        common = ["--block", "--num-cpus", str(self.cpus), "--object-store-memory", str(self.object_store_bytes)]
        common += ["--min-worker-port", "0", "--max-worker-port", "0", "--temp-dir", str(self.temp_dir)]
        common += ["--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--include-log-monitor", "false"]
        common += ["--dashboard-agent-listen-port"]  # its default (52365) is one per machine
        head = [ray, "start", "--head", "--port", str(self.port), "--include-dashboard", "false"]
        head += ["--ray-client-server-port", str(free_port())]
        self._launch(0, [*head, *common, str(free_port())])
        self._wait_until(0, lambda: _listening(self.port))  # the head's GCS: other nodes can join from now on
        for i in range(1, self.n_nodes):
            self._launch(i, [ray, "start", "--address", self.address, *common, str(free_port())])
        for i in range(self.n_nodes):
            self._wait_until(i, lambda: STARTED in self._logs[i].read_text(errors="replace"))
        self._remember_processes()
        return self

    def _launch(self, i: int, cmd: list[str]) -> None:
        log = self.temp_dir / f"node{i}.log"
        self._logs.append(log)
        with open(log, "wb") as out:
            # own session: a Ctrl-C meant for the test run reaches the node only through stop()
            self._procs.append(
                subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True)
            )

    def _wait_until(self, i: int, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if self._procs[i].poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self._logs[i].read_text(errors="replace").splitlines()[-15:])
                raise ClusterError(f"ray node {i} did not start (exit {self._procs[i].poll()}):\n{tail}")
            time.sleep(0.2)

    def _remember_processes(self) -> None:
        for p in self._procs:
            try:
                top = psutil.Process(p.pid)
                for proc in [top, *top.children(recursive=True)]:
                    self._known.setdefault(proc.pid, proc)
            except psutil.NoSuchProcess:
                pass

    def alive_processes(self) -> list[psutil.Process]:
        """The processes this cluster started that are still running."""
        self._remember_processes()
        alive = []
        for proc in self._known.values():
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                pass
        return alive

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM to each ``ray start --block`` (it shuts its node down), then SIGKILL to what is left; the
        temporary folder is removed."""
        self._remember_processes()  # workers started since the nodes came up
        for p in reversed(self._procs):  # worker nodes first, the head last
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(self.alive_processes(), timeout=timeout_s)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        return "\n\n".join(
            f"== {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in self._logs
            if log.is_file()
        )
