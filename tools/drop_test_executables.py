#!/usr/bin/env python3
"""Removes the test executables of one `cargo test` selection once they have run, to keep `make test` within the
disk a CI machine has.

Each integration test of the workspace is its own executable that links every dependency, about 50 MB apiece and
3 GB in all, and `make test` builds more after them (the suites' local runs, with other features). The tests'
libraries stay, so the next `make test` only links the executables again.

Usage: tools/drop_test_executables.py CARGO_TEST_ARGS...  (the same arguments the tests ran with)
"""
import json
import os
import subprocess
import sys


def main() -> int:
    # Everything is built already, so this builds nothing: cargo only lists the artifacts it would run.
    listing = subprocess.run(
        ["cargo", "test", *sys.argv[1:], "--no-run", "--quiet", "--message-format=json"],
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    )
    dropped, freed = 0, 0
    for line in listing.stdout.splitlines():
        message = json.loads(line)
        executable = message.get("executable")
        if message.get("reason") != "compiler-artifact" or not executable or not message["profile"]["test"]:
            continue
        if os.path.exists(executable):
            freed += os.path.getsize(executable)
            os.remove(executable)
            dropped += 1
    print(f"dropped {dropped} test executables ({freed / 2**30:.1f} GiB) that have run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
