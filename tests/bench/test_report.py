"""BENCHMARKS.md states the issue's targets with the arithmetic from the measured tables."""

from __future__ import annotations

import json

from bench.report import render


def _write(results, ort: list[dict], fp32_service: dict) -> None:
    """model.json with these onnxruntime rows and service.json with this FP32 section, as `python -m bench` writes them."""
    (results / "model.json").write_text(
        json.dumps({"macs_per_image": {}, "gflop_per_image": 0.41, "onnxruntime": ort, "pytorch_eager": None, "decoder_batch1_ms": 0.2})
    )
    (results / "service.json").write_text(json.dumps({"duration_s": 1, "precisions": {"fp32": fp32_service}}))


def test_targets_are_computed_from_the_results(tmp_path):
    ort = [
        {"batch": b, "latency_ms": ms, "images_per_s": ips, "gflops": 1, "fraction_of_roofline": f}
        for b, ms, ips, f in [(1, 1.5, 650.0, 0.68), (16, 21.0, 760.0, 0.8), (32, 42.0, 750.0, 0.79)]
    ]

    def row(c, rps, p50):
        return {
            "concurrency": c,
            "requests": 10,
            "throughput_rps": rps,
            "p50_ms": p50,
            "p95_ms": p50,
            "p99_ms": p50,
            "errors": 0,
        }

    _write(
        tmp_path,
        ort,
        {
            "endpoints": {
                "/predict": [row(1, 300.0, 3.5), row(16, 456.0, 35.0)],
                "/reconstruct": [row(1, 1500.0, 0.6), row(16, 1800.0, 8.0)],
            }
        },
    )
    md = render(tmp_path)
    assert "| service at 16 clients / best in-process images/s | fp32 | >= 0.6 | 456.0 / 760.0 = 0.60 |" in md
    assert "3.5 - 1.5 = 2.00 ms" in md
    assert "| model at batch >= 16, fraction of the GEMM roofline | fp32 | >= 0.6 | 0.79 |" in md
    assert "| 16 | 10 | 456.0 | 0.6 | 35.0 |" in md  # the /predict table's own ratio column


def test_paired_rounds_give_their_own_ratios_and_median(tmp_path):
    ort = [{"batch": b, "latency_ms": 1.0, "images_per_s": 1000.0, "gflops": 1, "fraction_of_roofline": 0.8} for b in (1, 32)]
    row = lambda c, rps: {"concurrency": c, "requests": 10, "throughput_rps": rps, "p50_ms": 3.0, "p95_ms": 3, "p99_ms": 3, "errors": 0}  # noqa: E731
    paired = [
        {
            "in_process_before": a,
            "in_process_after": b,
            "in_process_images_per_s": (a + b) / 2,
            "service_rps": s,
            "errors": 0,
            "p50_ms": 20.0,
            "ratio": round(s / ((a + b) / 2), 3),
        }
        for a, b, s in [(1500.0, 1300.0, 840.0), (1300.0, 1100.0, 780.0), (1100.0, 1500.0, 770.0)]
    ]
    _write(tmp_path, ort, {"paired": paired, "endpoints": {"/predict": [row(1, 300.0), row(16, 800.0)], "/reconstruct": [row(1, 1500.0)]}})
    md = render(tmp_path)
    # 840/1400 = 0.60, 780/1200 = 0.65, 770/1300 = 0.59: the median is the middle one, not the mean
    assert "| fp32 | >= 0.6 | 0.60, 0.65, 0.59 (median 0.60) |" in md
    assert "| 2 | 1300.0 | 1100.0 | 780.0 | 0.65 | 20.0 | 0 |" in md  # round 2 divided by the mean of the runs around it


def test_paired_rounds_set_the_protocols_path_and_the_one_thread_model_beside_predict(tmp_path):
    ort = [{"batch": b, "latency_ms": 1.0, "images_per_s": 1000.0, "gflops": 1, "fraction_of_roofline": 0.8} for b in (1, 32)]
    row = lambda c, rps: {"concurrency": c, "requests": 10, "throughput_rps": rps, "p50_ms": 3.0, "p95_ms": 3, "p99_ms": 3, "errors": 0}  # noqa: E731

    def run(service_rps: float, both: float, one: float) -> dict:
        return {
            "in_process_batch": 8,
            "in_process_before": both,
            "in_process_after": both,
            "in_process_images_per_s": both,
            "one_thread_images_per_s": one,
            "service_rps": service_rps,
            "errors": 0,
            "p50_ms": 25.0,
            "ratio": round(service_rps / both, 3),
            "ratio_one_thread": round(service_rps / one, 3),
        }

    paired = [{**run(predict, 1000.0, 600.0), "v2": run(v2, 1000.0, 600.0)} for predict, v2 in ((500.0, 520.0), (540.0, 480.0))]
    _write(tmp_path, ort, {"paired": paired, "endpoints": {"/predict": [row(1, 300.0), row(16, 500.0)], "/reconstruct": [row(1, 1500.0)]}})
    md = render(tmp_path)
    assert "| fp32 | >= 0.6 | 0.50, 0.54 (median 0.52) |" in md
    assert "| the same for /v2 with binary tensors, which does no image work | fp32 |  | 0.52, 0.48 (median 0.50) |" in md
    assert "over the model in process on one thread (what a batch under load runs on) | fp32 |  | 0.83, 0.90 |" in md
    assert "| 1 | /v2 capsnet, binary tensors | 1000.0 | 600.0 | 520.0 | 0.52 | 0.867 | 25.0 | 0 |" in md
    assert "| 2 | /predict, 28x28 PNG upload | 1000.0 | 600.0 | 540.0 | 0.54 | 0.9 | 25.0 | 0 |" in md


def test_the_ceiling_of_the_paired_ratio_is_the_model_cpu_over_the_least_a_request_can_cost(tmp_path):
    """On 2 cores, in-process at 500 images/s is 4.0 ms of CPU an image; a /predict whose model costs 3.6 ms and whose
    HTTP costs what a GET that does nothing costs (0.35 + 0.05 ms) can reach at best 4.0 / 4.0 = 1.00 of it; with the
    /predict loop's own 1.05 ms, 4.0 / 4.7 = 0.85."""
    ort = [{"batch": b, "latency_ms": 1.0, "images_per_s": 500.0, "gflops": 1, "fraction_of_roofline": 0.8} for b in (1, 32)]
    cpu = {"event_loop_ms": 1.05, "other_threads_ms": 3.6, "client_ms": 0.05, "machine_busy_fraction": 0.95}

    def row(c, rps):
        return {
            "concurrency": c,
            "requests": 10,
            "throughput_rps": rps,
            "p50_ms": 3.0,
            "p95_ms": 3,
            "p99_ms": 3,
            "errors": 0,
            "cpu": cpu,
        }

    paired = [
        {
            "in_process_before": 500.0,
            "in_process_after": 500.0,
            "in_process_images_per_s": 500.0,
            "service_rps": 400.0,
            "errors": 0,
            "p50_ms": 20.0,
            "ratio": 0.8,
        }
    ]
    floor = {"path": "/healthz", "cpu": {"event_loop_ms": 0.35, "other_threads_ms": 0.0, "client_ms": 0.05}}
    service = {
        "paired": paired,
        "floor": floor,
        "endpoints": {"/predict": [row(1, 300.0), row(16, 400.0)], "/reconstruct": [row(1, 1500.0)]},
    }
    _write(tmp_path, ort, service)
    (tmp_path / "service.json").write_text(json.dumps({"duration_s": 1, "cores": 2, "precisions": {"fp32": service}}))
    md = render(tmp_path)
    assert "ceiling of that ratio on 2 cores" in md
    assert "| fp32 |  | 4.00 / (3.6 + 0.35 + 0.05) = 1.00 (with the /predict loop's 1.05 ms: 0.85) |" in md
    _write(tmp_path, ort, service)  # results written without the machine's core count
    assert "ceiling" not in render(tmp_path)
    (tmp_path / "service.json").write_text(
        json.dumps({"duration_s": 1, "cores": 2, "precisions": {"fp32": {k: v for k, v in service.items() if k != "floor"}}})
    )  # results from before the floor was measured
    assert "ceiling" not in render(tmp_path)


def test_profile_tables_for_each_model_file(tmp_path):
    def rows(op):
        return [
            {"op": op, "share": 0.7, "ms_per_run": 7.0, "nodes": 2},
            {"op": "FusedMatMul", "share": 0.3, "ms_per_run": 3.0, "nodes": 6},
        ]

    (tmp_path / "profile.json").write_text(
        json.dumps(
            {
                "file": "capsnet.onnx",
                "batch": 32,
                "runs": 10,
                "total_ms_per_run": 10.0,
                "by_op": rows("Conv"),
                "int8": {"file": "capsnet-int8.onnx", "batch": 32, "runs": 10, "total_ms_per_run": 5.0, "by_op": rows("QLinearConv")},
            }
        )
    )
    md = render(tmp_path)
    assert "`capsnet.onnx`: 10.0 ms a run" in md and "`capsnet-int8.onnx`: 5.0 ms a run" in md
    assert "| QLinearConv | 70.0% | 7.0 | 2 |" in md and "| Conv | 70.0% | 7.0 | 2 |" in md


def _load_row(server: str, clients: int, rps: float) -> dict:
    return {"server": server, "concurrency": clients, "throughput_rps": rps, "p50_ms": 3.0, "p99_ms": 5.0, "errors": 0}


def test_the_protocol_against_triton_states_the_ratio_per_client_count(tmp_path):
    measured = [("capsnet-serve", 4, 450.0), ("triton", 4, 300.0)]
    rows = [{**_load_row(s, c, rps), "server_cpu_ms_per_inference": 3.5} for s, c, rps in measured]
    (tmp_path / "triton.json").write_text(json.dumps({"duration_s": 8, "model_file": "capsnet.onnx (FP32)", "rows": rows}))
    md = render(tmp_path)
    assert "## The Open Inference Protocol: ours against Triton's front" in md
    assert "| 4 | capsnet-serve | 450.0 | 3.0 | 5.0 | 0 | 3.5 | 1.5 |" in md and "| 4 | triton | 300.0 |" in md


def test_a_part_that_could_not_run_is_left_out_not_rendered_empty(tmp_path):
    (tmp_path / "triton.json").write_text(json.dumps({"skipped": "the Triton venv is not set up"}))
    (tmp_path / "edge.json").write_text(json.dumps({"skipped": "haproxy is not installed"}))
    md = render(tmp_path)
    assert "Triton's front" not in md and "## The edge" not in md


def test_the_edge_table_lists_each_round_and_path(tmp_path):
    rows = [{"round": 0, **_load_row("", 16, rps), "path": p} for p, rps in [("direct", 570.0), ("edge", 555.0)]]
    (tmp_path / "edge.json").write_text(json.dumps({"duration_s": 8, "rounds": 1, "rows": rows}))
    md = render(tmp_path)
    assert "| 0 | 16 | direct | 570.0 | 3.0 | 5.0 | 0 |" in md and "| 0 | 16 | edge | 555.0 | 3.0 | 5.0 | 0 |" in md


def test_the_edge_under_attack_is_a_table_of_its_own_with_what_the_attack_held(tmp_path):
    rows = [{"round": 0, **_load_row("", 1, 270.0), "path": "edge"}]
    cpu = {"service_cpu_s": 7.5, "edge_cpu_s": 0.4, "attack_cpu_s": 1.2}
    attack_rows = [{"round": 0, **_load_row("", 1, rps), "attack": a, **cpu} for a, rps in [("none", 270.0), ("slow clients", 240.0)]]
    attack = {"connections_held": 3040, "cut_by_the_server": 6120}
    (tmp_path / "edge.json").write_text(
        json.dumps({"duration_s": 8, "rounds": 1, "rows": rows, "attack": attack, "attack_rows": attack_rows})
    )
    md = render(tmp_path)
    assert "slow clients hold 3,040 connections" in md and "6,120 cut in all" in md
    assert "| 0 | 1 | none | 270.0 | 3.0 | 5.0 | 0 | 7.5 | 0.4 | 1.2 |" in md and "| 0 | 1 | slow clients | 240.0 | 3.0 | 5.0 | 0 |" in md


def test_the_container_table_gives_size_and_each_build(tmp_path):
    row = {"image": "cpu", "size_mb": 749.1, "cold_build_s": 42.0, "warm_build_s": 0.9, "code_change_build_s": 3.1, "run_to_ready_s": 2.5}
    data = {"engine": "podman 4.3.1", "base_images_mb": {"python:3.11-slim-bookworm": 225.0}, "rows": [row]}
    (tmp_path / "containers.json").write_text(json.dumps(data))
    md = render(tmp_path)
    assert "| cpu | 749.1 | 42.0 | 0.9 | 3.1 | 2.5 |" in md and "podman 4.3.1" in md and "python:3.11-slim-bookworm 225.0" in md
    (tmp_path / "containers.json").write_text(json.dumps({"skipped": "no container engine"}))
    assert "## Container images" not in render(tmp_path)


def test_the_two_digit_network_has_its_rows(tmp_path):
    data = {
        "model": "6ep-1a2b3c4d",
        "both_right": 0.8412,
        "committed": True,
        "duration_s": 8,
        "in_process": [{"batch": 1, "ms_per_call": 9.5, "images_per_s": 105.3}],
        "service": [{**_load_row("", 1, 40.0)}],
    }
    (tmp_path / "pairs.json").write_text(json.dumps(data))
    md = render(tmp_path)
    assert "## Two digits at once (multimnist.onnx, 6ep-1a2b3c4d)" in md
    assert "The committed export: both digits read right on 84.1% of the test pairs." in md
    assert "| 1 | 9.5 | 105.3 |" in md and "| 1 | 40.0 | 3.0 | 5.0 | 0 |" in md


def test_each_part_says_which_run_it_is_from(tmp_path):
    """`--only` keeps the other parts' figures: the header lists each part's machine and time, so a reader compares
    figures within one run."""
    rows = [{"round": 0, **_load_row("", 1, 270.0), "path": "edge"}]
    (tmp_path / "edge.json").write_text(
        json.dumps({"duration_s": 8, "rounds": 1, "rows": rows, "run": {"cpu": "AMD EPYC", "when": "2026-11-25"}})
    )
    (tmp_path / "triton.json").write_text(json.dumps({"duration_s": 8, "model_file": "capsnet.onnx (FP32)", "rows": []}))
    md = render(tmp_path)
    assert "| edge | AMD EPYC | 2026-11-25 |" in md and "| triton | not stamped |" in md


def test_grpc_against_rest_and_tracing_on_against_off_state_their_ratios(tmp_path):
    transports = [
        {"transport": t, **_load_row("", c, rps), "server_cpu_ms_per_request": 2.0}
        for t, c, rps in [("gRPC (raw contents)", 16, 600.0), ("REST /v2 (binary extension)", 16, 400.0), ("REST /v2 (JSON)", 16, 380.0)]
    ]
    traced = [
        {"round": 1, "tracing": k, **_load_row("", 16, rps), "server_cpu_ms_per_request": 3.0} for k, rps in [("off", 500.0), ("on", 450.0)]
    ]
    (tmp_path / "grpc.json").write_text(
        json.dumps(
            {
                "transports": {"duration_s": 3, "rows": transports},
                "tracing": {"duration_s": 3, "rounds": 1, "exporter": "otlp", "collector": {"exports": 4, "bytes": 1234}, "rows": traced},
            }
        )
    )
    md = render(tmp_path)
    assert "## The Open Inference Protocol over gRPC against REST /v2" in md and "## Tracing on against off (/predict)" in md
    assert "| 16 | gRPC (raw contents) | 600.0 | 3.0 | 5.0 | 0 | 2.0 | 1.5 |" in md
    assert "| 1 | 16 | on | 450.0 | 3.0 | 5.0 | 0 | 3.0 | 0.9 |" in md and "1,234 bytes" in md


def test_the_performance_docs_open_with_the_committed_results_summed_up():
    """docs/performance.md's table is written by `make bench` from bench/results: a figure there that is not the
    results' (a result re-measured, a hand edit) fails here until `make bench` (or `python -m bench --only ...`) writes
    it again."""
    from bench.report import summary, with_summary
    from tests.conftest import REPO

    doc = (REPO / "docs" / "performance.md").read_text()
    assert with_summary(doc, summary(REPO / "bench" / "results")) == doc


def test_the_summary_replaces_only_what_is_between_its_markers():
    from bench.report import SUMMARY_BEGIN, SUMMARY_END, with_summary

    doc = f"before\n{SUMMARY_BEGIN}\nold table\n{SUMMARY_END}\nafter\n"
    assert with_summary(doc, f"{SUMMARY_BEGIN}\nnew\n{SUMMARY_END}") == f"before\n{SUMMARY_BEGIN}\nnew\n{SUMMARY_END}\nafter\n"
