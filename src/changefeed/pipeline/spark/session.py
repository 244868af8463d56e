"""The one place a SparkSession is made.

Defaults are for the embedded mode: ``local[*]`` master, Python workers running this very
interpreter, loopback networking, small shuffles. ``CHANGEFEED_SPARK_MASTER`` (or an explicit
``master``) points the pipeline at a cluster instead. Our Python data sources are registered on
every session this returns.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed import exceptions
from changefeed.exceptions import ChangefeedError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
LOG4J2 = Path(__file__).with_name("log4j2.properties").as_uri()

DEFAULT_MASTER = "local[*]"
#: Shuffle partitions for our small per-batch shuffles; Spark's default of 200 costs ~0.2 s a batch.
DEFAULT_SHUFFLE_PARTITIONS = 4
#: ``CHANGEFEED_COMPILE_HUGE_METHODS``: "1" (the default) lets HotSpot JIT-compile generated methods
#: past its 8,000-byte limit (a CockroachDB row with its before image renders ~30% faster);
#: "0" keeps the limit (continuous `changefeed run`: compiling them mid-stream costs latency).
COMPILE_HUGE_METHODS = "CHANGEFEED_COMPILE_HUGE_METHODS"


def _jit_options() -> str:
    on = os.environ.get(COMPILE_HUGE_METHODS, "1").strip().lower() not in ("0", "false", "no", "off")
    return "-XX:-DontCompileHugeMethods" if on else ""


def _prepare_environment() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    if "SPARK_HOME" not in os.environ:
        home = _spark_home()
        if home is not None:
            os.environ["SPARK_HOME"] = str(home)


def _spark_home() -> Path | None:
    """A Spark home for the pip-installed PySpark whose Python workers import its compiled modules.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python process's path (task
    workers, the planner workers of Python data sources, a streaming source's runner). Python
    cannot cache compiled modules inside a zip, so each of those processes compiled PySpark from
    source: about a second of CPU each, paid again at every streaming query's start. This home
    links the installed PySpark's ``bin``, ``jars`` and ``sbin`` and has no zips, so the processes
    import the installed package, the very same version, from its ``.pyc`` files. Made once per
    PySpark installation under the user's cache directory; None when it cannot be made (Spark
    then uses the installed PySpark's own home)."""
    try:
        import pyspark
    except ImportError:
        return None
    real = Path(pyspark.__file__).resolve().parent
    if not (real / "jars").is_dir() or not (real / "bin").is_dir():
        return None
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError:  # no home directory
        return None
    digest = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    home = cache / "changefeed" / f"spark-home-{pyspark.__version__}-{digest}"
    if (home / "jars").is_dir():
        return home
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
        for name in ("bin", "jars", "sbin"):
            if (real / name).exists():
                (tmp / name).symlink_to(real / name, target_is_directory=True)
        (tmp / "python" / "lib").mkdir(parents=True)
        try:
            tmp.rename(home)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        return None
    return home if (home / "jars").is_dir() else None


def get_spark(app_name: str = "changefeed", master: str | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use, with our sources registered."""
    with _lock:
        _prepare_environment()
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            register_sources(active)
            return active
        builder = (
            SparkSession.builder.appName(app_name)
            .master(master or os.environ.get("CHANGEFEED_SPARK_MASTER", DEFAULT_MASTER))
            .config("spark.sql.shuffle.partitions", str(DEFAULT_SHUFFLE_PARTITIONS))
            .config("spark.default.parallelism", str(max(2, os.cpu_count() or 2)))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
            .config("spark.driver.memory", os.environ.get("CHANGEFEED_SPARK_DRIVER_MEMORY", "2g"))
            .config("spark.python.worker.reuse", "true")
            # workers import PySpark's compiled modules, not its zip's sources (spark_daemon.py)
            .config("spark.python.daemon.module", "changefeed.pipeline.spark.daemon")
            # A Python worker forked while both cores are busy can take longer than the default
            # 15 s to connect back to the JVM ("Python worker failed to connect back").
            .config("spark.python.authenticate.socketTimeout", "120s")
            .config("spark.sql.adaptive.enabled", "false")
            # Shuffles stay on this machine's disk: compressing them costs CPU and saves nothing.
            .config("spark.shuffle.compress", os.environ.get("CHANGEFEED_SHUFFLE_COMPRESS", "false"))
            # Generated code for wide encoders (a CockroachDB row with its before image) has methods
            # over HotSpot's 8,000-byte JIT limit; interpreted, they run much slower.
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2} {_jit_options()}")
            .config("spark.executor.extraJavaOptions", _jit_options())
        )
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("CHANGEFEED_SPARK_LOG_LEVEL", "ERROR"))
        register_sources(spark)
        return spark


_registered: set[int] = set()


def register_sources(spark: SparkSession) -> None:
    """Register changefeed's Python data sources (idempotent per session)."""
    key = id(spark)
    if key in _registered:
        return
    # Imported lazily: the sources import pyspark, which the engine-only install does not need.
    from changefeed.pipeline import sources

    for source in sources.all_sources():
        spark.dataSource.register(source)
    _registered.add(key)
    _clean_load_errors()


#: The last ``changefeed.exceptions.<Name>: <message>`` line of a Python worker's traceback.
_OUR_ERROR = re.compile(r"^changefeed\.exceptions\.(\w+): (.*)$", re.MULTILINE)
_cleaned = False


def ours_in(text: str) -> ChangefeedError | None:
    """Our error inside a Spark exception's text (a Python data source failed in a worker, and
    Spark wrapped the worker's traceback into an AnalysisException), rebuilt as itself."""
    found = _OUR_ERROR.findall(text)
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(exceptions, name, None)
    if not isinstance(cls, type) or not issubclass(cls, ChangefeedError):
        return None
    err = cls.__new__(cls)
    Exception.__init__(err, message.strip())
    return err


def _clean_load_errors() -> None:
    """``spark.read[Stream].format("changefeed" | "phoenix-cdc").load()`` fails with our one-line
    error (``TopicError: topic "x" does not exist``), not with a worker's Python traceback inside
    an AnalysisException: the sources check their options when Spark asks their schema, at load."""
    global _cleaned
    if _cleaned:
        return
    from pyspark.errors import AnalysisException
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.streaming.readwriter import DataStreamReader

    def wrap(load: Any) -> Any:
        @functools.wraps(load)
        def clean_load(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return load(self, *args, **kwargs)
            except AnalysisException as exc:
                ours = ours_in(str(exc))
                if ours is None:
                    raise
                raise ours from None

        return clean_load

    DataFrameReader.load = wrap(DataFrameReader.load)  # type: ignore[method-assign]
    DataStreamReader.load = wrap(DataStreamReader.load)  # type: ignore[method-assign]
    _cleaned = True
