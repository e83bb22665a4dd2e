"""Entry script for `spark-submit`, for clusters:

    SUBMIT=$(python -c 'import spark.submit; print(spark.submit.__file__)')
    spark-submit --master spark://host:7077 "$SUBMIT" ingest \
        --output s3a://lake --checkpoint s3a://lake/_checkpoint --available-now

The driver and every executor need busbar installed (`pip install 'busbar[spark]'`):
the data source class is pickled by reference, so executors import it from the `spark`
package (plus app.codec, msgpack, redis, pyarrow). `--py-files` with a zip of app/,
config/ and spark/ works too when msgpack, redis and pyarrow are already there.
"""

from __future__ import annotations

import sys
from pathlib import Path


def run(argv: list[str]) -> int:
    # spark-submit puts this script's directory first on sys.path, where spark/'s modules
    # would shadow top-level names; the installed package must be found instead.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from spark.cli import main

    return main(argv)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
