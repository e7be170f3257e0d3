"""The benchmark harness: rounds, paired ratios, the table (no timings are asserted)."""

import pytest

from benchmarks.harness import Case, run_case, table


def test_ratio_is_the_median_of_per_round_ratios():
    # Round 3 was slow for both: the ratio of medians (2.0) would keep that drift.
    c = Case("x", "small", samples={"mdtensor": [1.0, 2.0, 10.0], "numpy": [1.0, 1.0, 10.0]})
    assert c.ratio("mdtensor", "numpy") == 1.0
    assert c.ratio("mdtensor", "torch") is None  # not measured
    assert c.ratio("torch", "numpy") is None


def test_run_case_records_one_sample_per_round_and_reports_failures():
    calls = {"numpy": 0, "mdtensor": 0}

    def counting(name):
        def fn():
            calls[name] += 1
        return fn

    def broken():
        raise ValueError("no such op")

    c = Case("x", "small", impls={"numpy": counting("numpy"), "mdtensor": counting("mdtensor"),
                                  "torch": broken})
    run_case(c, repeats=4, target=1e-4)
    assert set(c.samples) == {"numpy", "mdtensor"}
    assert all(len(v) == 4 and min(v) > 0 for v in c.samples.values())
    assert c.missing["torch"] == "error: ValueError: no such op"
    assert calls["numpy"] > 4 and calls["mdtensor"] > 4
    row = table([c]).splitlines()[2]
    assert row.startswith("| x |") and row.count("x |") >= 2  # md/numpy filled in


@pytest.mark.parametrize("missing", ["numpy", "mdtensor"])
def test_table_leaves_a_ratio_empty_when_a_side_is_missing(missing):
    samples = {"numpy": [1.0], "mdtensor": [2.0]}
    del samples[missing]
    c = Case("x", "small", samples=samples,
             medians={k: v[0] for k, v in samples.items()})
    row = table([c]).splitlines()[2].split("|")
    assert row[-4:-1] == ["  ", "  ", "  "]


def test_a_case_sync_runs_after_every_timed_loop_inside_the_timing():
    # Note [Timing asynchronous devices]: each loop's time includes the wait for the device.
    import time

    calls, loops = [0], []

    def fn():
        calls[0] += 1

    def sync():  # a device still busy for 2 ms with what the loop queued
        loops.append(calls[0])
        calls[0] = 0
        time.sleep(0.002)

    c = Case("x", "gpu", impls={"mdtensor": fn}, sync=sync)
    run_case(c, repeats=3, target=1e-4)
    timed = loops[-3:]  # the rounds' loops (the first ones calibrated)
    assert len(loops) > 3 and calls[0] == 0  # no call left outside a synchronised loop
    for n, per_call in zip(timed, c.samples["mdtensor"]):
        assert per_call * n >= 0.002  # the wait is inside the timed region


def test_the_sweep_times_catalogue_ops_against_their_pytorch_call():
    # benchmarks/sweep.py: one row per op, md and backend times, PyTorch's where the
    # differential table's call takes the sample (Note [The sweep's PyTorch calls]).
    from benchmarks import sweep

    rows = sweep.run_sweep(repeats=2, target=1e-4, only="sigmoid")
    by_name = {r.name: r for r in rows}
    assert {"sigmoid", "sigmoid_backward"} <= set(by_name)
    row = by_name["sigmoid"]
    assert row.sample == "float32"
    assert {"mdtensor", "backend"} <= set(row.plain.medians)
    assert row.grad is not None and "mdtensor" in row.grad.medians
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        assert "torch" in row.plain.medians and "torch" in row.grad.medians
    text = sweep.report(rows)
    assert "| sigmoid | float32 |" in text and "median md/torch:" in text
    assert set(sweep.record(rows)) == set(by_name)


def test_the_sweep_target_excuses_a_slow_backend_call_only_within_the_slack():
    from benchmarks import sweep

    def row(md, torch, backend):
        case = Case("x", "sweep", samples={"mdtensor": [md], "torch": [torch]},
                    medians={"mdtensor": md, "torch": torch, "backend": backend})
        return sweep.OpRow("x", "float32", case)

    assert not row(1.1e-6, 1e-6, 0.5e-6).over_target(False)  # within 1.2x
    assert row(3e-6, 1e-6, 0.5e-6).over_target(False)  # NumPy is not the reason
    assert not row(3e-6, 1e-6, 2.5e-6).over_target(False)  # NumPy slower; md adds 0.5 us
    assert row(4e-6, 1e-6, 2.5e-6).over_target(False)  # ... but 1.5 us is too much
    # a backend call slower than mdtensor's own is not what mdtensor runs: no excuse
    assert row(2e-6, 1e-6, 20e-6).over_target(False)


def test_the_sweep_target_with_grad_measures_against_the_plain_backend_call():
    # The grad case times no backend call (NumPy records nothing): the plain case's call
    # stands for it, with the 1.6 us slack of recording.
    from benchmarks import sweep

    def row(md_grad, torch_grad, backend):
        plain = Case("x", "sweep", samples={"mdtensor": [3e-6], "torch": [3e-6]},
                     medians={"mdtensor": 3e-6, "torch": 3e-6, "backend": backend})
        grad = Case("x (grad)", "sweep", samples={"mdtensor": [md_grad], "torch": [torch_grad]},
                    medians={"mdtensor": md_grad, "torch": torch_grad})
        return sweep.OpRow("x", "float32", plain, grad)

    assert not row(3.5e-6, 1e-6, 2.5e-6).over_target(True)  # NumPy slower; md adds 1 us
    assert row(4.5e-6, 1e-6, 2.5e-6).over_target(True)  # ... but 2 us is too much
    assert row(3.5e-6, 1e-6, 0.5e-6).over_target(True)  # NumPy is not the reason
