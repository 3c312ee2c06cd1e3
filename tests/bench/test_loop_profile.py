"""bench/loop_profile.py: a sample of the event loop goes to the phase of its innermost telling frame."""

from __future__ import annotations

from bench.loop_profile import OTHER, main_thread_phases, phase_of, table

OUTER = [
    "main (service/processes.py:201)",
    "Runner.run (asyncio/runners.py:118)",
    "EdgeMiddleware.__call__ (service/http/middleware.py:90)",
]


def test_the_innermost_telling_frame_names_the_phase():
    preprocess = [*OUTER, "run_phases (service/phases.py:60)", "find_digit (service/inputs/preprocess.py:270)", "median (numpy/lib/x.py:1)"]
    assert phase_of(preprocess) == "decoding and preprocessing"  # numpy says nothing: its caller does
    assert phase_of([*OUTER, "digit_answer (service/postprocess.py:140)", "encode_png (service/inputs/images.py:120)"]) == (
        "building the answer"
    )
    sending = [
        *OUTER,
        "send_wrapper (service/http/middleware.py:120)",
        "RequestResponseCycle.send (uvicorn/protocols/http/httptools_impl.py:500)",
    ]
    assert phase_of(sending) == "sending the response"  # not the middleware that wraps it
    assert (
        phase_of([*OUTER, "solve_dependencies (fastapi/dependencies/utils.py:600)"]) == "the framework: routing, dependencies, validation"
    )
    assert phase_of(["somewhere (elsewhere.py:1)"]) == OTHER


def test_only_the_main_threads_samples_count_and_the_table_shares_the_loops_time():
    raw = "\n".join(
        [
            "thread (1): MainThread;" + ";".join([*OUTER, "encode_png (service/inputs/images.py:120)"]) + " 5",
            "thread (1): MainThread;" + ";".join([*OUTER, "digit_answer (service/postprocess.py:140)"]) + " 5",
            "thread (1): MainThread;" + ";".join([*OUTER, "find_digit (service/inputs/preprocess.py:270)"]) + " 30",
            "thread (1): MainThread;" + ";".join([*OUTER, "solve_dependencies (fastapi/dependencies/utils.py:600)"]) + " 10",
            "thread (2): capsnet-infer-0;run (onnxruntime/session.py:200) 500",
        ]
    )
    counts = main_thread_phases(raw)
    assert sum(counts.values()) == 50
    rows = {r["phase"]: r for r in table(counts, loop_ms=1.0)}
    assert rows["decoding and preprocessing"] == {"phase": "decoding and preprocessing", "share": 0.6, "ms_per_request": 0.6}
    assert rows["building the answer"]["share"] == 0.2 and rows["the framework: routing, dependencies, validation"]["ms_per_request"] == 0.2
    assert len(table(counts, 1.0)) == len(rows) == 3, "a phase is one row, however many rules name it"
