"""The compile daemon: one per user and installation, a forked child per build.

Each test gets a daemon of its own: ``XDG_RUNTIME_DIR`` (where the daemon's
socket lives) is a temporary directory, or :func:`daemon.address` is replaced.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import sparsecomp
from sparsecomp.compiler import daemon
from sparsecomp.errors import CompileError

pytestmark = pytest.mark.usefixtures("private_cache")

SCALE = """
func.func @scale(%x: tensor<?xf64>) -> tensor<?xf64> {{
  %c = arith.constant {factor} : f64
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}}
      ins(%x : tensor<?xf64>) outs(%x : tensor<?xf64>) {{
  ^bb0(%a: f64, %o: f64):
    %s = arith.mulf %a, %c : f64
    linalg.yield %s : f64
  }} -> tensor<?xf64>
  return %r : tensor<?xf64>
}}
"""


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state


def _daemons(marker: str) -> list[int]:
    """Pids of the daemons whose command line names ``marker`` (their socket's path),
    not of the children they forked for jobs."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "sparsecomp.compiler.zygote" in cmdline and marker in cmdline:
            found.append(int(proc.name))
    roots = []
    for pid in found:
        try:
            if _parent(pid) not in found:
                roots.append(pid)
        except OSError:  # ended meanwhile
            continue
    return roots


def _stop(marker: str) -> None:
    for pid in _daemons(marker):
        os.kill(pid, signal.SIGTERM)


def _start(path: Path, idle: float) -> None:
    cmd = [sys.executable, "-m", "sparsecomp.compiler.zygote", str(path), str(idle)]
    assert subprocess.run(cmd, timeout=120, check=False).returncode == 0
    assert path.is_socket()


@pytest.fixture
def private_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """This process's builds go to a daemon of their own (idle after 30 s)."""
    path = tmp_path / "d.sock"
    _start(path, 30)
    monkeypatch.setattr(daemon, "address", lambda: path)
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON", "1")
    yield path
    _stop(str(path))


def test_new_processes_share_one_daemon() -> None:
    """Two processes compile cold: the first starts the daemon, the second uses it."""
    runtime = Path(tempfile.mkdtemp(prefix="sc-"))  # short: a socket's path is
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SPARSECOMP_COMPILE_DAEMON": "1"}
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import sparsecomp
        factor = float(sys.argv[1])
        exe = sparsecomp.compile(sys.stdin.read(), cache_results=False)
        print(exe(np.arange(4.0)).tolist())
        """
    )
    try:
        for factor in (2.0, 3.0):
            done = subprocess.run(
                [sys.executable, "-c", script, str(factor)],
                input=SCALE.format(factor=factor), capture_output=True, text=True,
                env=env, timeout=300, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            assert done.stdout.strip() == str([factor * i for i in range(4)])
        assert len(_daemons(str(runtime))) == 1
        sockets = list(runtime.glob("sparsecomp-*/*.sock"))
        assert len(sockets) == 1
        assert oct(sockets[0].parent.stat().st_mode & 0o777) == "0o700"
    finally:
        _stop(str(runtime))
        shutil.rmtree(runtime, ignore_errors=True)


def test_builds_of_two_threads_run_side_by_side(private_daemon: Path) -> None:
    results: dict[float, np.ndarray] = {}

    def compile_and_run(factor: float) -> None:
        exe = sparsecomp.compile(SCALE.format(factor=factor), cache_results=False)
        results[factor] = exe(np.arange(5.0))

    threads = [threading.Thread(target=compile_and_run, args=(f,)) for f in (4.0, 5.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for factor in (4.0, 5.0):
        np.testing.assert_array_equal(results[factor], factor * np.arange(5.0))
    assert _daemons(str(private_daemon)) != []


def test_errors_come_back_as_errors(private_daemon: Path) -> None:
    answer = daemon.exchange({"kind": "nothing"})  # a job that is no build
    assert answer is not None
    assert answer["ok"] is False
    assert "internal compiler error" in answer["message"]
    with pytest.raises(CompileError, match=r"<source>:2:\d+: error"):
        sparsecomp.compile("\nfunc.func @f( {", cache_results=False)


def test_a_job_cut_off_is_a_crash(private_daemon: Path) -> None:
    """A child killed mid-job: the client hears how, and the daemon serves the next."""
    children_before = set(_children(_daemons(str(private_daemon))[0]))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(private_daemon))
    sock.sendall(b'{"kind": "upstream", "input": "/nonexistent", ')  # no newline: it waits
    deadline = time.monotonic() + 30
    while not (new := set(_children(_daemons(str(private_daemon))[0])) - children_before):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(new.pop(), signal.SIGKILL)
    with sock.makefile("r") as lines:
        said = lines.readline()
    sock.close()
    assert "SIGKILL" in said
    exe = sparsecomp.compile(SCALE.format(factor=6.0), cache_results=False)
    np.testing.assert_array_equal(exe(np.arange(3.0)), 6.0 * np.arange(3.0))


def _children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and _parent(int(proc.name)) == pid:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_an_idle_daemon_leaves_and_a_new_one_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "idle.sock"
    _start(path, 1)
    deadline = time.monotonic() + 60
    while path.exists() or _daemons(str(path)):
        assert time.monotonic() < deadline, "the idle daemon did not leave"
        time.sleep(0.1)
    # a client finds no daemon (and, here, a stale socket file): it starts one
    path.write_text("")
    monkeypatch.setattr(daemon, "address", lambda: path)
    try:
        answer = daemon.exchange({"kind": "nothing"})
        assert answer is not None
        assert len(_daemons(str(path))) == 1
    finally:
        _stop(str(path))


def test_turned_off_each_process_has_its_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON", "0")

    def refuse() -> None:
        raise AssertionError("the daemon was asked")

    monkeypatch.setattr(daemon, "connect", refuse)
    exe = sparsecomp.compile(SCALE.format(factor=7.0), cache_results=False)
    np.testing.assert_array_equal(exe(np.arange(3.0)), 7.0 * np.arange(3.0))


def test_a_directory_not_ours_alone_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # others may write here: someone else's daemon could listen
    monkeypatch.setattr(daemon, "address", lambda: shared / "d.sock")
    assert daemon.connect() is None
    assert not (shared / "d.sock").exists()
    # the build still runs, in this process's own compile server
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON", "1")
    exe = sparsecomp.compile(SCALE.format(factor=8.0), cache_results=False)
    np.testing.assert_array_equal(exe(np.arange(3.0)), 8.0 * np.arange(3.0))


def test_a_connection_dropped_unanswered_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that leaves with a client's connection queued ends it without a word:
    the client asks again (here the same listener, which answers the second time), but
    not after a connection that said something and then ended."""
    path = tmp_path / "fake.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    monkeypatch.setattr(daemon, "address", lambda: path)
    jobs_seen: list[str] = []

    def serve(replies: list[list[str]]) -> None:
        for reply in replies:
            conn, _ = server.accept()
            with conn, conn.makefile("r") as lines:
                jobs_seen.append(lines.readline())
                for line in reply:
                    conn.sendall(line.encode())

    def exchange(replies: list[list[str]]) -> dict | None:
        thread = threading.Thread(target=serve, args=(replies,))
        thread.start()
        try:
            return daemon.exchange({"kind": "nothing"})
        finally:
            thread.join(timeout=30)

    try:
        assert exchange([[], ['{"ok": true}\n']]) == {"ok": True}
        assert len(jobs_seen) == 2
        progress = '{"progress": ["lowering", 0.5]}\n'
        assert "crash" in (exchange([[progress]]) or {})
        assert len(jobs_seen) == 3
    finally:
        server.close()


def test_daemons_leave_no_files_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon started by a client and gone idle leaves its directory as it found it but
    for the one start lock: no socket, no empty log, no lock of its own (one of each per
    installation piled up in /tmp/sparsecomp-<uid>/ before)."""
    path = tmp_path / "tidy.sock"
    monkeypatch.setattr(daemon, "address", lambda: path)
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON_IDLE", "1")
    try:
        assert daemon.exchange({"kind": "nothing"}) is not None
        assert path.is_socket()
        deadline = time.monotonic() + 60
        while path.exists() or _daemons(str(path)):
            assert time.monotonic() < deadline, "the idle daemon did not leave"
            time.sleep(0.1)
    finally:
        _stop(str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [daemon.START_LOCK]


def test_an_early_connection_is_the_next_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """``connect_early`` connects in the background (once, however often asked); the next
    ``connect`` takes that connection, later ones make their own; ``forget_early``
    closes one that nobody took, made or still being made."""
    made: list[socket.socket] = []
    release = threading.Event()

    def fake() -> socket.socket:
        release.wait(10)
        mine, theirs = socket.socketpair()
        made.extend([mine, theirs])
        return mine

    monkeypatch.setattr(daemon, "_connect_or_start", fake)
    try:
        release.set()
        daemon.connect_early()
        daemon.connect_early()
        taken = daemon.connect()
        assert len(made) == 2
        assert taken is made[0]
        assert daemon.connect() is made[2]
        daemon.connect_early()
        daemon.connect()  # takes it
        daemon.connect_early()
        time.sleep(0.05)
        daemon.forget_early()  # made: closed at once
        assert made[6].fileno() == -1
        release.clear()
        daemon.connect_early()
        daemon.forget_early()  # still being made: closed when it is
        release.set()
        deadline = time.monotonic() + 10
        while len(made) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        assert made[8].fileno() == -1
        assert made[9].recv(1) == b""  # the other end sees the connection end
        assert daemon.connect() is made[10]
    finally:
        for sock in made:
            sock.close()


def test_the_daemon_listens_before_importing_what_gpu_builds_need(repo: Path) -> None:
    """The daemon imports what CPU builds use before it listens (``_warm``) and the GPU
    builds' passes and dialects after (``_later``): the examples and benchmark kernels
    compile for the CPU after ``_warm`` without importing any of the latter."""
    probe = textwrap.dedent(
        """
        import glob, sys
        import sparsecomp
        from sparsecomp.compiler import zygote
        zygote._warm()
        later = [m for m in zygote._later() if m not in sys.modules]
        assert {'mlir.dialects.gpu', 'mlir.dialects.nvvm'} <= set(later), later
        for f in sorted(glob.glob('examples/*.mlir') + glob.glob('benchmarks/kernels/*.mlir')):
            sparsecomp.compile(f, cache_results=False)
        print(sorted(m for m in later if m in sys.modules))
        """
    )
    env = {**os.environ, "SPARSECOMP_COMPILE_IN_PROCESS": "1"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_a_directory_at_the_sockets_path_is_replaced(tmp_path: Path) -> None:
    """A directory where the daemon's socket goes stopped every daemon at its start (each
    process then built in a worker of its own, silently, 0.2-0.3 s more)."""
    path = tmp_path / "d.sock"
    (path / "inside").mkdir(parents=True)
    _start(path, 5)
    try:
        assert path.is_socket()
    finally:
        _stop(str(path))


def test_a_stopped_daemon_is_given_up(private_daemon: Path, monkeypatch) -> None:
    """A daemon stopped with SIGSTOP takes no job: the client gives it up after
    ``ACCEPT_SECONDS`` and builds in a compile server of its own (it waited forever),
    and asks it no more in this process."""
    monkeypatch.setattr(daemon, "ACCEPT_SECONDS", 2.0)
    monkeypatch.setattr(daemon, "_unresponsive", False)
    (pid,) = _daemons(str(private_daemon))
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        exe = sparsecomp.compile(SCALE.format(factor=6.0), cache_results=False)
        np.testing.assert_allclose(exe(np.arange(3.0)), [0.0, 6.0, 12.0])
        assert daemon._unresponsive
        exe = sparsecomp.compile(SCALE.format(factor=7.0), cache_results=False)
        np.testing.assert_allclose(exe(np.arange(3.0)), [0.0, 7.0, 14.0])
        assert time.monotonic() - started < 120
    finally:
        os.kill(pid, signal.SIGCONT)


def _counting_exchange(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The jobs sent to the daemon from now on (still sent: the real exchange runs)."""
    sent: list[dict] = []
    real = daemon.exchange

    def counted(job, progress=None):
        sent.append(job)
        return real(job, progress)

    monkeypatch.setattr(daemon, "exchange", counted)
    return sent


def test_a_prefetched_build_is_the_one_compile_takes(
    private_daemon: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``server.prefetch`` sends the job before the driver asks; ``compile`` of the same
    text and target takes its answer and files (one job in all, no directory left)."""
    from sparsecomp import knobs
    from sparsecomp.compiler import server
    from sparsecomp.targets import detect_host

    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))  # no other test's builds
    sent = _counting_exchange(monkeypatch)
    text = SCALE.format(factor=6.0)
    server.prefetch(text, "<source>", detect_host(), {}, None)
    exe = sparsecomp.compile(text, cache_results=False)
    np.testing.assert_array_equal(exe(np.arange(4.0)), 6.0 * np.arange(4.0))
    assert len(sent) == 1
    builds = {p for p in (knobs.cache_dir() / "kernels").glob(".build-*")}
    assert builds == {exe.directory}  # the prefetch's own directory is gone


def test_a_prefetch_of_another_job_is_dropped(
    private_daemon: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefetched job that is not the build asked for (other text, other options) is
    not used: the build is its own, and the prefetch's directory goes."""
    from sparsecomp import knobs
    from sparsecomp.compiler import server
    from sparsecomp.targets import detect_host

    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))  # no other test's builds
    sent = _counting_exchange(monkeypatch)
    server.prefetch(SCALE.format(factor=7.0), "<source>", detect_host(), {}, None)
    exe = sparsecomp.compile(SCALE.format(factor=8.0), cache_results=False)
    np.testing.assert_array_equal(exe(np.arange(4.0)), 8.0 * np.arange(4.0))
    assert len(sent) == 2
    deadline = time.monotonic() + 60
    kernels = knobs.cache_dir() / "kernels"
    while set(kernels.glob(".build-*")) != {exe.directory} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(kernels.glob(".build-*")) == {exe.directory}


def test_sparsecomp_compile_sends_its_job_before_importing_the_driver(
    private_daemon: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The command line's build of a file for the host is one job, sent from the
    prefetch; a second run finds it cached and sends none."""
    from sparsecomp.compiler import server
    from sparsecomp.tools import compile as tool

    sent = _counting_exchange(monkeypatch)
    prefetched: list[str] = []
    real = server.prefetch
    monkeypatch.setattr(server, "prefetch", lambda *a: (prefetched.append(a[1]), real(*a)))
    source = tmp_path / "scale.mlir"
    source.write_text(SCALE.format(factor=9.0))
    assert tool.main([str(source), "-o", str(tmp_path / "out")]) == 0
    assert prefetched == [str(source)]
    assert len(sent) == 1
    assert tool.main([str(source), "-o", str(tmp_path / "again")]) == 0
    assert len(prefetched) == 1
    assert len(sent) == 1
    exe = sparsecomp.load(tmp_path / "again")
    np.testing.assert_array_equal(exe(np.arange(3.0)), 9.0 * np.arange(3.0))
    capsys.readouterr()
