# The project image: Python 3.11, Java 17 (Debian's OpenJDK), Spark 4.3.0 (the
# pyspark 4.3.0 package: its jars and bin/ scripts are a complete Spark), and
# mta-windows with the spark (pyspark's pandas, pyarrow and NumPy, and matplotlib for
# `mta-spark demo`'s plot), redis and couchbase extras.
#
# One image for every Spark role: the standalone master and workers and the jobs
# of docker-compose.yml, and the driver and executor pods of deploy/k8s (see
# deploy/docker/entrypoint.sh).
#
#   docker build -t mta-windows:0.1.0 .

# -- the project's wheel ---------------------------------------------------------
# The compiled cores (mta/_native.c, stores/_codec.c) are optional ext-modules: without a
# C compiler pip still builds a wheel, silently without them.  The slim image removes
# its compiler, so this stage installs one; the runtime stage gets only the wheel.
FROM python:3.11.13-slim-bookworm AS wheel
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY mta/ mta/
COPY stores/ stores/
COPY spark_ops/ spark_ops/
RUN python -m pip wheel --no-deps --no-cache-dir --wheel-dir /wheels .

# -- the runtime -------------------------------------------------------------------
FROM python:3.11.13-slim-bookworm

ARG SPARK_VERSION=4.3.0
ARG MTA_UID=10001

# Java 17: OpenJDK from Debian bookworm; JAVA_HOME through an architecture-independent link.
# libnss-wrapper: the entrypoint gives a uid without a passwd entry one (deploy/docker/entrypoint.sh)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless procps tini libnss-wrapper \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
    && /usr/lib/jvm/java-17/bin/java -version 2>&1 | grep -q 'version "17\.'

ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# the dependencies at the versions of deploy/docker/constraints.txt: the same in every build
COPY --from=wheel /wheels/ /tmp/wheels/
COPY deploy/docker/constraints.txt /opt/mta/constraints.txt
RUN python -m venv /opt/venv \
    && pip install --no-cache-dir -c /opt/mta/constraints.txt \
        "pyspark==${SPARK_VERSION}" \
        "$(ls /tmp/wheels/mta_windows-*.whl)[spark,redis,couchbase]" \
    && rm -rf /tmp/wheels \
    && python -c "import pyspark; assert pyspark.__version__ == '${SPARK_VERSION}', pyspark.__version__" \
    && mta-spark --help > /dev/null

# The build fails, rather than the image running the pure-Python engines and codec, when a
# compiled core did not make it into the wheel (pip only warns when one fails to build).
RUN python -c "import mta.native as n; assert n.AVAILABLE, n.WHY_NOT" \
    && python -c "import stores.codec as c; assert c.PACKS_IN_C, 'stores._codec is not built'"

# Spark from the pyspark package; executors run the same Python as the driver
ENV SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    SPARK_CONF_DIR=/opt/mta/conf \
    SPARK_WORKER_DIR=/opt/mta/work \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    MPLCONFIGDIR=/tmp/matplotlib

COPY deploy/docker/conf/ /opt/mta/conf/
COPY deploy/docker/entrypoint.sh /opt/mta/entrypoint.sh
COPY deploy/docker/refuse-placeholders.sh /opt/mta/refuse-placeholders.sh
COPY deploy/mta_spark_main.py /opt/mta/mta_spark_main.py

# an unprivileged user; /data is where compose mounts the shared volume.  What the jobs write
# is group 0's and as writable for it as for mta: OpenShift runs the image as a uid of its own
# choosing in group 0
RUN useradd --uid "${MTA_UID}" --user-group --create-home --home-dir /home/mta --shell /usr/sbin/nologin mta \
    && mkdir -p /data/incoming /opt/mta/work \
    && chown -R mta:0 /data /opt/mta/work /home/mta \
    && chmod -R g=u /data /opt/mta/work /home/mta \
    && chmod 0755 /opt/mta/entrypoint.sh /opt/mta/refuse-placeholders.sh

USER mta
WORKDIR /home/mta
EXPOSE 4040 7077 8080 8081
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/mta/entrypoint.sh"]
CMD ["mta-spark", "--help"]
