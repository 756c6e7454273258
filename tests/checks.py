"""Runs a test script's `test_*` functions in order, each failure reported and the run going on; the exit status is
1 when any failed. What tests/template_permissions.py and tests/sign_up_check.py run their checks with."""

import traceback


def run(namespace):
    """The `test_*` callables of `namespace` (a script's `globals()`), run; returns the exit status."""
    tests = [(name, f) for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, test in tests:
        try:
            test()
        except Exception:  # noqa: BLE001 - every failure is reported, the run goes on
            failed += 1
            print(f"FAILED {name}")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok     {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
