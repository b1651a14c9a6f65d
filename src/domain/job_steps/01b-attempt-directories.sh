check_shared_chain "$WORKSPACE_ROOT"
for directory in "${ATTEMPT_PARENTS[@]}" "$JOB_DIR"; do
    check_directory "$directory" own
done
for directory in "$OUTPUT_DIR" "$JOB_HOME" "$JOB_ENROOT"; do
    if [ -e "$directory" ] || [ -L "$directory" ]; then
        check_directory "$directory" own
    fi
done
progress_start

