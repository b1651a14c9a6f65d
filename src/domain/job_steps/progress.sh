# The job's progress (docs/design.md, "Progress"): $PROGRESS holds the phase the job is in and
# its counters, always replaced whole (a file of this writer's own made exclusively beside it,
# then renamed over it), so a reader sees one record or the one before. The verifying curl
# writes the download's counters by the same functions. A write that fails never fails the job.
progress_phase=""
progress_watcher=""
progress() {
    # progress PHASE [KEY=INTEGER]...
    local phase=$1 fields="" pair
    shift
    progress_stop_watch
    [[ $phase =~ ^[a-z][a-z-]{0,31}$ ]] || return 0
    for pair in "$@"; do
        [[ $pair =~ ^([a-z][a-z_]{0,31})=([0-9]{1,18})$ ]] || return 0
        fields+=", \"${BASH_REMATCH[1]}\": $((10#${BASH_REMATCH[2]}))"
    done
    progress_phase=$phase
    progress_write "$phase" "$fields"
}
progress_write() {
    # progress_write PHASE FIELDS: the record, "phase" and "updated_at" first (progress_end
    # reads them back in this form)
    local now temporary=${PROGRESS-}.$BASHPID.tmp
    [ -n "${PROGRESS-}" ] || return 0
    printf -v now '%(%s)T' -1
    # shellcheck disable=SC2015 # the temporary file goes when either fails
    (set -C && printf '{"format": 1, "phase": "%s", "updated_at": %s%s}\n' "$1" "$now" "$2" \
        >"$temporary") 2>/dev/null && mv -T -- "$temporary" "$PROGRESS" 2>/dev/null ||
        rm -f -- "$temporary"
}
progress_start() {
    # after step 1b: the attempt directory is the user's own; a job that ends before its
    # EXIT trap of step 4 ends its record here
    trap 'progress_end "$?"' EXIT
    progress checks
}
progress_end() {
    # progress_end STATUS: done, or the phase the job died in with its counters and exit code
    local status=$1 record phase fields="" shape
    [ -n "$progress_phase" ] || return 0
    progress_stop_watch
    phase=$progress_phase
    shape='^\{"format": 1, "phase": "([a-z][a-z-]*)", "updated_at": [0-9]+((, "[a-z_]+": [0-9]+)*)\}$'
    if record=$(head -c 4096 -- "$PROGRESS" 2>/dev/null) && [[ $record =~ $shape ]]; then
        phase=${BASH_REMATCH[1]} fields=${BASH_REMATCH[2]}
    fi
    if ((status == 0)); then
        progress_write "done" ', "ended": "done", "exit_code": 0'
    else
        progress_write "$phase" "$fields, \"ended\": \"failed\", \"exit_code\": $status"
    fi
}
progress_reading() {
    # progress_reading PHASE FD TOTAL: PHASE with bytes_done, the offset of this shell's
    # descriptor FD (shared with whatever reads from it), every second until the next phase
    local phase=$1 fd=$2 total=$3 value
    progress "$phase" bytes_done=0 bytes_total="$total"
    (
        while sleep 1; do
            value=$(proc_field "/proc/$$/fdinfo/$fd" pos:) || exit 0
            progress "$phase" bytes_done="$value" bytes_total="$total"
        done
    ) 8<&- 9<&- &
    progress_watcher=$!
}
proc_field() {
    # proc_field FILE KEY: the number of the line "KEY VALUE" of FILE (/proc/PID/io,
    # /proc/PID/fdinfo/FD); fails when FILE cannot be read or holds no such number
    local key value
    while read -r key value; do
        if [ "$key" = "$2" ]; then
            [[ $value =~ ^[0-9]{1,18}$ ]] || return 1
            printf '%s\n' "$value"
            return 0
        fi
    done <"$1"
    return 1
}
progress_stop_watch() {
    [ -n "$progress_watcher" ] || return 0
    kill "$progress_watcher" 2>/dev/null || :
    wait "$progress_watcher" 2>/dev/null || :
    rm -f -- "$PROGRESS.$progress_watcher.tmp"
    progress_watcher=""
}
progress_enroot() {
    # progress_enroot LOG: Enroot's stderr, as it prints it, into LOG, its phases recorded
    local line
    while IFS= read -r line || [ -n "$line" ]; do
        printf '%s\n' "$line" >>"$1"
        case $line in
        *"Extracting image layers..."*) progress extract ;;
        *"Creating squashfs filesystem..."*) progress squash ;;
        esac
    done
}
