# Shared by the GPU batch scripts; source it after setting W (the work folder) and, for a dry run on the
# replay, DRY (a trace): W made fresh, with its own MLflow store and spool; the NVML replay only for DRY;
# and `part NAME TIMEOUT_S command...`, one part under its own timeout (a failure never stops the others).
rm -rf "$W"; mkdir -p "$W"
export MLFLOW_TRACKING_URI=sqlite:///$W/mlflow.db RADT_EXT_SPOOL_DIR=$W/spool
unset RADT_EXT_NVML_REPLAY
[ -n "${DRY:-}" ] && export RADT_EXT_NVML_REPLAY=$DRY

part() {
  local name=$1 limit=$2; shift 2
  echo "== $name at ${SECONDS}s (timeout ${limit}s): $*"
  timeout -k 10 "$limit" "$@" > "$W/$name.log" 2>&1
  echo "== $name exited $? at ${SECONDS}s"
}
