#!/bin/bash
# Entrypoint of the project image (the Dockerfile runs it under tini).
#
#   entrypoint.sh driver SPARK-SUBMIT-ARGS...   Spark on Kubernetes: the driver pod
#   entrypoint.sh executor                      Spark on Kubernetes: an executor pod
#   entrypoint.sh COMMAND [ARGS...]             anything else, run as given: mta-spark ...,
#                                               spark-class ...Master / ...Worker, spark-submit, bash
#
# Spark's Kubernetes backend starts its pods with the arguments "driver ..." or
# "executor" and the SPARK_* variables used below, as the entrypoint of Spark's
# own images expects; this script does the same with the Spark that the pyspark
# package ships ($SPARK_HOME).
set -euo pipefail

# Bind Spark (driver, executors, master, workers) to this container's own
# address: mta-spark otherwise defaults SPARK_LOCAL_IP to 127.0.0.1, which the
# other containers cannot reach.  Left alone when set, or when the container
# has no address of its own (host networking).
if [ -z "${SPARK_LOCAL_IP:-}" ]; then
  address=$(getent ahostsv4 "$(hostname)" 2>/dev/null | awk 'NR == 1 {print $1}' || true)
  case "$address" in
    "" | 127.*) ;;
    *) export SPARK_LOCAL_IP="$address" ;;
  esac
fi

: "${SPARK_HOME:?SPARK_HOME is not set (the image sets it to the pyspark package)}"
: "${JAVA_HOME:?JAVA_HOME is not set (the image sets it to Java 17)}"

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-${SPARK_LOCAL_IP:-0.0.0.0}}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    # JVM options Spark passes to executors as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
    java_opts=()
    while IFS= read -r opt; do
      [ -n "$opt" ] && java_opts+=("$opt")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//' || true)
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_HOME/jars/*"
    [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  "")
    exec mta-spark --help
    ;;
  *)
    exec "$@"
    ;;
esac
