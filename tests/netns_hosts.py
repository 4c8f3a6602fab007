"""Several machines on one: network namespaces made by the test itself, each a "host" with a
private address on a bridge, and PostgreSQL, Redis and an SMTP sink on the bridge's address
only, so every connection from a host crosses its veth link.

`Hosts` makes the bridge (10.231.N.1/24 on the machine's side) and one namespace per name, each
with a veth pair whose inner end holds 10.231.N.(10+i)/24 (addresses inside the namespaces
only); `run` starts a process inside one, in a PID namespace of its own too (`unshare`), so a
worker there cannot see, nor prove dead, a worker of another "host" (the lease's successor
then waits for the TTL, as on two machines); `kill_host` SIGKILLs everything in a namespace;
`close` removes it all, whatever happened before. Needs root and `ip` (iproute2):
`unavailable()` says why not.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from aiosmtpd.controller import Controller
from redis import Redis
from redis.exceptions import RedisError

from tests.smtp_server import PipeliningHandler, SmtpServer, free_port


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no `ip netns`), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    probe = f"bsprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> int:
    """A third octet N for 10.231.N.0/24 that no interface of this machine uses."""
    used = _ip("-o", "addr").stdout
    for _ in range(100):
        octet = int.from_bytes(os.urandom(1), "big") % 250 + 1
        if f"10.231.{octet}." not in used:
            return octet
    raise AssertionError("no free 10.231.N.0/24 subnet")


class Hosts:
    def __init__(self, names: tuple[str, ...]) -> None:
        self.tag = uuid.uuid4().hex[:5]
        self.octet = _free_subnet()
        self.subnet = f"10.231.{self.octet}.0/24"
        self.bridge_address = f"10.231.{self.octet}.1"
        self.bridge = f"bsbr{self.tag}"
        self.names = names
        self.netns = {name: f"bs{self.tag}-{name}" for name in names}
        self.address = {name: f"10.231.{self.octet}.{10 + i}" for i, name in enumerate(names)}
        self.processes: list[subprocess.Popen] = []
        self.made: list[str] = []

    def open(self) -> Hosts:
        _ip("link", "add", self.bridge, "type", "bridge")
        self.made.append("bridge")
        _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            netns, outer, inner = self.netns[name], f"bsv{self.tag}{i}", f"bsi{self.tag}{i}"
            _ip("netns", "add", netns)
            self.made.append(netns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", netns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", netns, "addr", "add", f"{self.address[name]}/24", "dev", inner)
            _ip("-n", netns, "link", "set", inner, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
        return self

    def run(self, name: str, argv: list[str], env: dict[str, str], log: Path,
            cwd: Path) -> subprocess.Popen:
        """Start `argv` on host `name` (its namespace, and a PID namespace of its own)."""
        pid_ns = ["unshare", "--pid", "--fork"] if shutil.which("unshare") else []
        with open(log, "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", self.netns[name], *pid_ns, *argv],
                                    env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def pids(self, name: str) -> list[int]:
        listed = _ip("netns", "pids", self.netns[name], check=False).stdout.split()
        return [int(pid) for pid in listed if pid.isdigit()]

    def kill_host(self, name: str) -> None:
        """SIGKILL every process on host `name`, as when the machine dies; wait until none is left."""
        deadline = time.monotonic() + 20
        while pids := self.pids(name):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for proc in self.processes:  # reap the ones we started (no zombie keeps the netns busy)
                if proc.poll() is None:
                    try:
                        proc.wait(0.05)
                    except subprocess.TimeoutExpired:
                        pass
            if time.monotonic() > deadline:
                raise AssertionError(f"processes on {name} survived SIGKILL: {pids}")

    def sockets(self, name: str) -> str:
        """The host's TCP connections still open (not waiting out TIME-WAIT)."""
        shown = subprocess.run(["ip", "netns", "exec", self.netns[name], "ss", "-Htan", "exclude",
                                "time-wait"], capture_output=True, text=True, timeout=30)
        return shown.stdout.strip()

    def close(self) -> None:
        alive = [name for name in self.names if self.netns[name] in self.made]
        try:
            for name in alive:
                self.kill_host(name)
            # A dead process's connections still close over the links (FIN, ACK): a namespace
            # removed first keeps them, and its veth, until they time out minutes later.
            deadline = time.monotonic() + 15
            while any(self.sockets(name) for name in alive) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            for name in alive:
                _ip("netns", "del", self.netns[name], check=False)  # its veth pair goes with it
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        if "bridge" in self.made:
            _ip("link", "del", self.bridge, check=False)


class BridgeRedis:
    """A redis-server of our own listening on the bridge's address only."""

    def __init__(self, address: str, folder: Path) -> None:
        self.port = free_port()
        self.url = f"redis://{address}:{self.port}/0"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["redis-server", "--bind", address, "--port", str(self.port), "--save", "",
                 "--appendonly", "no", "--protected-mode", "no", "--dir", str(folder)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        with Redis.from_url(self.url, socket_timeout=2) as client:
            while True:
                try:
                    client.ping()
                    break
                except RedisError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        self.stop()
                        raise AssertionError("the bridge's redis-server did not start") from None
                    time.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _postgres_bin(program: str) -> str:
    found = shutil.which(program) or max(
        (str(p) for p in Path("/usr/lib/postgresql").glob(f"*/bin/{program}")),
        key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0, default=None)
    if not found:
        raise AssertionError(f"PostgreSQL's {program} is not installed (apt-get install postgresql)")
    return found


class BridgePostgres:
    """A PostgreSQL cluster of our own (initdb as the `postgres` user into a temporary folder),
    listening on the bridge's address only, trusting the hosts' subnet."""

    def __init__(self, address: str, subnet: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="bs-netns-pg-"))
        shutil.chown(self.folder, "postgres", "postgres")
        self.data = self.folder / "data"
        self.port = free_port()
        try:
            self._as_postgres(_postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres",
                              "-A", "trust", "-E", "UTF8", "--no-sync")
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {subnet} trust\n")
            options = (f"-c listen_addresses={address} -p {self.port} -c fsync=off "
                       f"-c unix_socket_directories={self.folder} -c max_connections=100")
            self._as_postgres(_postgres_bin("pg_ctl"), "-D", str(self.data), "-l",
                              str(self.folder / "postgres.log"), "-w", "-o", options, "start")
        except BaseException:
            self.stop()
            raise
        self.server_url = f"postgresql://postgres@{address}:{self.port}/postgres"
        self.url = f"postgresql://postgres@{address}:{self.port}/broadside"

    def _as_postgres(self, *argv: str) -> None:
        done = subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True,
                              text=True, timeout=120, cwd=self.folder)
        if done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():  # it started
                self._as_postgres(_postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class BridgeSmtp(SmtpServer):
    """The recording SMTP sink, listening on the bridge's address."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.controller.loop.close()  # the parent's controller is replaced, never started
        self.host = address
        self.controller = Controller(PipeliningHandler(self), hostname=address, port=self.port,
                                     enable_SMTPUTF8=True)
