"""A submission's kept sandbox (judges/sandbox/session.py) against the real bubblewrap, runner and
cgroups: what one case leaves is gone before the next, a sandbox that cannot be put back is
replaced, one that dies mid-run gives an outcome (never an exception) and is replaced, and every
kind of outcome is the one a sandbox of its own gives."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_judge_sandbox import PROGRAMS, submit, wait_final

from judges.cgroups.groups import detect
from judges.problems.polyomino.generator import generate_instance
from judges.sandbox.outcome import ACCEPTED, Limits, RunOutcome
from judges.sandbox.runner import Sandbox
from judges.sandbox.session import SessionPool
from judges.service.process import JudgeProcess, cgroup_missing

CGROUP_MISSING = cgroup_missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}"),
]

# One program, its behaviour chosen by its argument (the command may differ between a pool's
# runs; the mounted program may not).
PROBE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <string>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

static int count_lines(const char* path) {
    FILE* file = fopen(path, "r");
    if (!file) return -1;
    int lines = 0;
    for (int c; (c = fgetc(file)) != EOF;) lines += c == '\n';
    fclose(file);
    return lines;
}

static void litter() {
    // files, a directory nobody may enter, nested content, /tmp itself closed
    FILE* file = fopen("/tmp/left.txt", "w");
    fputs("from the last case\n", file);
    fclose(file);
    mkdir("/tmp/locked", 0700);
    mkdir("/tmp/locked/inner", 0700);
    FILE* inner = fopen("/tmp/locked/inner/deep.bin", "w");
    for (int i = 0; i < 1000; ++i) fputs("0123456789", inner);
    fclose(inner);
    chmod("/tmp/locked/inner", 0);
    chmod("/tmp/locked", 0);
    mkfifo("/tmp/fifo", 0600);
    symlink("/etc/passwd", "/tmp/link");
    // System V objects outlive their creator unless removed
    int shm = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
    if (shm >= 0) memset(shmat(shm, nullptr, 0), 7, 1 << 20);
    semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    // a process that would go on sleeping
    if (fork() == 0) {
        setsid();
        execl("/bin/sleep", "sleep", "300", (char*)nullptr);
        _exit(1);
    }
    chmod("/tmp", 0);
    puts("littered");
}

static void look() {
    struct stat tmp;
    stat("/tmp", &tmp);
    int entries = 0;
    if (DIR* dir = opendir("/tmp")) {
        while (struct dirent* entry = readdir(dir)) entries += entry->d_name[0] != '.';
        closedir(dir);
    }
    int processes = 0;
    if (DIR* proc = opendir("/proc")) {
        while (struct dirent* entry = readdir(proc)) {
            bool number = entry->d_name[0] >= '0' && entry->d_name[0] <= '9';
            processes += number && atoi(entry->d_name) != 1 && atoi(entry->d_name) != getpid();
        }
        closedir(proc);
    }
    struct mq_attr attr = {0, 4, 64, 0, {0}};
    mqd_t queue = mq_open("/kept", O_CREAT | O_RDWR, 0600, &attr);
    printf("tmp_mode=%o tmp_entries=%d shm=%d sem=%d msg=%d others=%d mqueue=%d\n",
           tmp.st_mode & 07777, entries, count_lines("/proc/sysvipc/shm") - 1,
           count_lines("/proc/sysvipc/sem") - 1, count_lines("/proc/sysvipc/msg") - 1, processes,
           queue != (mqd_t)-1);
}

static void nest(int depth) {
    std::string path = "/tmp";
    for (int i = 0; i < depth; ++i) {
        path += "/d";
        mkdir(path.c_str(), 0700);
    }
    puts("nested");
}

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "litter") litter();
    else if (mode == "look") look();
    else if (mode == "nest") nest(80);
    else if (mode == "echo") {
        char text[64] = {0};
        fgets(text, sizeof text, stdin);
        printf("echo %s", text);
    } else if (mode == "status") {  // what the program starts with: blocked, ignored signals
        FILE* status = fopen("/proc/self/status", "r");
        char line[256];
        while (fgets(line, sizeof line, status))
            if (!strncmp(line, "SigBlk", 6) || !strncmp(line, "SigIgn", 6)) fputs(line, stdout);
        fclose(status);
    } else if (mode == "exit3") return 3;
    else if (mode == "abort") abort();
    else if (mode == "spin") for (volatile unsigned long i = 0;; ++i) {}
    else if (mode == "sleep") sleep(60);
    else if (mode == "hog") {
        for (int i = 0; i < 64; ++i) memset(malloc(16 << 20), 1, 16 << 20);
        puts("survived");
    } else if (mode == "flood") for (;;) fputs("01234567890123456789\n", stdout);
    return 0;
}
"""

LIMITS = Limits(1, 2, 256 << 20, 16, 1 << 20, 8 << 20, address_space=False)


@pytest.fixture(scope="module")
def box() -> Iterator[dict]:
    scratch = Path(tempfile.mkdtemp(prefix="gtj-session-"))  # reachable by the sandbox user
    scratch.chmod(0o755)
    (scratch / "probe.cpp").write_text(PROBE)
    subprocess.run(
        ["g++", "-O1", "-o", str(scratch / "probe"), str(scratch / "probe.cpp"), "-lrt"],
        check=True,
    )
    bound = detect("auto")
    sandbox = Sandbox(scratch / "box", uid=64124, bound=bound)
    try:
        yield {
            "sandbox": sandbox,
            "scratch": scratch,
            "binds": [("ro", scratch / "probe", "/box/p")],
        }
    finally:
        sandbox.close()
        bound.close()
        subprocess.run(["rm", "-rf", str(scratch)], check=False)


def run(
    box: dict,
    runner: Sandbox | SessionPool,
    mode: str,
    stdin: bytes | None = None,
    limits: Limits = LIMITS,
) -> tuple[RunOutcome, str]:
    out, err = box["scratch"] / "out.txt", box["scratch"] / "err.txt"
    outcome = runner.execute(
        ["/box/p", mode], limits=limits, stdin=stdin, stdout=out, stderr=err, binds=box["binds"]
    )
    return outcome, out.read_text(errors="replace")


def test_nothing_a_case_leaves_reaches_the_next_one(box: dict) -> None:
    pool = SessionPool(box["sandbox"], box["binds"])
    try:
        _, before = run(box, pool, "look")
        littered, said = run(box, pool, "litter")
        assert littered.status == ACCEPTED and said == "littered\n"
        _, after = run(box, pool, "look")
        assert pool.started == 1  # the same sandbox all along
    finally:
        pool.close()
    # /tmp as it was, empty; no System V object, no process left; no POSIX queue can be made
    assert before == after, (before, after)
    assert "tmp_entries=0 shm=0 sem=0 msg=0 others=0 mqueue=0" in after


def test_a_sandbox_that_cannot_be_put_back_is_replaced(box: dict) -> None:
    pool = SessionPool(box["sandbox"], box["binds"])
    try:
        nested, said = run(box, pool, "nest")  # deeper than the runner removes
        assert nested.status == ACCEPTED and said == "nested\n"
        _, after = run(box, pool, "look")
        assert pool.started == 2
        assert "tmp_entries=0" in after
    finally:
        pool.close()


def test_a_sandbox_killed_during_a_run_gives_an_outcome_and_is_replaced(box: dict) -> None:
    pool = SessionPool(box["sandbox"], box["binds"])
    try:
        run(box, pool, "look")
        session = pool._idle[0]
        assert session._process is not None
        killer = threading.Timer(0.5, os.killpg, (session._process.pid, signal.SIGKILL))
        killer.start()
        killed, _ = run(box, pool, "sleep")
        killer.join()
        assert killed.status != ACCEPTED  # e.g. Signalled: never a crash of the judge
        again, said = run(box, pool, "echo", b"hello\n")
        assert again.status == ACCEPTED and said == "echo hello\n"
        assert pool.started == 2
    finally:
        pool.close()


@pytest.mark.parametrize("mode", ["echo", "status", "exit3", "abort", "spin", "hog", "flood"])
def test_every_outcome_is_the_one_a_sandbox_of_its_own_gives(box: dict, mode: str) -> None:
    limits = Limits(1, 2, 256 << 20, 16, 1 << 20, 8 << 20, address_space=False)
    pool = SessionPool(box["sandbox"], box["binds"])
    try:
        kept = [run(box, pool, mode, b"x\n", limits) for _ in range(2)]  # a used sandbox too
    finally:
        pool.close()
    own, own_output = run(box, box["sandbox"], mode, b"x\n", limits)
    for outcome, output in kept:
        assert (outcome.status, outcome.exit_code) == (own.status, own.exit_code), (outcome, own)
        if own.status == "Time Limit Exceeded":
            # Both bounds fire at the same CPU time (judges/sandbox/argv.py: RLIMIT_CPU's soft
            # limit, whose SIGXCPU, and the runner's own count of the tree's CPU, whose SIGKILL):
            # which lands first is the machine's timing, not the program's; the verdict is one.
            assert {outcome.signal, own.signal} <= {signal.SIGXCPU, signal.SIGKILL}, (outcome, own)
        else:
            assert outcome.signal == own.signal, (outcome, own)
        assert output[:200] == own_output[:200]
    if mode == "hog":
        assert own.status == "Memory Limit Exceeded"
        assert all(o.memory_bytes >= 200 << 20 for o, _ in kept)  # the run's own group's peak


def test_the_service_judges_alike_with_kept_sandboxes_and_a_sandbox_per_run(
    tmp_path: Path,
) -> None:
    """The same submissions through a judge keeping one sandbox per submission (the test mode
    `kept-sandbox`) and one as it ships, a sandbox per run: the same case records, and the
    kept one started one sandbox for the submission's four cases."""
    problem = tmp_path / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    for number in range(1, 5):
        (problem / "testdata" / f"{number}.in").write_text(generate_instance(33, number))
    (problem / "config.yaml").write_text(
        "time: 2s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: 4\n"
    )
    programs = {
        "shelf": (PROGRAMS / "shelf_packer.cpp").read_text(),
        "crash": "int main() { return *(volatile int*)0; }\n",
    }
    found = {}
    for mode, switches in (("kept", ("kept-sandbox",)), ("per-run", ())):
        args = ["--problems", str(tmp_path / "problems"), "--workers", "1"]
        with JudgeProcess(tmp_path / f"state-{mode}", *args, test_mode=switches) as judge:
            for name, code in programs.items():
                found[mode, name] = wait_final(judge.url, submit(judge.url, code))
    keep = ("ok", "status", "msg", "scoreRatio", "runStatus", "checkerExitCode", "outputSha256")
    for name in programs:
        kept, own = found["kept", name], found["per-run", name]
        assert kept["status"] == own["status"] == "done"
        assert kept["score"] == own["score"]
        assert [{k: c.get(k) for k in keep} for c in kept["cases"]] == [
            {k: c.get(k) for k in keep} for c in own["cases"]
        ]
        assert kept["timing"]["keptSandboxes"] == 1
        assert own["timing"]["keptSandboxes"] == 0
    assert found["kept", "shelf"]["score"] > 10
    assert {c["runStatus"] for c in found["kept", "crash"]["cases"]} == {"Signalled"}
