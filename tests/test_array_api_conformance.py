"""tools/array_api_conformance.py: the runner of the official suite (the suite itself is
not part of the repository, nor fetched by CI: these tests cover the runner)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "tools" / "array_api_conformance.py"
_spec = importlib.util.spec_from_file_location("array_api_conformance", _PATH)
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)


def test_summary_reads_pytests_last_line():
    log = ("FAILED array_api_tests/test_linalg.py::test_pinv - TypeError\n"
           "== 2 failed, 1377 passed, 5 skipped, 1 xfailed, 93 warnings in 287.36s ==\n")
    assert conformance._summary(log) == {"passed": 1377, "failed": 2, "skipped": 5,
                                         "xfailed": 1, "xpassed": 0, "error": 0}
    assert conformance._summary("ImportError while loading conftest")["error"] == 1
    assert conformance._summary("== 3 errors in 1.0s ==")["error"] == 3


def test_the_probe_finds_the_backends_that_load():
    found = conformance._backends(sys.executable)
    assert found["cpu"] is None
    import mdtensor as md

    installed = {r["device_type"] for r in md.backends.available() if r["installed"]}
    assert set(found) == installed


def test_a_folder_that_is_no_checkout_of_the_suite_is_refused(tmp_path, capsys):
    assert conformance.main([str(tmp_path)]) == 2
    assert "is not a checkout of data-apis/array-api-tests" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--max-examples", "x"], []])
def test_bad_arguments_exit_with_argparses_message(argv, capsys):
    with pytest.raises(SystemExit) as e:
        conformance.main(argv)
    assert e.value.code == 2
