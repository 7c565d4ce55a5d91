"""The way every Python test file of the project ends: run the module's unittest
cases, print a SKIP line per skipped test and the `RESULT: P passed, F failed,
S skipped` line that make test's summary counts, exit 1 on a failure."""
import sys
import unittest


def main(verbosity=2):
    res = unittest.main(module="__main__", exit=False, verbosity=verbosity).result
    skipped = len(res.skipped)
    for t, why in res.skipped:
        print("SKIP %s: %s" % (t.id(), why))
    failed = len(res.failures) + len(res.errors)
    print("RESULT: %d passed, %d failed, %d skipped" % (res.testsRun - failed - skipped, failed, skipped))
    sys.exit(1 if failed else 0)
