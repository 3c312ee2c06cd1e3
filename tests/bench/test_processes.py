"""bench/processes.py: which process counts a host is measured at, the CPU of a supervisor and its workers read
together, and the table BENCHMARKS.md gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench import processes
from bench.report import render
from harness.server import children, group_cpu_seconds, process_cpu_seconds


def test_a_host_of_16_cores_is_also_measured_at_8_processes():
    assert processes.counts(2) == (1, 2)
    assert processes.counts(16) == (1, 2, 8)


def test_the_cpu_of_a_group_counts_the_processes_it_started():
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(30)"]
    )
    try:
        while process_cpu_seconds(busy.pid) < 0.4:
            time.sleep(0.05)
        assert busy.pid in children(os.getpid())
        me, kid = process_cpu_seconds(os.getpid()), process_cpu_seconds(busy.pid)
        assert round(group_cpu_seconds(os.getpid()), 2) >= round(me + kid, 2)  # read later: at least as much, in clock ticks
    finally:
        busy.kill()
        busy.wait()


def test_the_table_has_a_row_for_each_count_and_client_count(tmp_path):
    row = {
        "requests_per_s": 400.0,
        "p50_ms": 9.0,
        "p99_ms": 20.0,
        "errors": 0,
        "cpu_ms_per_request": 4.0,
        "in_process_images_per_s": 900.0,
        "ratio": 0.444,
    }
    data = {
        "cores": 2,
        "in_process_batch": 32,
        "duration_s": 6.0,
        "processes": {"1": [{"clients": 16, **row}], "2": [{"clients": 1, **row}]},
    }
    (tmp_path / "processes.json").write_text(json.dumps(data))
    text = render(tmp_path)
    assert "## One process against several behind the port" in text
    assert "| 1 | 16 | 400.0 | 9.0 | 20.0 | 4.0 | 900.0 | 0.444 | 0 |" in text
    assert "| 2 | 1 | 400.0 |" in text
