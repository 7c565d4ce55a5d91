#!/bin/sh
# lint.sh - the project's cheap style checks: every source file starts with a
# comment saying what it is, and stays under the size budget (800 lines).
status=0
for f in $(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null); do
    first=$(grep -v '^[[:space:]]*$' "$f" | head -n 1)
    case "$first" in
    "/*"*|"//"*) ;;
    *) echo "lint: $f does not start with a comment"; status=1 ;;
    esac
    lines=$(wc -l < "$f")
    if [ "$lines" -gt 800 ]; then
        echo "lint: $f has $lines lines (budget 800)"
        status=1
    fi
done
[ $status -eq 0 ] && echo "lint: ok"
exit $status
